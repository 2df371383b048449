// Megatron-LM's gradient buffer of one model chunk: which parameters share a
// bucket, and the padding the distributed optimizer adds to each parameter's
// start and each bucket's end. Note [Megatron gradient buffer layout] in the
// .cc gives the rule and its source.
#ifndef GPUSIM_MODELS_MEGATRON_SCHEDULE_BUCKETS_H_
#define GPUSIM_MODELS_MEGATRON_SCHEDULE_BUCKETS_H_

#include <cstdint>
#include <vector>

namespace gpusim {

struct MegatronBucketLayout {
  int64_t first_param = 0, last_param = 0;  // indices into the parameter list (inclusive)
  int64_t start = 0, end = 0;               // elements of the buffer, padding included
  int64_t numel_unpadded = 0;               // last parameter's end - start
};

struct MegatronBufferLayout {
  std::vector<MegatronBucketLayout> buckets;
  int64_t numel = 0;           // the buffer's elements (grad_data, and param_data under the distributed optimizer)
  int64_t param_elements = 0;  // the parameters' own elements
  int64_t padding() const { return numel - param_elements; }
};

// `numel`: the chunk's parameters in the order the buffer takes them (the
// reverse of the module's, roughly backward's order); `shared_embedding`:
// beside it, the tied embedding/output weight of a first or last stage
// under PP > 1. bucket_size 0: one bucket. dp: the data-parallel (x CP)
// group. REQUIRES: numel non-empty, dp >= 1.
MegatronBufferLayout LayOutGradBuffer(const std::vector<int64_t>& numel, const std::vector<bool>& shared_embedding,
                                      int64_t bucket_size, bool distributed_optimizer, int64_t dp);

}  // namespace gpusim

#endif  // GPUSIM_MODELS_MEGATRON_SCHEDULE_BUCKETS_H_
