#include "sim/import/json_stream.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "sim/base/status.h"
#include "sim/base/str_cat.h"

namespace gpusim::import_internal {

using str_internal::Cat;

namespace {

// The read buffer starts at kFirstRead and grows 4x (up to kReadBuffer) each
// time a read fills it: a small input costs no 1 MiB allocation, a large one
// is read in 1 MiB chunks after a few reads.
constexpr size_t kFirstRead = 1 << 16;
constexpr size_t kReadBuffer = 1 << 20;
static_assert(kFastWindow <= kFirstRead / 2 && kFastWindow < ByteSource::kBlockHeadroom);

// The bytes Scanner::Composite stops at: inside a string, and outside one.
constexpr std::array<bool, 256> ByteTable(std::string_view bytes) {
  std::array<bool, 256> t{};
  for (char c : bytes) t[static_cast<unsigned char>(c)] = true;
  return t;
}
constexpr std::array<bool, 256> kInString = ByteTable("\"\\");
constexpr std::array<bool, 256> kStructural = ByteTable("\"{}[]");

std::string Shown(int c) {
  if (c < 0) return "end of input";
  if (c >= 0x20 && c < 0x7f) return Cat("'", static_cast<char>(c), "'");
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%02x", c);
  return Cat("byte ", std::string_view(buf));
}

class Scanner {
 public:
  Scanner(ByteSource& source, const std::string& label)
      : source_(source), label_(label), buf_(kFirstRead, '\0') {}

  int64_t offset() const { return base_ + static_cast<int64_t>(pos_); }

  absl::Status Error(int64_t at, std::string_view what) const {
    return absl::InvalidArgumentError(
        Cat(OffsetPrefix(label_, at, source_.decompressed()), what));
  }

  // Next byte without consuming it; -1 at the end of input.
  absl::StatusOr<int> Peek() {
    if (pos_ == end_) RETURN_IF_ERROR(Fill());
    if (pos_ == end_) return -1;
    return static_cast<unsigned char>(buf_[pos_]);
  }

  absl::StatusOr<int> SkipWsAndPeek() {
    while (true) {
      if (pos_ == end_) {
        RETURN_IF_ERROR(Fill());
        if (pos_ == end_) return -1;
      }
      const char c = buf_[pos_];
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return static_cast<unsigned char>(c);
      ++pos_;
    }
  }

  // Consumes the next non-blank byte, which must be `c`.
  absl::Status Expect(char c, std::string_view context) {
    ASSIGN_OR_RETURN(int got, SkipWsAndPeek());
    if (got != static_cast<unsigned char>(c)) {
      return Error(offset(), Cat("expected '", c, "' ", context, ", got ", Shown(got),
                                 got < 0 ? " (truncated file?)" : ""));
    }
    ++pos_;
    return absl::OkStatus();
  }

  // Captures (out != nullptr) or skips one JSON value starting at the next
  // non-blank byte. Checks bracket nesting and string termination; the
  // caller's parser checks the rest.
  absl::Status Value(std::string* out) {
    ASSIGN_OR_RETURN(int c, SkipWsAndPeek());
    if (out != nullptr) out->clear();
    if (c == '{' || c == '[') return Composite(out);
    if (c == '"') return String(out);
    if (c < 0) return Error(offset(), "expected a value, got end of input (truncated file?)");
    return Scalar(out);
  }

  // The unread input from the cursor on, contiguous: at least `want` bytes
  // when the input has them (the unread tail moves to the buffer's front).
  // REQUIRES: want <= kFirstRead / 2.
  std::string_view Window(size_t want) {
    while (end_ - pos_ < want && !eof_ && deferred_.ok()) {
      if (blocks_ != 0) {
        absl::StatusOr<bool> in_blocks = NextBlock();
        if (!in_blocks.ok()) {
          deferred_ = in_blocks.status();
          break;
        }
        if (*in_blocks) continue;
      }
      if (pos_ > 0) {
        std::memmove(buf_.data(), buf_.data() + pos_, end_ - pos_);
        base_ += static_cast<int64_t>(pos_);
        end_ -= pos_;
        pos_ = 0;
      }
      // Grown as Fill() grows it, so that the tail moved is a small part
      // of what is read.
      if (last_read_full_ && buf_.size() < kReadBuffer) buf_.resize(std::min(buf_.size() * 4, kReadBuffer));
      absl::StatusOr<size_t> n = source_.Read(buf_.data() + end_, buf_.size() - end_);
      if (!n.ok()) {
        deferred_ = n.status();
        break;
      }
      last_read_full_ = end_ + *n == buf_.size();
      end_ += *n;
      eof_ = *n == 0;
    }
    return std::string_view(buf_.data() + pos_, end_ - pos_);
  }
  // Consumes `n` bytes of the last Window().
  void Skip(size_t n) { pos_ += n; }

  // Reads a string value into `raw` (escapes left as they are).
  absl::Status Key(std::string* raw) {
    ASSIGN_OR_RETURN(int c, SkipWsAndPeek());
    if (c != '"') {
      return Error(offset(), Cat("expected a string key, got ", Shown(c),
                                 c < 0 ? " (truncated file?)" : ""));
    }
    raw->clear();
    RETURN_IF_ERROR(String(raw));
    // Drop the quotes.
    *raw = raw->substr(1, raw->size() - 2);
    return absl::OkStatus();
  }

 private:
  absl::Status Fill() {
    // A read error Window() met is returned here, after the bytes before
    // it were consumed, as if no window had been read.
    if (!deferred_.ok()) return deferred_;
    if (blocks_ != 0) {
      ASSIGN_OR_RETURN(bool in_blocks, NextBlock());
      if (in_blocks) return absl::OkStatus();
    }
    base_ += static_cast<int64_t>(end_);
    pos_ = end_ = 0;
    if (last_read_full_ && buf_.size() < kReadBuffer) {
      buf_.resize(std::min(buf_.size() * 4, kReadBuffer));
    }
    ASSIGN_OR_RETURN(size_t n, source_.Read(buf_.data(), buf_.size()));
    end_ = n;
    eof_ = n == 0;
    last_read_full_ = n == buf_.size();
    return absl::OkStatus();
  }

  // Block mode (ByteSource::SwapBlock: no copy of the input): the next
  // block becomes buf_, the unread bytes moved in front of its own. False
  // when the source has no blocks (then it reads into buf_).
  absl::StatusOr<bool> NextBlock() {
    size_t begin = 0;
    ASSIGN_OR_RETURN(bool in_blocks, source_.SwapBlock(&spare_, &begin));
    blocks_ = in_blocks ? 1 : 0;
    if (!in_blocks) return false;
    if (begin == spare_.size()) {  // the end: buf_ keeps what is left
      eof_ = true;
      return true;
    }
    const size_t keep = end_ - pos_;  // < kFastWindow < kBlockHeadroom <= begin
    const int64_t at = offset();
    std::memcpy(spare_.data() + begin - keep, buf_.data() + pos_, keep);
    std::swap(buf_, spare_);
    pos_ = begin - keep;
    end_ = buf_.size();
    base_ = at - static_cast<int64_t>(pos_);
    return true;
  }

  absl::Status Composite(std::string* out) {
    closers_.clear();
    opened_at_.clear();
    bool in_string = false;
    bool escape = false;
    while (true) {
      if (pos_ == end_) {
        RETURN_IF_ERROR(Fill());
        if (pos_ == end_) {
          return Error(offset(),
                       Cat("unexpected end of input inside the ",
                           closers_.back() == '}' ? "object" : "array", " opened at byte ",
                           opened_at_.back(), " (truncated file?)"));
        }
      }
      const char* p = buf_.data() + pos_;
      const char* e = buf_.data() + end_;
      const char* q = p;
      bool done = false;
      // Only quotes, backslashes and brackets matter: runs of other bytes
      // are skipped by table lookup (Scanner::Value went from 21% to 17% of
      // a streamed replay's CPU time).
      while (q < e) {
        if (escape) {
          escape = false;
          ++q;
          continue;
        }
        if (in_string) {
          while (q < e && !kInString[static_cast<unsigned char>(*q)]) ++q;
          if (q == e) break;
          if (*q == '\\') {
            escape = true;
          } else {
            in_string = false;
          }
          ++q;
          continue;
        }
        while (q < e && !kStructural[static_cast<unsigned char>(*q)]) ++q;
        if (q == e) break;
        const char c = *q;
        if (c == '"') {
          in_string = true;
        } else if (c == '{' || c == '[') {
          closers_.push_back(c == '{' ? '}' : ']');
          opened_at_.push_back(base_ + (q - buf_.data()));
        } else {  // '}' or ']'
          if (closers_.back() != c) {
            return Error(base_ + (q - buf_.data()),
                         Cat("expected '", closers_.back(), "' to close the ",
                             closers_.back() == '}' ? "object" : "array", " opened at byte ",
                             opened_at_.back(), ", got '", c, "'"));
          }
          closers_.pop_back();
          opened_at_.pop_back();
          if (closers_.empty()) {
            ++q;
            done = true;
            break;
          }
        }
        ++q;
      }
      if (out != nullptr) out->append(p, static_cast<size_t>(q - p));
      pos_ = static_cast<size_t>(q - buf_.data());
      if (done) return absl::OkStatus();
    }
  }

  absl::Status String(std::string* out) {
    const int64_t start = offset();
    bool escape = false;
    bool first = true;
    while (true) {
      if (pos_ == end_) {
        RETURN_IF_ERROR(Fill());
        if (pos_ == end_) {
          return Error(offset(), Cat("unexpected end of input inside the string opened at byte ",
                                     start, " (truncated file?)"));
        }
      }
      const char* p = buf_.data() + pos_;
      const char* e = buf_.data() + end_;
      const char* q = p;
      if (first) {
        ++q;  // the opening quote
        first = false;
      }
      bool done = false;
      for (; q < e; ++q) {
        if (escape) {
          escape = false;
        } else if (*q == '\\') {
          escape = true;
        } else if (*q == '"') {
          ++q;
          done = true;
          break;
        }
      }
      if (out != nullptr) out->append(p, static_cast<size_t>(q - p));
      pos_ = static_cast<size_t>(q - buf_.data());
      if (done) return absl::OkStatus();
    }
  }

  absl::Status Scalar(std::string* out) {
    const int64_t start = offset();
    int64_t n = 0;
    while (true) {
      if (pos_ == end_) {
        RETURN_IF_ERROR(Fill());
        if (pos_ == end_) break;
      }
      const char c = buf_[pos_];
      if (c == ',' || c == '}' || c == ']' || c == ' ' || c == '\n' || c == '\r' || c == '\t') {
        break;
      }
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.')) {
        return Error(offset(), Cat("expected a value, got ", Shown(static_cast<unsigned char>(c))));
      }
      if (out != nullptr) out->push_back(c);
      ++pos_;
      ++n;
    }
    if (n == 0) return Error(start, "expected a value");
    return absl::OkStatus();
  }

  ByteSource& source_;
  const std::string& label_;
  std::string buf_;
  std::string spare_;  // block mode: the block before buf_, handed back
  int blocks_ = -1;    // block mode: -1 not known yet, 0 no, 1 yes
  size_t pos_ = 0;
  size_t end_ = 0;
  int64_t base_ = 0;  // input offset of buf_[0]
  bool last_read_full_ = false;
  bool eof_ = false;        // the source said end of input
  absl::Status deferred_;   // a read error met by Window()
  std::string closers_;
  std::vector<int64_t> opened_at_;
};

absl::Status ScanArray(Scanner& s, JsonStreamVisitor& visitor, std::string_view what) {
  RETURN_IF_ERROR(s.Expect('[', Cat("to open ", what)));
  std::string text;
  ASSIGN_OR_RETURN(int c, s.SkipWsAndPeek());
  if (c == ']') {
    RETURN_IF_ERROR(s.Expect(']', ""));
    return absl::OkStatus();
  }
  while (true) {
    ASSIGN_OR_RETURN(c, s.SkipWsAndPeek());
    const int64_t at = s.offset();
    size_t used = 0;
    if (c == '{') {
      ASSIGN_OR_RETURN(used, visitor.OnElementInPlace(s.Window(kFastWindow), at));
      s.Skip(used);
    }
    if (used == 0) {
      RETURN_IF_ERROR(s.Value(&text));
      text.reserve(text.size() + kJsonPadding);
      RETURN_IF_ERROR(visitor.OnElement(text, at));
    }
    ASSIGN_OR_RETURN(c, s.SkipWsAndPeek());
    if (c == ',') {
      RETURN_IF_ERROR(s.Expect(',', ""));
      continue;
    }
    if (c == ']') return s.Expect(']', "");
    return s.Error(s.offset(), Cat("expected ',' or ']' after an element of ", what, ", got ",
                                   Shown(c), c < 0 ? " (truncated file?)" : ""));
  }
}

}  // namespace

std::string OffsetPrefix(const std::string& label, int64_t offset, bool decompressed) {
  return Cat(label, ": byte ", offset, decompressed ? " of the decompressed input" : "", ": ");
}

absl::Status ScanJsonStream(ByteSource& source, const std::string& label,
                            std::string_view array_key, JsonStreamVisitor& visitor) {
  Scanner s(source, label);
  ASSIGN_OR_RETURN(int c, s.SkipWsAndPeek());
  if (c == '[') {
    RETURN_IF_ERROR(ScanArray(s, visitor, "the top-level array"));
  } else if (c == '{') {
    RETURN_IF_ERROR(s.Expect('{', ""));
    std::string key;
    std::string text;
    bool first = true;
    bool found_array = false;
    int64_t object_end = 0;  // where the top-level object's '}' is
    // The keys whose values are read, and where each was: a second one is
    // refused by name (issue 27: a second "traceEvents" was silently read
    // after the first), as the YAML loader refuses a duplicate key.
    std::vector<std::pair<std::string, int64_t>> read_keys;
    while (true) {
      ASSIGN_OR_RETURN(c, s.SkipWsAndPeek());
      if (first && c == '}') {
        object_end = s.offset();
        RETURN_IF_ERROR(s.Expect('}', ""));
        break;
      }
      first = false;
      const int64_t key_at = s.offset();
      RETURN_IF_ERROR(s.Key(&key));
      RETURN_IF_ERROR(s.Expect(':', Cat("after key \"", key, "\"")));
      if (key == array_key || visitor.WantsTopLevelKey(key)) {
        for (const auto& [k, at] : read_keys) {
          if (k == key) {
            return s.Error(key_at, Cat("a second top-level \"", key, "\" key (the first at byte ", at,
                                       "); a trace has one"));
          }
        }
        read_keys.emplace_back(key, key_at);
      }
      if (key == array_key) {
        found_array = true;
        RETURN_IF_ERROR(ScanArray(s, visitor, Cat("\"", array_key, "\"")));
      } else if (visitor.WantsTopLevelKey(key)) {
        ASSIGN_OR_RETURN(c, s.SkipWsAndPeek());
        const int64_t at = s.offset();
        RETURN_IF_ERROR(s.Value(&text));
        text.reserve(text.size() + kJsonPadding);
        RETURN_IF_ERROR(visitor.OnTopLevelValue(key, text, at));
      } else {
        RETURN_IF_ERROR(s.Value(nullptr));
      }
      ASSIGN_OR_RETURN(c, s.SkipWsAndPeek());
      if (c == ',') {
        RETURN_IF_ERROR(s.Expect(',', ""));
        continue;
      }
      if (c == '}') {
        object_end = s.offset();
        RETURN_IF_ERROR(s.Expect('}', ""));
        break;
      }
      return s.Error(s.offset(), Cat("expected ',' or '}' after the value of top-level key \"",
                                     key, "\", got ", Shown(c),
                                     c < 0 ? " (truncated file?)" : ""));
    }
    // A JSON object without the events array is some other JSON file, not
    // an empty trace (it replayed as "0 memory events", issue 17); the error
    // points at the object's end, like every scanner error a position (the
    // kineto fuzzer's contract).
    if (!found_array && !array_key.empty()) {
      return s.Error(object_end, Cat("no \"", array_key,
                                     "\" array at the top level: not a recorded trace gpusim reads"));
    }
  } else {
    return s.Error(s.offset(), Cat("expected '{' or '[' to start the JSON document, got ",
                                   Shown(c), c < 0 ? " (empty file)" : ""));
  }
  ASSIGN_OR_RETURN(c, s.SkipWsAndPeek());
  if (c >= 0) return s.Error(s.offset(), Cat("unexpected ", Shown(c), " after the JSON document"));
  return absl::OkStatus();
}

}  // namespace gpusim::import_internal
