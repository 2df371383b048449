// Where each buffer of a step came from, for the charts' labels, colours
// and tooltips: the user's innermost Python frame (Note [The user's frame],
// sim/trace/frames.h) and its module, else the name a recorder gave the
// allocation, and the op that made it with the facts the trace holds.
//
// What each source knows (Note [What a recording says about a block]):
//   memory snapshot   frames (`_record_memory_history`, context "alloc" or
//                     "all"); no op, shape or dtype
//   Kineto trace      frames only with with_stack (python_function events);
//                     no op, shape or dtype on a [memory] event
//   gpusim_torch      the alloc's name "module.path:op" (the nn.Module path
//                     and the aten op), frames with --stacks, and the
//                     producing compute event's kind, dtype and matmul
//                     m, n, k; never the tensor's own shape
//   simulated step    the buffer's name, role and origin (no frames)
// A fact the trace does not hold is said to be unknown, never guessed.
#ifndef GPUSIM_VIZ_ALLOC_SOURCE_H_
#define GPUSIM_VIZ_ALLOC_SOURCE_H_

#include <string>
#include <string_view>
#include <vector>

#include "sim/step/step.h"
#include "viz/viz.h"

namespace gpusim {
namespace viz_internal {

struct AllocSource {
  // "modeling_bert.py:107 forward" (a frame), "fc:mm" (a recorder's name);
  // "" when nothing names it.
  std::string label;
  // "transformers.models.bert.modeling_bert" (the frame's Python module) or
  // "fc" (the recorder's nn.Module path); "" when unknown.
  std::string module;
  // "mm (matmul m=512 n=3072 k=768, bf16)": the op that made the block, as
  // the trace recorded it; "" when unknown.
  std::string op;
  bool from_frame = false;  // label is a recorded frame
};

// Per buffer of r.lowered.buffers.
std::vector<AllocSource> AllocSources(const StepReport& r);

// The colouring a chart uses: `requested`, or for kAuto the role where the
// step's roles say something (any buffer not "temporary"), else the source
// where any buffer has a label, else one colour per allocation (as
// memory_viz colours an Active Memory Timeline without categories).
VizColorBy ResolveColorBy(const StepReport& r, const std::vector<AllocSource>& sources, VizColorBy requested);

// A legible fill for `label`, the same for the same label in every chart
// and run: hue from a 64-bit FNV-1a hash of its bytes, saturation and
// lightness in a band dark text and white text both read on.
std::string LabelColor(std::string_view label);
// One of Tableau 10 for allocation `k` (memory_viz's schemeTableau10).
std::string_view AllocationColor(int64_t k);
// Unknown source: neutral grey.
inline constexpr char kUnknownSourceColor[] = "#c7c7c7";

// Buffer `id`'s fill under `by` (kAuto resolved first).
std::string BufferColor(const StepReport& r, const std::vector<AllocSource>& sources, VizColorBy by, BufferId id);

// Tooltip lines for a buffer's source: "from LABEL", "module M", "op ...",
// with what is unknown said once ("shape, dtype: not recorded").
std::vector<std::string> SourceLines(const AllocSource& s);

// "role", "source" or "allocation".
const char* ColorByName(VizColorBy by);

}  // namespace viz_internal
}  // namespace gpusim

#endif  // GPUSIM_VIZ_ALLOC_SOURCE_H_
