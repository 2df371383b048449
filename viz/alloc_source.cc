#include "viz/alloc_source.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/trace/frames.h"
#include "viz/step_view.h"

namespace gpusim {
namespace viz_internal {
namespace {

// Events after an alloc searched for the compute event the recorder wrote
// for the op that made it (the same label, written right after the alloc
// and its frees; python/gpusim_torch/recorder.py).
constexpr int64_t kProducerWindow = 64;

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// A recorder's name "module.path:op" (python/gpusim_torch, Recorder._label):
// the part before the last ':' is the nn.Module path. Imports name blocks
// by address ("0x7f..."), which is no source.
bool IsRecorderName(std::string_view name) {
  if (name.empty() || name.rfind("0x", 0) == 0 || name.rfind("buffer ", 0) == 0) return false;
  return true;
}

std::string ProducerText(const TraceEvent& c) {
  std::string facts(OpKindName(c.kind));
  if (c.kind == OpKind::kMatmul && c.m > 0 && c.n > 0 && c.k > 0) {
    absl::StrAppend(&facts, " m=", c.m, " n=", c.n, " k=", c.k, c.batch > 1 ? absl::StrCat(" batch=", c.batch) : "");
  }
  absl::StrAppend(&facts, ", ", std::string(DTypeName(c.dtype)));
  return absl::StrCat(c.op.empty() ? c.name : c.op, " (", facts, ")");
}

}  // namespace

std::vector<AllocSource> AllocSources(const StepReport& r) {
  const Trace& tr = r.lowered.trace;
  const auto& bufs = r.lowered.buffers;
  std::vector<AllocSource> out(bufs.size());
  // Only a recorded trace's names are sources: a simulated step's buffers
  // are named by the model (and coloured by role).
  const bool recorded = r.program.ops.empty();
  for (size_t i = 0; i < bufs.size(); ++i) {
    const BufferInfo& b = bufs[i];
    if (b.alloc_event < 0 || static_cast<size_t>(b.alloc_event) >= tr.events.size()) continue;
    const TraceEvent& e = tr.events[static_cast<size_t>(b.alloc_event)];
    AllocSource& s = out[i];
    if (const std::optional<int32_t> f = UserFrame(tr.frames, e.stack); f.has_value()) {
      const StackFrame& fr = tr.frames[static_cast<size_t>(*f)];
      s.label = FrameLabel(fr);
      s.module = PythonModule(fr.file);
      s.from_frame = true;
    }
    if (!recorded || !IsRecorderName(e.name)) continue;
    if (s.label.empty()) {
      s.label = e.name;
      const size_t colon = e.name.rfind(':');
      if (colon != std::string::npos && colon > 0) s.module = e.name.substr(0, colon);
    }
    // The compute event the recorder wrote under the same label.
    const int64_t end = std::min<int64_t>(static_cast<int64_t>(tr.events.size()), b.alloc_event + kProducerWindow);
    for (int64_t k = b.alloc_event + 1; k < end; ++k) {
      const TraceEvent& c = tr.events[static_cast<size_t>(k)];
      if (c.type == EventType::kCompute && c.name == e.name) {
        s.op = ProducerText(c);
        break;
      }
    }
  }
  return out;
}

VizColorBy ResolveColorBy(const StepReport& r, const std::vector<AllocSource>& sources, VizColorBy requested) {
  if (requested != VizColorBy::kAuto) return requested;
  if (std::any_of(r.lowered.buffers.begin(), r.lowered.buffers.end(),
                  [](const BufferInfo& b) { return b.role != Role::kTemporary; })) {
    return VizColorBy::kRole;
  }
  if (std::any_of(sources.begin(), sources.end(), [](const AllocSource& s) { return !s.label.empty(); })) {
    return VizColorBy::kSource;
  }
  return VizColorBy::kAllocation;
}

std::string LabelColor(std::string_view label) {
  const uint64_t h = Fnv1a(label);
  const double hue = static_cast<double>(h % 360);
  const double sat = 0.50 + 0.20 * static_cast<double>((h >> 16) % 101) / 100;
  const double light = 0.45 + 0.15 * static_cast<double>((h >> 32) % 101) / 100;
  // HSL → RGB.
  const double c = (1 - std::fabs(2 * light - 1)) * sat;
  const double hp = hue / 60;
  const double x = c * (1 - std::fabs(std::fmod(hp, 2) - 1));
  double r = 0, g = 0, b = 0;
  switch (static_cast<int>(hp)) {
    case 0: r = c; g = x; break;
    case 1: r = x; g = c; break;
    case 2: g = c; b = x; break;
    case 3: g = x; b = c; break;
    case 4: r = x; b = c; break;
    default: r = c; b = x; break;
  }
  const double m = light - c / 2;
  auto byte = [&](double v) { return std::clamp(static_cast<int>(std::lround((v + m) * 255)), 0, 255); };
  return absl::StrFormat("#%02x%02x%02x", byte(r), byte(g), byte(b));
}

std::string_view AllocationColor(int64_t k) {
  static constexpr std::array<std::string_view, 10> kTableau10 = {
      "#4e79a7", "#f28e2c", "#e15759", "#76b7b2", "#59a14f", "#edc949", "#af7aa1", "#ff9da7", "#9c755f", "#bab0ab"};
  return kTableau10[static_cast<size_t>(((k % 10) + 10) % 10)];
}

std::string BufferColor(const StepReport& r, const std::vector<AllocSource>& sources, VizColorBy by, BufferId id) {
  const size_t i = static_cast<size_t>(id);
  switch (by) {
    case VizColorBy::kSource:
      if (i < sources.size() && !sources[i].label.empty()) return LabelColor(sources[i].label);
      return kUnknownSourceColor;
    case VizColorBy::kAllocation: return std::string(AllocationColor(id));
    case VizColorBy::kRole:
    case VizColorBy::kAuto: break;
  }
  return std::string(RoleColor(r.lowered.buffers[i].role));
}

std::vector<std::string> SourceLines(const AllocSource& s) {
  std::vector<std::string> out;
  if (s.label.empty()) {
    out.push_back("source: no stack or op recorded");
    return out;
  }
  out.push_back(absl::StrCat("from ", s.label));
  if (!s.module.empty()) out.push_back(absl::StrCat("module ", s.module));
  if (!s.op.empty()) {
    out.push_back(absl::StrCat("op ", s.op, "; tensor shape not recorded"));
  } else {
    out.push_back("op, shape, dtype: not recorded");
  }
  return out;
}

const char* ColorByName(VizColorBy by) {
  switch (by) {
    case VizColorBy::kAuto: return "auto";
    case VizColorBy::kRole: return "role";
    case VizColorBy::kSource: return "source";
    case VizColorBy::kAllocation: return "allocation";
  }
  return "role";
}

}  // namespace viz_internal
}  // namespace gpusim
