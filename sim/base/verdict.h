// Note [Verdict]
// One answer to "will it fit", given first by every command that judges a
// step (run, explain, replay, report.html) and used by the ones that judge
// many (compare, advise), so they can never disagree. It is the answer as
// the framework will run the step, not a comparison of a peak with the
// datasheet:
//   - an XLA step under JAX: the executable's blocks (entry arguments,
//     non-aliased outputs, the one temp allocation) through JAX's BFC arena
//     of XLA_PYTHON_CLIENT_MEM_FRACTION x cudaMemGetInfo's total
//     (xla/pjrt/gpu/gpu_helpers.cc CreateBFCAllocator), at the configured
//     fraction (JAX's default 0.75). When that fails but a higher fraction
//     the device can give holds it, the verdict names that setting
//     (two decimals, as users write it); never a fraction above what is
//     left after the CUDA context.
//   - an eager (PyTorch) step or a recorded trace: the allocator replay on
//     the device's usable memory (total minus the CUDA context): it fits
//     when no allocation runs out of memory; `need` is the peak reserved.
// When nothing fits, `shortfall` is what is missing and a caller that can
// re-simulate (sim/step/verdict.h SuggestFit) names a setting that fits.
#ifndef GPUSIM_SIM_BASE_VERDICT_H_
#define GPUSIM_SIM_BASE_VERDICT_H_

#include <string>

#include "sim/base/json_writer.h"
#include "sim/base/units.h"

namespace gpusim {

struct Verdict {
  enum class Kind { kFits, kFitsWithSetting, kDoesNotFit };
  Kind kind = Kind::kFits;
  // How the step runs: "JAX defaults", "JAX (allocator.mem_fraction 0.9)",
  // "PyTorch's caching allocator", "the bfc allocator".
  std::string runtime;
  Bytes need;                // what the runtime must hold at its peak
  Bytes limit;               // what binds under the runtime as configured
  std::string limit_name;    // what `limit` is, in words
  std::string setting;       // kFitsWithSetting: "XLA_PYTHON_CLIENT_MEM_FRACTION=0.97"
  Bytes shortfall;           // kDoesNotFit: bytes missing (0: fragmentation, see why)
  std::string why;           // kDoesNotFit: why, when not only bytes
  std::string suggestion;    // kDoesNotFit, set by SuggestFit: "remat.policy=full (fits, +12% step)"

  bool fits() const { return kind != Kind::kDoesNotFit; }
  // The compare/advise column: "yes", "with XLA_PYTHON_CLIENT_MEM_FRACTION=0.97", "no".
  std::string Word() const;
  // The verdict line, without a leading label.
  std::string Line() const;
  // "fits" | "fits_with_setting" | "does_not_fit" (JSON).
  const char* KindName() const;
};

// The eager verdict from an allocator replay (see the Note): `oom` whether
// an allocation failed, `peak_reserved` the allocator's peak reserved bytes,
// `peak_live` the bytes live at the peak, `usable` the device's usable
// memory named `device`.
Verdict EagerVerdict(const std::string& runtime, bool oom, Bytes peak_reserved, Bytes peak_live, Bytes usable,
                     const std::string& device);

// The "verdict" object of every JSON output that judges a step.
void WriteVerdictJson(JsonWriter& w, const Verdict& v);

}  // namespace gpusim

#endif  // GPUSIM_SIM_BASE_VERDICT_H_
