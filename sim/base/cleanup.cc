#include "sim/base/cleanup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>

namespace gpusim {
namespace {

constexpr int kPathSlots = 64;
constexpr int kChildSlots = 16;
constexpr size_t kMaxPath = 4096;

// A slot is claimed with a compare-exchange on `used` (0 free, 1 being
// filled, 2 ready), so the handler reads only complete paths.
struct PathSlot {
  std::atomic<int> used{0};
  bool directory = false;
  char path[kMaxPath];
};
PathSlot g_paths[kPathSlots];
std::atomic<pid_t> g_children[kChildSlots];

// Empties and removes a directory with async-signal-safe calls only
// (getdents64 rather than readdir); two passes, since unlinking while
// reading may skip entries.
void RemoveDirectory(const char* path) {
  struct Dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[1];
  };
  for (int pass = 0; pass < 2; ++pass) {
    const int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    alignas(8) char buf[4096];
    long n;
    while ((n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
      for (long off = 0; off < n;) {
        const Dirent64* d = reinterpret_cast<const Dirent64*>(buf + off);
        const char* name = d->d_name;
        if (!(name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0')))) unlinkat(fd, name, 0);
        off += d->d_reclen;
      }
    }
    close(fd);
  }
  rmdir(path);
}

// Ends a registered child's process group and reaps the child, with
// async-signal-safe calls only: SIGTERM, up to 2 s for it to exit, then
// SIGKILL. Reaping before any path is removed matters: a child still
// running could create the file it was writing again after its unlink.
void EndChild(pid_t pid) {
  kill(-pid, SIGTERM);
  const struct timespec tick = {0, 10 * 1000 * 1000};
  for (int i = 0; i < 200; ++i) {
    const pid_t r = waitpid(pid, nullptr, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) return;  // reaped, or not ours to reap
    nanosleep(&tick, nullptr);
  }
  kill(-pid, SIGKILL);
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

void OnSignal(int sig) {
  const int saved_errno = errno;
  for (std::atomic<pid_t>& c : g_children) {
    const pid_t pid = c.load();
    if (pid > 0) EndChild(pid);
  }
  for (PathSlot& s : g_paths) {
    if (s.used.load() == 2 && !s.directory) unlink(s.path);
  }
  for (PathSlot& s : g_paths) {
    if (s.used.load() == 2 && s.directory) RemoveDirectory(s.path);
  }
  errno = saved_errno;
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

ScopedTempPath::ScopedTempPath(const std::string& path, bool directory) {
  if (path.size() >= kMaxPath) return;
  for (int i = 0; i < kPathSlots; ++i) {
    int expected = 0;
    if (g_paths[i].used.compare_exchange_strong(expected, 1)) {
      std::memcpy(g_paths[i].path, path.c_str(), path.size() + 1);
      g_paths[i].directory = directory;
      g_paths[i].used.store(2);
      slot_ = i;
      return;
    }
  }
}

ScopedTempPath::~ScopedTempPath() {
  if (slot_ >= 0) g_paths[slot_].used.store(0);
}

ScopedChild::ScopedChild(pid_t pid) {
  for (int i = 0; i < kChildSlots; ++i) {
    pid_t expected = 0;
    if (g_children[i].compare_exchange_strong(expected, pid)) {
      slot_ = i;
      return;
    }
  }
}

ScopedChild::~ScopedChild() {
  if (slot_ >= 0) g_children[slot_].store(0);
}

std::string CreateRegisteredTemp(const std::string& prefix, const std::string& suffix, bool directory,
                                 std::optional<ScopedTempPath>& guard) {
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::random_device seed;
  std::minstd_rand next(seed());
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string path = prefix;
    for (int i = 0; i < 8; ++i) path += kChars[next() % (sizeof(kChars) - 1)];
    path += suffix;
    guard.emplace(path, directory);  // registered before it exists
    if (directory) {
      if (mkdir(path.c_str(), 0700) == 0) return path;
    } else {
      const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (fd >= 0) {
        close(fd);
        return path;
      }
    }
    const int err = errno;
    guard.reset();
    if (err != EEXIST) {
      errno = err;
      return "";
    }
  }
  errno = EEXIST;
  return "";
}

void InstallSignalCleanup() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
}

}  // namespace gpusim
