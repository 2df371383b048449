// Note [Decompressing with ISA-L] (sim/import/byte_source.cc): a gzip file
// read through OpenByteSource gives zlib's bytes and zlib's errors, after
// the same number of bytes: one member, concatenated members, bytes after a
// member, truncation at many points, corrupt data and CRCs.
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "sim/import/byte_source.h"

namespace gpusim::byte_source_test {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) { return testing::TempDir() + "/byte_source_" + name; }

std::string Gzip(const std::string& data, int level) {
  const std::string path = TempPath("tmp.gz");
  gzFile f = gzopen(path.c_str(), level == 1 ? "wb1" : "wb9");
  gzwrite(f, data.data(), static_cast<unsigned>(data.size()));
  gzclose(f);
  std::FILE* in = std::fopen(path.c_str(), "rb");
  std::string out;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, in)) > 0) out.append(buf, n);
  std::fclose(in);
  return out;
}

void Write(const std::string& path, const std::string& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

struct Outcome {
  std::string bytes;
  std::string error;  // "" when none
};

// What zlib's gzread delivers, and its error text.
Outcome ZlibReads(const std::string& path) {
  Outcome o;
  gzFile f = gzopen(path.c_str(), "rb");
  std::vector<char> buf(1 << 16);
  while (true) {
    const int got = gzread(f, buf.data(), static_cast<unsigned>(buf.size()));
    int err = 0;
    const char* msg = gzerror(f, &err);
    if (got < 0 || (got == 0 && err != Z_OK)) {
      std::string m(msg);
      if (m.rfind(path + ": ", 0) == 0) m = m.substr(path.size() + 2);
      o.error = m;
      break;
    }
    if (got == 0) break;
    o.bytes.append(buf.data(), static_cast<size_t>(got));
  }
  gzclose(f);
  return o;
}

// What OpenByteSource delivers, and its error message.
Outcome SourceReads(const std::string& path) {
  Outcome o;
  auto source = OpenByteSource(path);
  if (!source.ok()) {
    o.error = std::string(source.status().message());
    return o;
  }
  std::vector<char> buf(1 << 16);
  while (true) {
    auto got = (*source)->Read(buf.data(), buf.size());
    if (!got.ok()) {
      o.error = std::string(got.status().message());
      break;
    }
    if (*got == 0) break;
    o.bytes.append(buf.data(), *got);
  }
  return o;
}

// zlib's bytes and error. How many bytes come before an error depends on
// the sizes asked for (gzread drops what one failing call decoded), so
// there the bytes must agree as far as both go, and the message must give
// zlib's error after the bytes this source delivered.
void ExpectSameAsZlib(const std::string& path, const std::string& what) {
  const Outcome z = ZlibReads(path);
  const Outcome s = SourceReads(path);
  if (z.error.empty()) {
    EXPECT_EQ(s.error, "") << what;
    ASSERT_EQ(s.bytes.size(), z.bytes.size()) << what;
    EXPECT_TRUE(s.bytes == z.bytes) << what;
    return;
  }
  const size_t n = std::min(s.bytes.size(), z.bytes.size());
  EXPECT_TRUE(s.bytes.compare(0, n, z.bytes, 0, n) == 0) << what;
  EXPECT_THAT(s.error, HasSubstr(path + ": gzip: " + z.error + " after " + std::to_string(s.bytes.size()) +
                                 " decompressed bytes"))
      << what;
}

std::string Document(int events) {
  std::string doc = "{\"traceEvents\": [\n";
  for (int i = 0; i < events; ++i) {
    doc += (i == 0 ? "" : ",") + std::string("{\"ph\": \"i\", \"name\": \"[memory]\", \"ts\": ") + std::to_string(i) +
           ", \"args\": {\"Addr\": " + std::to_string(i * 7919 % 100003) + ", \"Bytes\": " + std::to_string(i % 977) +
           "}}\n";
  }
  return doc + "]}\n";
}

TEST(ByteSourceTest, GzipGivesZlibsBytesAndErrors) {
  const std::string doc = Document(40000);  // ~3 MB: several input and output buffers
  const std::string one = Gzip(doc, 1);
  const std::string path = TempPath("case.json.gz");
  Write(path, one);
  ExpectSameAsZlib(path, "one member");
  EXPECT_EQ(SourceReads(path).bytes, doc);
  Write(path, one + Gzip("tail member\n", 9));
  ExpectSameAsZlib(path, "two members");
  Write(path, one + "trailing bytes that are not gzip");
  ExpectSameAsZlib(path, "bytes after the member");
  for (size_t cut : {size_t{10}, size_t{100}, one.size() / 3, one.size() / 2, one.size() - 9, one.size() - 4,
                     one.size() - 1}) {
    Write(path, one.substr(0, cut));
    ExpectSameAsZlib(path, "cut at " + std::to_string(cut));
  }
  for (size_t at : {one.size() / 4, one.size() / 2, one.size() - 8, one.size() - 3}) {
    std::string bad = one;
    bad[at] = static_cast<char>(bad[at] ^ 0x5a);
    Write(path, bad);
    ExpectSameAsZlib(path, "byte " + std::to_string(at) + " flipped");
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace gpusim::byte_source_test
