// Cleanup on SIGINT / SIGTERM / SIGHUP: temporary files that are being
// written and child processes that are running are registered here; the
// handler InstallSignalCleanup sets up (called once, from main) sends
// SIGTERM to every registered child's process group and reaps the child
// (SIGKILL after 2 s), then unlinks every registered path, then re-raises the signal with its default action, so the shell
// sees the usual "killed by SIGINT" status and nothing is left behind.
//
// The registry is a fixed table of slots, so the handler only reads memory
// and calls async-signal-safe functions (kill, waitpid, nanosleep, unlink,
// signal, raise).
#ifndef GPUSIM_SIM_BASE_CLEANUP_H_
#define GPUSIM_SIM_BASE_CLEANUP_H_

#include <sys/types.h>

#include <optional>
#include <string>

namespace gpusim {

// Registers `path` for removal if a signal arrives while this lives; the
// path is not touched otherwise. At most 64 at a time (more are not
// registered: a best effort, never an error).
class ScopedTempPath {
 public:
  // `directory`: emptied (its own entries, not recursively) and removed,
  // after every registered file.
  explicit ScopedTempPath(const std::string& path, bool directory = false);
  ~ScopedTempPath();
  ScopedTempPath(const ScopedTempPath&) = delete;
  ScopedTempPath& operator=(const ScopedTempPath&) = delete;

 private:
  int slot_ = -1;
};

// Registers a child that runs in its own process group (pgid = pid; spawn
// it with POSIX_SPAWN_SETPGROUP and pgroup 0): on a signal the whole group
// gets SIGTERM.
class ScopedChild {
 public:
  explicit ScopedChild(pid_t pid);
  ~ScopedChild();
  ScopedChild(const ScopedChild&) = delete;
  ScopedChild& operator=(const ScopedChild&) = delete;

 private:
  int slot_ = -1;
};

// Creates a new empty file (or, with `directory`, a directory), mode 0600
// (0700), named `prefix`, eight random letters or digits, then `suffix`, and
// registers it in `guard` BEFORE it exists, so a signal at any moment (in any
// thread) leaves nothing behind; mkstemp/mkdtemp then register would leave
// it if the signal fell in between. Returns the
// path, or "" with errno set. (A name that exists already is registered for
// an instant before the retry: a signal then would remove another's file,
// which 62^8 names make negligible.)
std::string CreateRegisteredTemp(const std::string& prefix, const std::string& suffix, bool directory,
                                 std::optional<ScopedTempPath>& guard);

// Installs the handlers (idempotent).
void InstallSignalCleanup();

}  // namespace gpusim

#endif  // GPUSIM_SIM_BASE_CLEANUP_H_
