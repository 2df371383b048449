// libFuzzer target: the Megatron-LM argument parser (sim/config/
// megatron_args.h; issue 27: --micro-batch-size 2^62 on 8 GPUs wrapped a
// product and divided by zero, --global-batch-size 8000000000 scheduled a
// billion micro-batches). The input's first line is the world size, the
// rest a pasted launch line. A rejection must be InvalidArgument naming the
// argument or "megatron"; an accepted line must give a consistent layout:
// TP x PP x CP x DP = world size, 1 to 65,536 micro-batches (Note [Bounded
// expansion]), a global batch of micro x DP x micro-batches, positive sizes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/numbers.h"
#include "sim/config/megatron_args.h"
#include "sim/base/checked.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusim;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const size_t nl = text.find('\n');
  int64_t world = 8;
  if (nl != std::string::npos && (!absl::SimpleAtoi(text.substr(0, nl), &world) || world < 1)) return 0;
  const std::string line = nl == std::string::npos ? text : text.substr(nl + 1);
  SourceLocation at;
  at.file = "fuzz.yaml";
  at.line = 3;
  at.col = 9;
  absl::StatusOr<std::vector<MegatronArg>> args = SplitMegatronArgs(line, at);
  if (!args.ok()) {
    fuzz::CheckRejection(args.status(), {absl::StatusCode::kInvalidArgument}, {"fuzz.yaml", "megatron"});
    return 0;
  }
  RunSpec run;
  run.megatron.world_size = world;
  const absl::Status st = ApplyMegatronArgs(*args, &run);
  if (!st.ok()) {
    fuzz::CheckRejection(st, {absl::StatusCode::kInvalidArgument}, {"megatron", "--", "exceeds 2^63 - 1"});
    return 0;
  }
  const MegatronSpec& g = run.megatron;
  const __int128 ranks = static_cast<__int128>(run.parallelism.tensor) * g.pipeline * g.context * g.data;
  const __int128 batch = static_cast<__int128>(run.batch.per_device) * g.data * g.microbatches;
  if (ranks != world || g.microbatches < 1 || g.microbatches > kMaxExpandedIterations || batch != g.global_batch ||
      run.model.vocab < 1 || run.model.mlp_dim < 1 || run.batch.per_device < 1) {
    fuzz::Fail("an inconsistent layout accepted", absl::InternalError(line));
  }
  return 0;
}
