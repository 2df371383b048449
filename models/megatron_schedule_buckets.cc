// Note [Megatron gradient buffer layout]
// megatron/core/distributed/param_and_grad_buffer.py (NVIDIA/Megatron-LM at
// 40df28b5, 2025-05), _ParamAndGradBuffer.__init__: the parameters are
// taken in reverse (params[::-1]); under --use-distributed-optimizer each
// parameter starts at a multiple of 64 elements (_pad_start_of_param_if_needed)
// and each bucket ends at a multiple of lcm(dp, 128)
// (_pad_end_of_bucket_if_needed, so that every rank's shard is equal and
// 256-byte aligned; lcm(dp, 128, 2^16) under pad_buckets_for_high_nccl_busbw,
// not an argument of pretrain_gpt.py); without it nothing is padded. A bucket
// closes once it holds bucket_size elements (counted from its start, padding
// included) after a parameter, and a shared embedding weight (tied, PP > 1,
// distributed optimizer: _does_param_require_new_bucket) gets a bucket of its
// own. The buffer holds numel = the last bucket's end elements: grad_data in
// the grad dtype, and param_data in the params dtype under the distributed
// optimizer (the parameters become views into it). Bucketing itself
// (distributed_data_parallel.py): bucket_size = --ddp-bucket-size, default
// max(40M, 1M x dp); none without --overlap-grad-reduce, on pipeline ranks
// after the first, and for model chunks after the first (training.py
// get_model, disable_bucketing).
#include "models/megatron_schedule_buckets.h"

#include "sim/base/status.h"

namespace gpusim {
namespace {

int64_t Pad(int64_t n, int64_t divisor) { return (n + divisor - 1) / divisor * divisor; }

int64_t Lcm(int64_t a, int64_t b) {
  int64_t x = a, y = b;
  while (y != 0) {
    const int64_t t = x % y;
    x = y;
    y = t;
  }
  return a / x * b;
}

}  // namespace

MegatronBufferLayout LayOutGradBuffer(const std::vector<int64_t>& numel, const std::vector<bool>& shared_embedding,
                                      int64_t bucket_size, bool distributed_optimizer, int64_t dp) {
  GPUSIM_CHECK(!numel.empty() && numel.size() == shared_embedding.size() && dp >= 1);
  MegatronBufferLayout out;
  const int64_t end_divisor = distributed_optimizer ? Lcm(dp, 128) : 1;
  const int64_t start_divisor = distributed_optimizer ? 64 : 1;
  int64_t param_start = 0, bucket_start = 0, param_end = 0, first = 0;
  const int64_t n = static_cast<int64_t>(numel.size());
  auto close = [&](int64_t end_index, int64_t last) {
    MegatronBucketLayout b;
    b.first_param = first;
    b.last_param = last;
    b.start = bucket_start;
    b.numel_unpadded = end_index - bucket_start;
    b.end = Pad(end_index, end_divisor);
    out.buckets.push_back(b);
    bucket_start = b.end;
    first = last + 1;
    return b.end;
  };
  for (int64_t i = 0; i < n; ++i) {
    const bool shared = shared_embedding[static_cast<size_t>(i)] && distributed_optimizer;
    param_start = Pad(param_start, start_divisor);
    if (shared && i > first) param_start = close(param_start, i - 1);
    param_end = param_start + numel[static_cast<size_t>(i)];
    out.param_elements += numel[static_cast<size_t>(i)];
    if ((bucket_size > 0 && param_end - bucket_start >= bucket_size) || shared) {
      param_start = close(param_end, i);
    } else {
      param_start = param_end;
    }
  }
  if (first < n) close(param_end, n - 1);
  out.numel = out.buckets.back().end;
  return out;
}

}  // namespace gpusim
