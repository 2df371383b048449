#include "sim/import/memory_timeline.h"

#include <array>
#include <charconv>
#include <limits>

#include "sim/base/status.h"
#include "sim/import/json_stream.h"
#include "sim/base/str_cat.h"

namespace gpusim {

using import_internal::OffsetPrefix;
using str_internal::Cat;

namespace {

bool IsBlank(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

class TimelineVisitor : public import_internal::JsonStreamVisitor {
 public:
  TimelineVisitor(const std::string& label, bool decompressed, RecordedTrace& out)
      : label_(label), decompressed_(decompressed), out_(out) {}

  absl::Status OnElement(const std::string& text, int64_t offset) override {
    std::array<int64_t, 4> v{};
    RETURN_IF_ERROR(ParseRow(text, offset, v));
    const int64_t t = v[0], action = v[1], bytes = v[2], category = v[3];
    if (bytes == std::numeric_limits<int64_t>::min()) {
      return Error(offset, Cat("bytes ", bytes, " is out of range"));
    }
    if (category < 0 || category > 7) {
      return Error(offset, Cat("category ", category, " is not one of 0..7"));
    }
    if (pending_bump_.has_value()) {
      const Pending p = *pending_bump_;
      pending_bump_.reset();
      if (action != 3 || t != p.t || bytes != p.bytes) {
        return Error(offset, Cat("expected the second row of the increment-version pair begun "
                                 "at byte ", p.offset, " ([", p.t, ", 3, ", p.bytes, ", ...])"));
      }
      RecordedMemoryEvent m;
      m.kind = MemoryEventKind::kIncrementVersion;
      m.size = Bytes(bytes);
      m.time = SimTime(t);
      m.category = MemoryTimelineCategoryRole(category);
      m.previous_category = MemoryTimelineCategoryRole(p.category);
      out_.memory_events.push_back(m);
      return absl::OkStatus();
    }
    RecordedMemoryEvent m;
    m.time = SimTime(t);
    m.category = MemoryTimelineCategoryRole(category);
    switch (action) {
      case 1:
      case 2:
        if (bytes < 0) return Error(offset, Cat("negative bytes ", bytes, " on a create row"));
        m.kind = action == 1 ? MemoryEventKind::kPreexisting : MemoryEventKind::kAlloc;
        m.size = Bytes(bytes);
        break;
      case 3:
        if (bytes > 0) {
          return Error(offset, "increment-version pair must start with the -bytes row");
        }
        pending_bump_ = Pending{t, -bytes, category, offset};
        return absl::OkStatus();
      case 4:
        if (bytes > 0) return Error(offset, Cat("positive bytes ", bytes, " on a destroy row"));
        m.kind = MemoryEventKind::kFree;
        m.size = Bytes(-bytes);
        break;
      default:
        return Error(offset, Cat("unknown action ", action, " (expected 1..4)"));
    }
    out_.memory_events.push_back(m);
    return absl::OkStatus();
  }

  // Called only for a top-level object, which a raw timeline never is.
  bool WantsTopLevelKey(std::string_view /*key*/) override {
    saw_object_ = true;
    return false;
  }

  absl::Status Finish(int64_t end_offset) const {
    if (saw_object_) {
      return absl::InvalidArgumentError(
          Cat(label_, ": not a memory timeline raw file (expected a top-level array of "
                      "[timestamp_ns, action, bytes, category] rows, got an object)"));
    }
    if (pending_bump_.has_value()) {
      return Error(end_offset, Cat("increment-version pair begun at byte ",
                                   pending_bump_->offset, " has no second row"));
    }
    return absl::OkStatus();
  }

 private:
  struct Pending {
    int64_t t, bytes, category, offset;
  };

  absl::Status ParseRow(const std::string& text, int64_t offset, std::array<int64_t, 4>& v) const {
    const char* p = text.data();
    const char* e = p + text.size();
    auto expected = [&](std::string_view what) {
      return Error(offset + (p - text.data()),
                   Cat("expected ", what, " in a [timestamp_ns, action, bytes, category] row"));
    };
    if (p == e || *p != '[') return expected("'['");
    ++p;
    for (size_t i = 0; i < 4; ++i) {
      while (p < e && IsBlank(*p)) ++p;
      auto [q, ec] = std::from_chars(p, e, v[i]);
      if (ec != std::errc() || q == p) return expected("an integer");
      p = q;
      while (p < e && IsBlank(*p)) ++p;
      const char want = i < 3 ? ',' : ']';
      if (p == e || *p != want) return expected(i < 3 ? "','" : "']' after 4 values");
      ++p;
    }
    return absl::OkStatus();
  }

  absl::Status Error(int64_t offset, std::string_view what) const {
    return absl::InvalidArgumentError(Cat(OffsetPrefix(label_, offset, decompressed_), what));
  }

  const std::string& label_;
  bool decompressed_;
  RecordedTrace& out_;
  std::optional<Pending> pending_bump_;
  bool saw_object_ = false;
};

}  // namespace

std::optional<Role> MemoryTimelineCategoryRole(int64_t category) {
  switch (category) {
    case 0: return Role::kParameter;
    case 1: return Role::kOptimizerState;
    case 2: return Role::kInputBatch;
    case 3: return Role::kTemporary;
    case 4: return Role::kActivation;
    case 5: return Role::kGradient;
    case 6: return Role::kTemporary;  // autograd detail
    default: return std::nullopt;
  }
}

absl::StatusOr<RecordedTrace> ImportMemoryTimelineRaw(ByteSource& source,
                                                      const std::string& label) {
  RecordedTrace out;
  out.metadata.source_file = label;
  out.metadata.format = "memory_timeline";
  TimelineVisitor visitor(label, source.decompressed(), out);
  RETURN_IF_ERROR(import_internal::ScanJsonStream(source, label, "", visitor));
  RETURN_IF_ERROR(visitor.Finish(0));
  return out;
}

absl::StatusOr<RecordedTrace> ImportMemoryTimelineRaw(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, OpenByteSource(path));
  return ImportMemoryTimelineRaw(*source, path);
}

}  // namespace gpusim
