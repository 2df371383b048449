#include "sim/replay/explain_trace.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/base/status.h"
#include "sim/replay/replay.h"
#include "sim/base/json_writer.h"
#include "sim/trace/frames.h"
#include "sim/trace/validate.h"

namespace gpusim {

TracePeak ExplainTracePeak(const Trace& trace, const std::string& source, int top) {
  TracePeak p;
  p.source = source;
  p.preexisting = trace.preexisting;
  p.frames = trace.frames;
  const TraceStats stats = ComputeTraceStats(trace);
  p.peak_live = stats.peak_live;
  p.peak_event = stats.peak_event;
  // The live set just after the peak event (ComputeTraceStats's rules: a
  // re-alloc of a live id replaces it; frees of non-live ids are ignored).
  absl::flat_hash_map<BufferId, int64_t> live;  // buffer → its alloc event
  for (int64_t i = 0; i <= p.peak_event; ++i) {
    const TraceEvent& e = trace.events[static_cast<size_t>(i)];
    if (e.type == EventType::kAlloc) {
      live[e.buffer] = i;
    } else if (e.type == EventType::kFree) {
      live.erase(e.buffer);
    }
  }
  std::vector<TracePeakBlock> blocks;
  blocks.reserve(live.size());
  for (const auto& [buffer, at] : live) {
    const TraceEvent& e = trace.events[static_cast<size_t>(at)];
    blocks.push_back({buffer, e.name, e.size, at, e.stack});
    if (!e.stack.empty()) ++p.with_stack;
  }
  p.live_blocks = static_cast<int64_t>(blocks.size());
  std::sort(blocks.begin(), blocks.end(), [](const TracePeakBlock& a, const TracePeakBlock& b) {
    return a.size != b.size ? a.size > b.size : a.alloc_event < b.alloc_event;
  });
  if (top >= 0 && blocks.size() > static_cast<size_t>(top)) blocks.resize(static_cast<size_t>(top));
  p.largest = std::move(blocks);
  return p;
}

absl::StatusOr<Trace> LoadTraceForExplain(const std::string& path) {
  ASSIGN_OR_RETURN(Input in, SniffInput(path));
  return LoadTraceForExplain(in);
}

absl::StatusOr<Trace> LoadTraceForExplain(const Input& in) {
  ASSIGN_OR_RETURN(LoadedRecording loaded, LoadRecording(in));
  if (loaded.native.has_value()) {
    RETURN_IF_ERROR(ValidateTrace(*loaded.native));
    return std::move(*loaded.native);
  }
  ToNativeOptions o;
  o.include_gpu_ops = false;
  return ToNativeTrace(loaded.snapshot.has_value() ? loaded.snapshot->trace : loaded.recorded, o);
}


std::string RenderTracePeakText(const TracePeak& p, int frames_per_block) {
  std::string out;
  absl::StrAppend(&out, "peak of ", p.source, ": ", FormatBytes(p.peak_live), " live (requested bytes)");
  absl::StrAppend(&out, p.peak_event < 0 ? std::string(" before the first event")
                                         : absl::StrCat(" after event ", p.peak_event));
  absl::StrAppend(&out, absl::StrFormat("; %d blocks live, %d with a recorded stack", p.live_blocks, p.with_stack));
  if (p.preexisting > Bytes(0)) absl::StrAppend(&out, "; ", FormatBytes(p.preexisting), " preexisting (no block)");
  absl::StrAppend(&out, "\n");
  for (const TracePeakBlock& b : p.largest) {
    absl::StrAppend(&out, absl::StrFormat("  %s  buffer %d%s, allocated at event %d\n", FormatBytes(b.size), b.buffer,
                                          b.name.empty() ? "" : absl::StrCat(" (", b.name, ")"), b.alloc_event));
    if (b.stack.empty()) {
      absl::StrAppend(&out, "      (no stack recorded)\n");
      continue;
    }
    // The user's frame first, then the stack as memory_viz shows it (Note
    // [memory_viz's frame filter], sim/trace/frames.h).
    if (const std::optional<int32_t> f = UserFrame(p.frames, b.stack); f.has_value()) {
      const StackFrame& fr = p.frames[static_cast<size_t>(*f)];
      const std::string module = PythonModule(fr.file);
      absl::StrAppend(&out, "      from ", FrameLabel(fr), module.empty() ? "" : absl::StrCat(" (module ", module, ")"),
                      "\n");
    }
    for (const std::string& line :
         ShownFrameLines(p.frames, b.stack, static_cast<size_t>(std::max(frames_per_block, 0)))) {
      absl::StrAppend(&out, "      ", line, "\n");
    }
  }
  return out;
}

std::string RenderTracePeakJson(const TracePeak& p) {
  JsonWriter w;
  w.BeginObject()
      .String("source", p.source)
      .Int("peak_live_bytes", p.peak_live.value())
      .Int("peak_event", p.peak_event)
      .Int("preexisting_bytes", p.preexisting.value())
      .Int("live_blocks", p.live_blocks)
      .Int("blocks_with_stack", p.with_stack);
  w.BeginArray("largest");
  for (const TracePeakBlock& b : p.largest) {
    w.BeginObject()
        .Int("buffer", b.buffer)
        .String("name", b.name)
        .Int("bytes", b.size.value())
        .Int("alloc_event", b.alloc_event);
    const std::vector<int32_t> shown = ShownStack(p.frames, b.stack);
    if (const std::optional<int32_t> f = UserFrame(p.frames, b.stack); f.has_value()) {
      const StackFrame& fr = p.frames[static_cast<size_t>(*f)];
      w.String("source", FrameLabel(fr)).String("module", PythonModule(fr.file));
    }
    w.Int("frames_hidden", static_cast<int64_t>(b.stack.size() - shown.size()));
    w.BeginArray("stack");
    for (int32_t f : shown) {
      const StackFrame& fr = p.frames[static_cast<size_t>(f)];
      w.BeginObject().String("function", fr.function).String("file", fr.file).Int("line", fr.line).EndObject();
    }
    w.EndArray().EndObject();
  }
  w.EndArray().EndObject();
  return w.Finish();
}

}  // namespace gpusim
