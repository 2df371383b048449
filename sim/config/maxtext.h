// MaxText run configs (issue 13): a run config may hold
//
//   device: h100-sxm-80gb
//   maxtext: {model_name: llama2-7b, per_device_batch_size: 1, max_target_length: 4096,
//             remat_policy: minimal_flash, attention: cudnn_flash_te, ici_fsdp_parallelism: 2}
//
// with MaxText's own key names and defaults (MaxText/configs/base.yml) and
// its model shapes (MaxText/configs/models/*.yml), both as of MaxText commit
// 4bf3beaa (2025-03-11, the commit the param_scan_axis report links; the
// table is in maxtext_keys.cc). The block is lowered into gpusim's own keys
// (model, optimizer, loop, remat, parallelism, batch) and simulated by the
// `llama` family under XLA semantics, so a `maxtext:` block and the same step
// written in gpusim keys give the same bytes.
//
// Every base.yml key is one of three kinds (`gpusim list`-style listing in
// MaxTextKeyDocs): modelled (it sets a gpusim setting), declared as not
// affecting the device step's memory or time (logging, checkpointing, data
// paths, decoding: accepted, listed in the report), or modelled only at its
// base.yml default (any other value is refused by name). A key that is not
// in base.yml is refused with the nearest key (the schema).
//
// Beside `maxtext:` a run config may write `device`, `framework` (jax only),
// `allocator`, `xla` and `parallelism.gather_dtype` (an XLA choice MaxText
// has no key for); a gpusim key that the block sets (`model`, `batch`, ...)
// is refused, naming the MaxText key to write instead.
#ifndef GPUSIM_SIM_CONFIG_MAXTEXT_H_
#define GPUSIM_SIM_CONFIG_MAXTEXT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/config/node.h"
#include "sim/config/spec.h"

namespace gpusim {

// The MaxText commit whose base.yml, models/*.yml and
// calculate_tflops_training_per_device (MaxText/maxtext_utils.py) gpusim
// follows.
inline constexpr const char* kMaxTextCommit = "4bf3beaa";

// Every base.yml key, in base.yml order (the schema of `maxtext:`).
std::vector<std::string> MaxTextKeys();

// MaxText's own TFLOP count for one train step on one device
// (calculate_tflops_training_per_device at kMaxTextCommit, dense decoder
// blocks and its MoE branch for num_experts > 1): the "TFLOP/s/device" of
// MaxText's log is total / step seconds.
struct MaxTextTflops {
  double learnable_weight = 0;  // (FFN + QKV + projection) x layers + embedding, x 3
  double attention = 0;         // 4 B S^2 H Dh x layers x 3 (causality not discounted)
  double total = 0;
};

namespace internal {

// The result of lowering a `maxtext:` block.
struct MaxTextLowering {
  ConfigNode root;   // the run config in gpusim keys (no `maxtext:`)
  MaxTextSpec spec;  // what the report adds (RunSpec::maxtext)
};

// REQUIRES: root.Find("maxtext") != nullptr, keys validated by the schema.
// Errors name the key path and where it was written, e.g.
//   FILE:4:3: maxtext.attention: 'flash' (the Pallas GPU kernel) is not modelled; ...
absl::StatusOr<MaxTextLowering> LowerMaxTextRun(const ConfigNode& root);

}  // namespace internal
}  // namespace gpusim

#endif  // GPUSIM_SIM_CONFIG_MAXTEXT_H_
