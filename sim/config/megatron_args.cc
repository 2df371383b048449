// Megatron-LM arguments; see megatron_args.h.
//
// Note [Megatron argument defaults]: read from NVIDIA/Megatron-LM
// megatron/training/arguments.py (validate_args, _add_network_size_args,
// _add_training_args, _add_distributed_args, _add_mixed_precision_args) and
// megatron/training/tokenizer/tokenizer.py:
//  - ffn-hidden-size: 4 x hidden-size; with --swiglu int((4h x 2/3) / 64) x 64.
//  - kv-channels: hidden-size / num-attention-heads.
//  - num-query-groups: the number of heads unless --group-query-attention.
//  - max-position-embeddings: seq-length when not given.
//  - global-batch-size: micro-batch-size x data-parallel size; the number of
//    micro-batches is global / (micro x data-parallel) (num_microbatches_calculator.py).
//  - data-parallel size: world_size / (TP x PP x CP) (parallel_state.initialize_model_parallel).
//  - vocabulary: the tokenizer's (GPT2BPETokenizer 50257; NullTokenizer
//    vocab-size + 1 for its EOD), padded to a multiple of
//    make-vocab-size-divisible-by (128) x TP (_vocab_size_with_padding).
//  - bf16 forces accumulate-allreduce-grads-in-fp32 (main_grad in fp32);
//    fp16 keeps fp16 main_grad unless it is given; neither: fp32 params.
//  - sequence-parallel is switched off when TP = 1 (validate_args warns).
//  - hidden-dropout and attention-dropout 0.1; clip-grad 1.0; Adam.
//  - transformer-impl transformer_engine; attention-backend auto (TE picks
//    flash or cuDNN fused attention, both O(s) memory).
#include "sim/config/megatron_args.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "sim/base/checked.h"
#include "sim/base/names.h"
#include "sim/base/status.h"
#include "sim/config/megatron_args_internal.h"
#include "sim/config/spec_parse.h"

namespace gpusim {
namespace {

using megatron_internal::Args;
using megatron_internal::ParseInt64;
using megatron_internal::MoeArgKind;
using megatron_internal::MoeArgRule;
using megatron_internal::MoeArgRules;
using megatron_internal::ApplyMoeArgs;


// A launcher's environment assignment gpusim reads (SplitMegatronArgs).
constexpr absl::string_view kCublasWorkspaceEnv = "CUBLAS_WORKSPACE_CONFIG=";

// An environment variable's name (NAME=VALUE before the training script):
// upper-case letters, digits and underscores, not starting with a digit.
bool IsEnvironmentName(absl::string_view name) {
  if (name.empty() || absl::ascii_isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!(absl::ascii_isupper(static_cast<unsigned char>(c)) || absl::ascii_isdigit(static_cast<unsigned char>(c)) ||
          c == '_')) {
      return false;
    }
  }
  return true;
}

// kNotModelled: accepted (the run is the user's), costs time gpusim does not
// count, and the report says so by name.
enum class ArgKind { kModelled, kNoEffect, kNotModelled, kRefused };

struct ArgRule {
  const char* name;
  ArgKind kind;
  const char* why;
};

// Every argument gpusim knows. Names not here are refused as unknown, with
// the nearest known name suggested.
const std::vector<ArgRule>& Rules() {
  static const std::vector<ArgRule>* const kRules = new std::vector<ArgRule>{
      // --- modelled: network size ---
      {"num-layers", ArgKind::kModelled, "decoder layers"},
      {"hidden-size", ArgKind::kModelled, "hidden size h"},
      {"ffn-hidden-size", ArgKind::kModelled, "MLP width (default 4h, or the SwiGLU rule)"},
      {"num-attention-heads", ArgKind::kModelled, "query heads"},
      {"kv-channels", ArgKind::kModelled, "per-head width (default h / heads)"},
      {"group-query-attention", ArgKind::kModelled, "grouped-query attention"},
      {"num-query-groups", ArgKind::kModelled, "key/value groups with --group-query-attention"},
      {"seq-length", ArgKind::kModelled, "sequence length"},
      {"encoder-seq-length", ArgKind::kModelled, "sequence length (alias of --seq-length)"},
      {"max-position-embeddings", ArgKind::kModelled, "rows of the learned position table"},
      {"swiglu", ArgKind::kModelled, "SwiGLU MLP (fc1 of width 2 x ffn)"},
      {"normalization", ArgKind::kModelled, "LayerNorm | RMSNorm"},
      {"qk-layernorm", ArgKind::kModelled,
       "TE's norm of each query and key head (Note [Megatron QK layernorm]; under transformer_engine)"},
      {"disable-bias-linear", ArgKind::kModelled, "no biases in the linear layers"},
      {"add-bias-linear", ArgKind::kModelled, "biases in the linear layers (the default)"},
      {"add-qkv-bias", ArgKind::kModelled, "a QKV bias with --disable-bias-linear"},
      {"untie-embeddings-and-output-weights", ArgKind::kModelled, "an output layer of its own"},
      {"position-embedding-type", ArgKind::kModelled, "learned_absolute | rope | none"},
      {"use-rotary-position-embeddings", ArgKind::kModelled, "RoPE (older spelling)"},
      {"no-position-embedding", ArgKind::kModelled, "no position embedding (older spelling)"},
      {"attention-dropout", ArgKind::kModelled, "dropout on attention probabilities"},
      {"hidden-dropout", ArgKind::kModelled, "dropout after attention and MLP (1-byte masks when > 0)"},
      {"vocab-size", ArgKind::kModelled, "NullTokenizer size, or the vocabulary of a file-based tokenizer"},
      {"tokenizer-type", ArgKind::kModelled, "fixes the vocabulary (GPT2BPETokenizer 50257, NullTokenizer)"},
      {"make-vocab-size-divisible-by", ArgKind::kModelled, "vocabulary padding (x TP)"},
      {"attention-backend", ArgKind::kModelled, "auto | flash | fused (O(s) memory) | unfused | local (s^2 memory)"},
      {"use-flash-attn", ArgKind::kModelled, "flash attention"},
      {"transformer-impl", ArgKind::kModelled, "transformer_engine | local (local attention keeps s^2 values)"},
      // --- modelled: parallelism and batch ---
      {"tensor-model-parallel-size", ArgKind::kModelled, "TP"},
      {"pipeline-model-parallel-size", ArgKind::kModelled, "PP (1F1B schedule)"},
      {"num-layers-per-virtual-pipeline-stage", ArgKind::kModelled, "interleaved schedule (layers per model chunk)"},
      {"num-virtual-stages-per-pipeline-rank", ArgKind::kModelled, "interleaved schedule (model chunks per rank)"},
      {"microbatch-group-size-per-virtual-pipeline-stage", ArgKind::kModelled, "interleaved schedule group size"},
      {"context-parallel-size", ArgKind::kModelled, "CP (ring attention, p2p; or all-to-all, a2a)"},
      {"cp-comm-type", ArgKind::kModelled, "p2p | a2a (a2a+p2p, the hierarchical form, is refused)"},
      // NVIDIA/TransformerEngine d0067d0da transformer_engine/pytorch/attention/
      // dot_product_attention/context_parallel.py AttnFuncWithCPAndKVP2P: with
      // cp_group = [a2a group, p2p group] it all-to-alls q, k, v (and the
      // output, dout and the gradients back) over the inner group
      // (flash_attn_a2a_communicate) around the KV ring over the outer one.
      {"hierarchical-context-parallel-sizes", ArgKind::kRefused,
       "hierarchical context parallelism (--cp-comm-type a2a+p2p: Transformer Engine's all-to-all of q, k, v and "
       "the output over the inner group around the KV ring over the outer one, AttnFuncWithCPAndKVP2P with a "
       "group pair) is not modelled; --cp-comm-type p2p and a2a are"},
      {"sequence-parallel", ArgKind::kModelled, "SP (Korthikanti)"},
      {"micro-batch-size", ArgKind::kModelled, "micro-batch"},
      {"global-batch-size", ArgKind::kModelled, "global batch (gradient accumulation over micro-batches)"},
      {"use-distributed-optimizer", ArgKind::kModelled, "optimizer state sharded over data parallel"},
      {"overlap-grad-reduce", ArgKind::kModelled, "bucketed grad reduce overlapped with backward"},
      {"overlap-param-gather", ArgKind::kModelled, "param all-gather overlapped (dist-opt)"},
      {"ddp-bucket-size", ArgKind::kModelled, "elements per gradient bucket"},
      {"bf16", ArgKind::kModelled, "bf16 params, fp32 main_grad"},
      {"fp16", ArgKind::kModelled, "fp16 params"},
      {"accumulate-allreduce-grads-in-fp32", ArgKind::kModelled, "fp32 main_grad"},
      {"no-gradient-accumulation-fusion", ArgKind::kModelled, "wgrad in bf16 then added into main_grad"},
      {"recompute-granularity", ArgKind::kModelled, "full | selective"},
      {"recompute-method", ArgKind::kModelled, "uniform | block"},
      {"recompute-num-layers", ArgKind::kModelled, "layers per recompute group"},
      {"recompute-activations", ArgKind::kModelled, "selective recompute (older spelling)"},
      {"optimizer", ArgKind::kModelled, "adam (sgd refused)"},
      {"clip-grad", ArgKind::kModelled, "global-norm clipping (0 disables)"},
      // --- refused: not modelled ---
      // --- fp8 training (Transformer Engine; Note [Megatron fp8], models/gpt_fp8.cc) ---
      {"fp8-format", ArgKind::kModelled, "fp8 GEMMs in the decoder layers' linear layers: e4m3 | hybrid"},
      {"fp8-recipe", ArgKind::kModelled,
       "delayed (amax history) | tensorwise (current scaling); mxfp8 and blockwise are refused"},
      {"fp8-amax-history-len", ArgKind::kModelled, "rows of each fp8 GEMM's amax history (delayed scaling)"},
      {"fp8-param-gather", ArgKind::kModelled, "fp8 params (with a transpose cache), param all-gather in fp8"},
      {"fp8-margin", ArgKind::kNoEffect, "fp8 scaling values only"},
      {"fp8-interval", ArgKind::kNoEffect, "deprecated, ignored by Megatron"},
      {"fp8-amax-compute-algo", ArgKind::kNoEffect, "fp8 scaling values only (the history is kept either way)"},
      {"fp8", ArgKind::kRefused, "not a Megatron-LM argument: fp8 training is --fp8-format e4m3|hybrid"},
      {"no-fp8-wgrad", ArgKind::kRefused, "wgrad in bf16 under fp8 (bf16 inputs saved for it) is not modelled"},
      {"first-last-layers-bf16", ArgKind::kRefused, "bf16 first and last layers under fp8 are not modelled"},
      {"fp8-dot-product-attention", ArgKind::kRefused, "fp8 attention is not modelled"},
      {"fp4-format", ArgKind::kRefused, "fp4 training is not modelled"},
      // Note [SimuMax pretrain_deepseekv2.py]: MooreThreads/SimuMax 4dcaae5
      // simu_tools/megatron_scripts/pretrain_deepseekv2.py builds what
      // Megatron-LM 23e00ed's pretrain_gpt.py builds for an MoE model
      // (get_gpt_decoder_block_spec with Transformer Engine, no MTP: it never
      // reads --mtp-num-layers, refused anyway); its loss_func checks the loss
      // for NaN only (pretrain_gpt.py: NaN and Inf, one host sync each); its
      // model_provider takes no vp_stage, so virtual pipeline stages raise a
      // TypeError in get_model (refused in ApplyParallelism's caller).
      {"pretrain_deepseekv2.py", ArgKind::kModelled,
       "SimuMax's training script: pretrain_gpt.py's model, the loss checked for NaN only"},
      {"CUBLAS_WORKSPACE_CONFIG", ArgKind::kModelled,
       "environment before the script: PyTorch's cuBLAS workspace per handle and stream"},
      // Other environment variables of a launch line. Megatron-LM sets
      // CUDA_DEVICE_MAX_CONNECTIONS=1 so that a TP collective is queued ahead
      // of the compute that follows it (megatron/training/arguments.py
      // validate_args warns without it under sequence parallelism).
      {"CUDA_DEVICE_MAX_CONNECTIONS", ArgKind::kNotModelled,
       "environment: the device's hardware work queues, and so the order collectives and kernels start in"},
      {"NCCL_DEBUG", ArgKind::kNoEffect, "environment: NCCL's logging"},
      {"NCCL_DEBUG_SUBSYS", ArgKind::kNoEffect, "environment: NCCL's logging"},
      {"TORCH_NCCL_ASYNC_ERROR_HANDLING", ArgKind::kNoEffect, "environment: error handling"},
      {"PYTHONPATH", ArgKind::kNoEffect, "environment: where Python finds Megatron-LM"},
      {"PYTHONUNBUFFERED", ArgKind::kNoEffect, "environment: output buffering"},
      {"tp-comm-overlap", ArgKind::kRefused, "TP communication overlap (userbuffers) is not modelled"},
      // Read only under --tp-comm-overlap (megatron/core/extensions/
      // transformer_engine.py, the TE linear wrappers' ub_* arguments,
      // NVIDIA/Megatron-LM 57a02672), refused above.
      {"disable-tp-comm-bulk-wgrad", ArgKind::kNoEffect, "read only under --tp-comm-overlap"},
      {"disable-tp-comm-bulk-dgrad", ArgKind::kNoEffect, "read only under --tp-comm-overlap"},
      {"disable-tp-comm-overlap-rs", ArgKind::kNoEffect, "read only under --tp-comm-overlap"},
      {"disable-tp-comm-overlap-ag", ArgKind::kNoEffect, "read only under --tp-comm-overlap"},
      {"disable-tp-comm-split-ag", ArgKind::kNoEffect, "read only under --tp-comm-overlap"},
      {"disable-tp-comm-split-rs", ArgKind::kNoEffect, "read only under --tp-comm-overlap"},
      {"defer-embedding-wgrad-compute", ArgKind::kRefused, "deferred embedding wgrad is not modelled"},
      {"recompute-modules", ArgKind::kRefused, "per-module recompute is not modelled"},
      {"cpu-offloading", ArgKind::kRefused, "activation CPU offloading is not modelled"},
      {"use-torch-fsdp2", ArgKind::kRefused, "FSDP2 is not modelled"},
      {"use-custom-fsdp", ArgKind::kRefused, "Megatron FSDP is not modelled"},
      {"decoder-first-pipeline-num-layers", ArgKind::kModelled, "uneven pipeline stages"},
      {"decoder-last-pipeline-num-layers", ArgKind::kModelled, "uneven pipeline stages"},
      {"account-for-embedding-in-pipeline-split", ArgKind::kModelled, "the embedding counted as a layer of the split"},
      {"account-for-loss-in-pipeline-split", ArgKind::kModelled, "the loss counted as a layer of the split"},
      {"rampup-batch-size", ArgKind::kRefused, "batch-size ramp-up changes the step over training"},
      {"cross-entropy-loss-fusion", ArgKind::kModelled,
       "the fused vocab-parallel cross entropy: its torch.compile'd functions' Inductor buffers "
       "(Note [Megatron fused cross entropy], models/gpt_cross_entropy.cc)"},
      {"cross-entropy-fusion-impl", ArgKind::kModelled,
       "native (Inductor's buffers) or te (Transformer Engine's in-place kernel, as Megatron ran it before "
       "168cb15); no effect without the fusion"},
      {"use-precision-aware-optimizer", ArgKind::kRefused, "precision-aware optimizer states are not modelled"},
      {"main-grads-dtype", ArgKind::kRefused, "precision-aware optimizer states are not modelled"},
      {"main-params-dtype", ArgKind::kRefused, "precision-aware optimizer states are not modelled"},
      {"exp-avg-dtype", ArgKind::kRefused, "precision-aware optimizer states are not modelled"},
      {"exp-avg-sq-dtype", ArgKind::kRefused, "precision-aware optimizer states are not modelled"},
      {"distribute-saved-activations", ArgKind::kRefused, "distributed saved activations are not modelled"},
      {"mtp-num-layers", ArgKind::kRefused, "multi-token prediction is not modelled"},
      {"multi-latent-attention", ArgKind::kModelled, "multi-latent attention (Note [Megatron multi-latent attention])"},
      {"q-lora-rank", ArgKind::kModelled, "MLA: the query's low-rank latent"},
      {"kv-lora-rank", ArgKind::kModelled, "MLA: the key/value low-rank latent"},
      {"qk-head-dim", ArgKind::kModelled, "MLA: the query/key head width without RoPE"},
      {"v-head-dim", ArgKind::kModelled, "MLA: the value head width"},
      {"qk-pos-emb-head-dim", ArgKind::kModelled, "MLA: the RoPE part of the query/key head"},
      {"rope-type", ArgKind::kModelled, "MLA: yarn (default) runs the fused MLA rope, rope the torch ops"},
      {"enable-experimental", ArgKind::kModelled,
       "lets MLA's fused yarn rope run (Megatron raises without it); no other use in a modelled line"},
      {"rotary-scaling-factor", ArgKind::kNoEffect, "MLA yarn RoPE values (frequencies, mscale): same shapes"},
      {"mscale", ArgKind::kNoEffect, "MLA yarn RoPE values and the softmax scale"},
      {"mscale-all-dim", ArgKind::kNoEffect, "MLA yarn RoPE values and the softmax scale"},
      {"num-distributed-optimizer-instances", ArgKind::kRefused, "partial optimizer sharding is not modelled"},
      {"use-legacy-models", ArgKind::kRefused, "only Megatron-Core GPT models are modelled"},
      {"squared-relu", ArgKind::kRefused, "squared ReLU MLPs are not modelled"},
      {"apply-residual-connection-post-layernorm", ArgKind::kRefused, "post-LN residuals are not modelled"},
      {"fp32-residual-connection", ArgKind::kRefused, "fp32 residual streams are not modelled"},
      {"empty-unused-memory-level", ArgKind::kRefused, "torch.cuda.empty_cache() between steps is not modelled"},
      {"delay-wgrad-compute", ArgKind::kRefused, "delayed wgrad is not modelled"},
      {"hybrid-override-pattern", ArgKind::kRefused, "hybrid (Mamba) models are not modelled"},
      {"sgd-momentum", ArgKind::kRefused, "SGD is not modelled"},
      // --- no effect on memory or time ---
      {"use-mcore-models", ArgKind::kNoEffect, "the default model class"},
      {"train-iters", ArgKind::kNoEffect, "training length"},
      {"train-samples", ArgKind::kNoEffect, "training length"},
      {"exit-interval", ArgKind::kNoEffect, "training length"},
      {"exit-duration-in-mins", ArgKind::kNoEffect, "training length"},
      {"eval-iters", ArgKind::kNoEffect, "evaluation"},
      {"eval-interval", ArgKind::kNoEffect, "evaluation"},
      {"skip-train", ArgKind::kNoEffect, "evaluation"},
      {"save", ArgKind::kNoEffect, "checkpointing"},
      {"load", ArgKind::kNoEffect, "checkpointing"},
      {"save-interval", ArgKind::kNoEffect, "checkpointing"},
      {"ckpt-format", ArgKind::kNoEffect, "checkpointing"},
      {"async-save", ArgKind::kNoEffect, "checkpointing"},
      {"use-dist-ckpt", ArgKind::kNoEffect, "checkpointing"},
      {"auto-detect-ckpt-format", ArgKind::kNoEffect, "checkpointing"},
      {"dist-ckpt-strictness", ArgKind::kNoEffect, "checkpointing"},
      {"dist-ckpt-optim-fully-reshardable", ArgKind::kNoEffect, "checkpointing"},
      {"use-persistent-ckpt-worker", ArgKind::kNoEffect, "checkpointing"},
      {"no-ckpt-fully-parallel-save", ArgKind::kNoEffect, "checkpointing"},
      {"ckpt-fully-parallel-save", ArgKind::kNoEffect, "checkpointing"},
      {"ckpt-fully-parallel-load", ArgKind::kNoEffect, "checkpointing"},
      {"ckpt-assume-constant-structure", ArgKind::kNoEffect, "checkpointing"},
      {"no-load-optim", ArgKind::kNoEffect, "checkpointing"},
      {"no-load-rng", ArgKind::kNoEffect, "checkpointing"},
      {"no-save-optim", ArgKind::kNoEffect, "checkpointing"},
      {"no-save-rng", ArgKind::kNoEffect, "checkpointing"},
      {"finetune", ArgKind::kNoEffect, "checkpointing"},
      {"use-checkpoint-args", ArgKind::kNoEffect, "checkpointing"},
      {"use-checkpoint-opt_param-scheduler", ArgKind::kNoEffect, "learning-rate schedule"},
      {"override-opt_param-scheduler", ArgKind::kNoEffect, "learning-rate schedule"},
      {"data-path", ArgKind::kNoEffect, "data"},
      {"train-data-path", ArgKind::kNoEffect, "data"},
      {"valid-data-path", ArgKind::kNoEffect, "data"},
      {"test-data-path", ArgKind::kNoEffect, "data"},
      {"split", ArgKind::kNoEffect, "data"},
      {"vocab-file", ArgKind::kNoEffect, "data (the vocabulary size comes from --tokenizer-type)"},
      {"merge-file", ArgKind::kNoEffect, "data"},
      {"tokenizer-model", ArgKind::kNoEffect, "data (give --vocab-size for a file-based tokenizer)"},
      {"data-cache-path", ArgKind::kNoEffect, "data"},
      {"mock-data", ArgKind::kNoEffect, "data"},
      {"no-mmap-bin-files", ArgKind::kNoEffect, "data"},
      {"num-workers", ArgKind::kNoEffect, "data loading (host workers)"},
      {"dataloader-type", ArgKind::kNoEffect, "data loading"},
      {"num-dataset-builder-threads", ArgKind::kNoEffect, "data loading"},
      {"eod-mask-loss", ArgKind::kNoEffect, "loss mask values"},
      {"reset-position-ids", ArgKind::kNoEffect, "data values"},
      {"reset-attention-mask", ArgKind::kNoEffect, "data values"},
      {"no-create-attention-mask-in-dataloader", ArgKind::kNoEffect, "causal masks are implicit in the kernels"},
      {"lr", ArgKind::kNoEffect, "learning-rate schedule"},
      {"min-lr", ArgKind::kNoEffect, "learning-rate schedule"},
      {"lr-decay-style", ArgKind::kNoEffect, "learning-rate schedule"},
      {"lr-decay-iters", ArgKind::kNoEffect, "learning-rate schedule"},
      {"lr-decay-samples", ArgKind::kNoEffect, "learning-rate schedule"},
      {"lr-warmup-iters", ArgKind::kNoEffect, "learning-rate schedule"},
      {"lr-warmup-samples", ArgKind::kNoEffect, "learning-rate schedule"},
      {"lr-warmup-fraction", ArgKind::kNoEffect, "learning-rate schedule"},
      {"lr-warmup-init", ArgKind::kNoEffect, "learning-rate schedule"},
      {"weight-decay", ArgKind::kNoEffect, "optimizer hyper-parameter (values only)"},
      {"weight-decay-incr-style", ArgKind::kNoEffect, "optimizer hyper-parameter"},
      {"start-weight-decay", ArgKind::kNoEffect, "optimizer hyper-parameter"},
      {"end-weight-decay", ArgKind::kNoEffect, "optimizer hyper-parameter"},
      {"adam-beta1", ArgKind::kNoEffect, "optimizer hyper-parameter"},
      {"adam-beta2", ArgKind::kNoEffect, "optimizer hyper-parameter"},
      {"adam-eps", ArgKind::kNoEffect, "optimizer hyper-parameter"},
      {"loss-scale", ArgKind::kNoEffect, "fp16 loss scaling (values only)"},
      {"initial-loss-scale", ArgKind::kNoEffect, "fp16 loss scaling"},
      {"min-loss-scale", ArgKind::kNoEffect, "fp16 loss scaling"},
      {"loss-scale-window", ArgKind::kNoEffect, "fp16 loss scaling"},
      {"hysteresis", ArgKind::kNoEffect, "fp16 loss scaling"},
      {"init-method-std", ArgKind::kNoEffect, "initialisation"},
      {"seed", ArgKind::kNoEffect, "initialisation"},
      {"use-cpu-initialization", ArgKind::kNoEffect, "initialisation (before the steps)"},
      {"norm-epsilon", ArgKind::kNoEffect, "values only"},
      {"layernorm-epsilon", ArgKind::kNoEffect, "values only"},
      {"apply-layernorm-1p", ArgKind::kNoEffect, "zero-centred gamma: same shapes"},
      {"rotary-percent", ArgKind::kNoEffect, "RoPE values (same shapes)"},
      {"rotary-base", ArgKind::kNoEffect, "RoPE values"},
      {"rotary-seq-len-interpolation-factor", ArgKind::kNoEffect, "RoPE values"},
      {"use-rope-scaling", ArgKind::kNoEffect, "RoPE values"},
      {"attention-softmax-in-fp32", ArgKind::kNoEffect, "softmax arithmetic (flash/fused kernels keep fp32 inside)"},
      // megatron/core/transformer/transformer_config.py (57a02672): Q K^T
      // scaled by 1 / layer number, and attention_softmax_in_fp32 set.
      {"apply-query-key-layer-scaling", ArgKind::kNoEffect,
       "softmax scale values (1 / layer number) and softmax arithmetic in fp32, as --attention-softmax-in-fp32"},
      {"openai-gelu", ArgKind::kNoEffect, "GeLU approximation (same shapes)"},
      {"no-masked-softmax-fusion", ArgKind::kNoEffect, "kernel fusion: modelled per op, not per fused kernel"},
      {"no-bias-gelu-fusion", ArgKind::kNoEffect, "kernel fusion: modelled per op, not per fused kernel"},
      {"no-bias-swiglu-fusion", ArgKind::kNoEffect, "kernel fusion: modelled per op, not per fused kernel"},
      {"no-bias-dropout-fusion", ArgKind::kNoEffect, "kernel fusion: modelled per op, not per fused kernel"},
      {"no-rope-fusion", ArgKind::kNoEffect, "kernel fusion: modelled per op, not per fused kernel"},
      {"no-persist-layer-norm", ArgKind::kNoEffect, "kernel choice"},
      {"overlap-p2p-communication", ArgKind::kModelled,
       "interleaved p2p overlapped with compute (Megatron's default since 2023-10; the flag is the older spelling)"},
      {"no-overlap-p2p-communication", ArgKind::kModelled, "interleaved p2p batched and waited on (1F1B always is)"},
      {"no-async-tensor-model-parallel-allreduce", ArgKind::kNoEffect, "TP collectives are serial on their stream"},
      {"calculate-per-token-loss", ArgKind::kNoEffect, "loss normalisation"},
      {"distributed-backend", ArgKind::kNoEffect, "NCCL is modelled"},
      {"distributed-timeout-minutes", ArgKind::kNoEffect, "timeouts"},
      // megatron/training/config/common_config.py use_gloo_process_groups
      // (57a02672): the CPU-side gloo groups are not created; NCCL's are.
      {"disable-gloo-process-groups", ArgKind::kNoEffect, "no gloo (CPU) process groups: checkpointing set-up"},
      {"use-tp-pp-dp-mapping", ArgKind::kModelled, "rank order: which pipeline sends cross nodes"},
      // Megatron-LM's functional tests (tests/functional_tests/test_cases at
      // 57a02672) carry these; each read in megatron/training/config/*.py.
      {"use-checkpoint-opt-param-scheduler", ArgKind::kNoEffect, "learning-rate schedule taken from a checkpoint"},
      {"override-opt-param-scheduler", ArgKind::kNoEffect, "learning-rate schedule values only"},
      {"decoupled-lr", ArgKind::kNoEffect, "learning-rate values only (the embedding's)"},
      {"decoupled-min-lr", ArgKind::kNoEffect, "learning-rate values only (the embedding's)"},
      {"apply-wd-to-qk-layernorm", ArgKind::kNoEffect, "optimizer hyper-parameter (weight decay) only"},
      {"use-mup", ArgKind::kNoEffect, "muP's initialisation and learning-rate scales: values only"},
      {"tiktoken-pattern", ArgKind::kNoEffect, "the tokenizer's split pattern: data only"},
      {"tiktoken-num-special-tokens", ArgKind::kNoEffect, "special-token ids within the vocabulary: data only"},
      {"no-use-tokenizer-model-from-checkpoint-args", ArgKind::kNoEffect, "tokenizer file lookup"},
      {"fim-data", ArgKind::kNoEffect, "data (fill-in-the-middle samples)"},
      {"fim-rate", ArgKind::kNoEffect, "data (fill-in-the-middle samples)"},
      {"fim-spm-rate", ArgKind::kNoEffect, "data (fill-in-the-middle samples)"},
      {"async-ckpt-use-cpu-shm", ArgKind::kNoEffect, "checkpointing (an async save's host staging)"},
      {"mup-base-hidden-size", ArgKind::kNoEffect, "muP's scales: values only"},
      {"async-strategy", ArgKind::kNoEffect, "checkpointing (how an async save is written)"},
      {"verify-integrity", ArgKind::kNoEffect, "checkpointing (re-hashes checkpoint files on load)"},
      // TE's fused RoPE applies interleaved pairs with the same kernels.
      {"rotary-interleaved", ArgKind::kNoEffect, "the rotary pairs' layout: same buffers and kernels"},
      {"attention-output-gate", ArgKind::kRefused, "a gated attention output is not modelled"},
      {"error-injection-rate", ArgKind::kRefused, "the rerun state machine's injected errors rerun iterations"},
      {"max-tokens-to-oom", ArgKind::kRefused, "inference (text generation) is not modelled"},
      // distributed_data_parallel_config.py average_in_collective: the
      // 1/d scaling moves into the reduce-scatter (its own pass is not
      // modelled either way: Note [Megatron iteration on the host]).
      {"ddp-average-in-collective", ArgKind::kNoEffect, "where the gradients' 1/d scaling happens"},
      {"overlap-p2p-communication-warmup-flush", ArgKind::kNotModelled,
       "the interleaved schedule's warm-up and flush p2p overlapped with compute"},
      {"overlap-param-gather-with-optimizer-step", ArgKind::kNotModelled,
       "the first parameter all-gather overlapped with the optimizer step"},
      {"use-megatron-fsdp", ArgKind::kRefused, "Megatron FSDP is not modelled"},
      {"step-batch-size-schedule", ArgKind::kRefused, "a batch-size schedule changes the step over training"},
      {"use-transformer-engine-op-fuser", ArgKind::kRefused, "Transformer Engine's op fuser is not modelled"},
      {"rl-inference-tensor-model-parallel-size", ArgKind::kRefused, "RL inference is not modelled"},
      {"inference-dynamic-batching-num-cuda-graphs", ArgKind::kRefused, "inference is not modelled"},
      {"rerun-mode", ArgKind::kModelled,
       "disabled / validate_results: the loss and gradient checks either way (report_stats refused)"},
      {"log-interval", ArgKind::kNoEffect, "logging"},
      {"log-throughput", ArgKind::kNoEffect, "logging"},
      // Note [Megatron iteration on the host] (models/gpt_megatron_host.cc).
      {"log-params-norm", ArgKind::kModelled,
       "the parameters' L2 norm each iteration: a multi-tensor norm, all-reduces, a host sync"},
      {"log-num-zeros-in-grad", ArgKind::kModelled,
       "the gradients' zero count each iteration: kernels per parameter, an all-reduce, host syncs"},
      {"no-check-for-nan-in-loss-and-grad", ArgKind::kModelled,
       "no NaN/Inf checks of each micro-batch's loss and each gradient bucket (each a host sync)"},
      {"log-timers-to-tensorboard", ArgKind::kNoEffect, "logging"},
      {"log-memory-to-tensorboard", ArgKind::kNoEffect, "logging"},
      {"log-validation-ppl-to-tensorboard", ArgKind::kNoEffect, "logging"},
      {"log-batch-size-to-tensorboard", ArgKind::kNoEffect, "logging"},
      {"log-learning-rate-to-tensorboard", ArgKind::kNoEffect, "logging"},
      {"log-loss-scale-to-tensorboard", ArgKind::kNoEffect, "logging"},
      {"log-world-size-to-tensorboard", ArgKind::kNoEffect, "logging"},
      {"tensorboard-dir", ArgKind::kNoEffect, "logging"},
      {"tensorboard-log-interval", ArgKind::kNoEffect, "logging"},
      {"tensorboard-queue-size", ArgKind::kNoEffect, "logging"},
      {"wandb-project", ArgKind::kNoEffect, "logging"},
      {"wandb-exp-name", ArgKind::kNoEffect, "logging"},
      {"wandb-save-dir", ArgKind::kNoEffect, "logging"},
      {"timing-log-level", ArgKind::kNoEffect, "logging"},
      {"timing-log-option", ArgKind::kNoEffect, "logging"},
      {"profile", ArgKind::kNoEffect, "profiling"},
      {"profile-step-start", ArgKind::kNoEffect, "profiling"},
      {"profile-step-end", ArgKind::kNoEffect, "profiling"},
      {"deterministic-mode", ArgKind::kNoEffect, "kernel choice"},
      {"check-for-nan-in-loss-and-grad", ArgKind::kModelled,
       "NaN/Inf checks of each micro-batch's loss and each gradient bucket (the default; each a host sync)"},
      // megatron/training/training.py train (NVIDIA/Megatron-LM 57a02672):
      // every N-th iteration check_param_hashes_across_dp_replicas hashes
      // every parameter and all-gathers the hashes over data parallel.
      {"check-weight-hash-across-dp-replicas-interval", ArgKind::kNotModelled,
       "every N-th iteration: a hash of every parameter and an all-gather of the hashes over data parallel"},
      {"manual-gc", ArgKind::kNoEffect, "Python garbage collection"},
      {"manual-gc-interval", ArgKind::kNoEffect, "Python garbage collection"},
      {"bf16-reduced-precision-matmul", ArgKind::kNoEffect, "cuBLAS setting"},
  };
  return *kRules;
}

const ArgRule* FindRule(const std::string& name) {
  for (const ArgRule& r : Rules()) {
    if (name == r.name) return &r;
  }
  return nullptr;
}

// The MoE table (megatron_moe_args.cc) in this file's terms.
ArgKind MoeKind(MoeArgKind k) {
  switch (k) {
    case MoeArgKind::kModelled: return ArgKind::kModelled;
    case MoeArgKind::kNoEffect: return ArgKind::kNoEffect;
    case MoeArgKind::kRefused: return ArgKind::kRefused;
  }
  return ArgKind::kRefused;
}

std::string Canonical(absl::string_view name) {
  std::string n = absl::StrReplaceAll(name, {{"_", "-"}});
  while (absl::StartsWith(n, "-")) n.erase(0, 1);
  return n;
}

// v rounded up to a multiple of m (m >= 1), exact in 128 bits; INT64_MAX
// when that does not fit (the caller's magnitude check refuses it).
int64_t CeilTo(int64_t v, int64_t m) {
  const __int128 r = (static_cast<__int128>(v) + m - 1) / m * m;
  return r > INT64_MAX ? INT64_MAX : static_cast<int64_t>(r);
}

// Note [Megatron uneven stages]: transformer layers per virtual stage, after
// megatron/core/transformer/transformer_block.py get_num_layers_to_build
// and validate_args (NVIDIA/Megatron-LM, 2025-05):
//  - --decoder-first/last-pipeline-num-layers F, L': the first (last) rank
//    holds F (L') layers, the other ranks (L - F - L') / their count each;
//    not with --account-for-*, and with the interleaved schedule only
//    through --num-virtual-stages-per-pipeline-rank;
//  - otherwise (L + embedding + loss) / p per rank, where
//    --account-for-embedding-in-pipeline-split (-loss-) counts the
//    embedding (loss) as one layer of the first (last) virtual stage, which
//    then builds one layer fewer;
//  - every rank's count is split evenly over its v model chunks; virtual
//    stage k = c x p + r takes the layers after those of stages 0..k-1
//    (TransformerLayer._get_layer_offset).
// A virtual stage left with no transformer layer is refused (the model
// chunk would hold only the embedding or the loss).
absl::Status StageLayers(const Args& g, int64_t layers, int64_t pp, int64_t per_vp, int64_t vstages,
                         MegatronSpec* mg) {
  const bool has_first = g.Has("decoder-first-pipeline-num-layers");
  const bool has_last = g.Has("decoder-last-pipeline-num-layers");
  int64_t first = 0, last = 0;
  bool emb = false, loss = false;
  RETURN_IF_ERROR(g.Int("decoder-first-pipeline-num-layers", &first));
  RETURN_IF_ERROR(g.Int("decoder-last-pipeline-num-layers", &last));
  RETURN_IF_ERROR(g.Flag("account-for-embedding-in-pipeline-split", &emb));
  RETURN_IF_ERROR(g.Flag("account-for-loss-in-pipeline-split", &loss));
  const std::string uneven = has_first ? "decoder-first-pipeline-num-layers" : "decoder-last-pipeline-num-layers";
  std::vector<int64_t> per_rank(static_cast<size_t>(pp), 0);
  if (has_first || has_last) {
    if (emb || loss) return g.Error(uneven, "does not go with --account-for-embedding/loss-in-pipeline-split");
    if (pp < 2) return g.Error(uneven, "needs PP > 1");
    if (per_vp > 0) {
      return g.Error(uneven, "with the interleaved schedule, give --num-virtual-stages-per-pipeline-rank");
    }
    const int64_t left = pp - (has_first ? 1 : 0) - (has_last ? 1 : 0);
    const int64_t rest = layers - first - last;
    if (left == 0) return g.Error(uneven, "with both first and last set, PP 2 leaves no middle stage to divide by");
    if (rest < 0 || rest % left != 0) {
      return g.Error(uneven, absl::StrCat("the layers left (", rest, ") must divide over the other ", left,
                                          " pipeline stage", left == 1 ? "" : "s"));
    }
    for (int64_t r = 0; r < pp; ++r) per_rank[static_cast<size_t>(r)] = rest / left;
    if (has_first) per_rank.front() = first;
    if (has_last) per_rank.back() = last;
  } else {
    const int64_t split = layers + (emb ? 1 : 0) + (loss ? 1 : 0);
    if (split % pp != 0) {
      return g.Error("pipeline-model-parallel-size",
                     absl::StrCat("must divide --num-layers (", layers, emb || loss ? " + the embedding/loss counted" : "",
                                  " = ", split, "), or give --decoder-first/last-pipeline-num-layers"));
    }
    for (int64_t& n : per_rank) n = split / pp;
  }
  if (per_vp > 0) {
    if (per_rank.front() % per_vp != 0) {
      return g.Error("num-layers-per-virtual-pipeline-stage", "must divide the layers per pipeline stage");
    }
    vstages = per_rank.front() / per_vp;
  }
  mg->virtual_stages = std::max<int64_t>(1, vstages);
  const int64_t v = mg->virtual_stages;
  if (v > layers + 2) {  // every model chunk builds a layer (or the embedding / loss); bounds pp x v below
    return g.Error("num-virtual-stages-per-pipeline-rank",
                   absl::StrCat(v, " model chunks per rank for ", layers, " layers"));
  }
  if (v > 1) {
    if (pp < 2) return g.Error("num-layers-per-virtual-pipeline-stage", "the interleaved schedule needs PP > 1");
    for (int64_t n : per_rank) {
      if (n % v != 0) return g.Error("num-virtual-stages-per-pipeline-rank", "must divide the layers per pipeline stage");
    }
  }
  mg->stage_layers.assign(static_cast<size_t>(pp * v), 0);
  for (int64_t k = 0; k < pp * v; ++k) {
    int64_t n = per_rank[static_cast<size_t>(k % pp)] / v;
    if (k == 0 && emb) --n;
    if (k == pp * v - 1 && loss) --n;
    if (n <= 0) {
      return g.Error(k == 0 && emb ? "account-for-embedding-in-pipeline-split"
                     : k == pp * v - 1 && loss ? "account-for-loss-in-pipeline-split"
                                               : uneven,
                     absl::StrCat("leaves virtual stage ", k, " with no transformer layer (a chunk of only the "
                                  "embedding or the loss is not modelled)"));
    }
    mg->stage_layers[static_cast<size_t>(k)] = n;
  }
  return absl::OkStatus();
}

}  // namespace

std::string ClassifyMegatronArg(const std::string& name, std::string* why) {
  const ArgRule* r = FindRule(name);
  ArgRule moe_rule{};
  if (r == nullptr) {
    for (const MoeArgRule& m : MoeArgRules()) {
      if (name == m.name) moe_rule = {m.name, MoeKind(m.kind), m.why}, r = &moe_rule;
    }
  }
  if (r == nullptr && IsEnvironmentName(name)) {
    *why = "an environment variable of the launch line that gpusim does not model (NVTE_* choose Transformer "
           "Engine's kernels and attention backends, NCCL_* NCCL's algorithms and buffers); remove it to simulate "
           "without it";
    return "refused";
  }
  if (r == nullptr) {
    std::vector<std::string> names;
    for (const ArgRule& x : Rules()) names.push_back(x.name);
    for (const MoeArgRule& x : MoeArgRules()) names.push_back(x.name);
    const std::string nearest = NearestName(name, names);
    *why = nearest.empty() ? "not a Megatron-LM argument gpusim knows"
                           : absl::StrCat("not a Megatron-LM argument gpusim knows (did you mean '--", nearest, "'?)");
    return "unknown";
  }
  *why = r->why;
  switch (r->kind) {
    case ArgKind::kModelled:
      return "modelled";
    case ArgKind::kNoEffect:
      return "no_effect";
    case ArgKind::kNotModelled:
      return "not_modelled";
    case ArgKind::kRefused:
      return "refused";
  }
  return "unknown";
}

absl::StatusOr<std::vector<MegatronArg>> SplitMegatronArgs(absl::string_view line, const SourceLocation& where) {
  // Tokens with their byte offsets; quotes group, backslash-newline joins.
  struct Tok {
    std::string text;
    size_t at;
  };
  std::vector<Tok> toks;
  std::string cur;
  size_t cur_at = 0;
  bool in_tok = false;
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote != 0) {
      if (c == quote) {
        quote = 0;
      } else {
        cur += c;
      }
      continue;
    }
    if (c == '\\' && i + 1 < line.size() && (line[i + 1] == '\n' || line[i + 1] == '\r')) {
      ++i;
      continue;
    }
    if (c == '"' || c == '\'') {
      if (!in_tok) cur_at = i;
      in_tok = true;
      quote = c;
      continue;
    }
    if (absl::ascii_isspace(static_cast<unsigned char>(c)) || c == '\\') {
      if (in_tok) toks.push_back({cur, cur_at});
      cur.clear();
      in_tok = false;
      continue;
    }
    if (!in_tok) cur_at = i;
    in_tok = true;
    cur += c;
  }
  if (quote != 0) {
    return absl::InvalidArgumentError(absl::StrCat(where.ToString(), ": megatron.args: unterminated quote"));
  }
  if (in_tok) toks.push_back({cur, cur_at});
  // Drop the launcher: everything up to the training script, or the
  // environment assignments that lead a line without one.
  size_t start = 0;
  for (size_t i = 0; i < toks.size(); ++i) {
    if (absl::EndsWith(toks[i].text, ".py")) start = i + 1;
  }
  // The training script decides the model: gpusim models pretrain_gpt.py's
  // (Megatron-Core GPT); another script (pretrain_bert.py, pretrain_mamba.py,
  // a fork's own) is refused by name, not run as if it were it.
  if (start > 0) {
    const std::string& script = toks[start - 1].text;
    const size_t slash = script.find_last_of('/');
    const std::string base = slash == std::string::npos ? script : script.substr(slash + 1);
    if (base != "pretrain_gpt.py" && base != "pretrain_deepseekv2.py") {
      return absl::InvalidArgumentError(absl::StrCat(
          where.ToString(), ": megatron.args: ", script,
          ": not modelled: the training script; gpusim models Megatron-LM's pretrain_gpt.py (Megatron-Core GPT) and "
          "SimuMax's pretrain_deepseekv2.py"));
    }
  }
  if (start == 0) {
    while (start < toks.size() && toks[start].text.find('=') != std::string::npos &&
           IsEnvironmentName(toks[start].text.substr(0, toks[start].text.find('=')))) {
      ++start;
    }
  }
  const bool one_line = line.find('\n') == absl::string_view::npos && where.line > 0;
  auto loc = [&](size_t at) {
    if (!one_line) return where.ToString();
    SourceLocation l = where;
    l.col = where.col + static_cast<int>(at);
    return l.ToString();
  };
  std::vector<MegatronArg> out;
  // The launcher's environment assignments are settings too (never dropped
  // silently): CUBLAS_WORKSPACE_CONFIG is modelled (Note [Megatron GEMM
  // workspaces], models/gpt_workspace.cc), the others are classified by
  // name like arguments (IsEnvironmentName). The launcher's own options
  // (torchrun --nproc_per_node ...) are not the training run's: the world
  // size is megatron.world_size.
  for (size_t i = 0; i < start; ++i) {
    const size_t eq = toks[i].text.find('=');
    if (eq != std::string::npos && IsEnvironmentName(toks[i].text.substr(0, eq))) {
      out.push_back({toks[i].text.substr(0, eq), toks[i].text.substr(eq + 1), loc(toks[i].at)});
    }
  }
  // Note [SimuMax pretrain_deepseekv2.py]: that script is a setting too,
  // recorded under its own name (no argument can be spelt with '_').
  if (start > 0) {
    const std::string& script = toks[start - 1].text;
    if (script.substr(script.find_last_of('/') + 1) == "pretrain_deepseekv2.py") {
      out.push_back({"pretrain_deepseekv2.py", "true", loc(toks[start - 1].at)});
    }
  }
  bool has_value = false;  // the last argument has a value of its own
  for (size_t i = start; i < toks.size(); ++i) {
    const Tok& t = toks[i];
    if (!absl::StartsWith(t.text, "--")) {
      if (out.empty() || IsEnvironmentName(out.back().name)) {
        return absl::InvalidArgumentError(absl::StrCat(loc(t.at), ": megatron.args: expected an argument such as "
                                                       "--num-layers, got '", t.text, "'"));
      }
      // Several values (data paths with weights) are kept space-separated.
      MegatronArg& a = out.back();
      a.value = has_value ? absl::StrCat(a.value, " ", t.text) : t.text;
      has_value = true;
      continue;
    }
    std::string name = t.text.substr(2);
    std::string value = "true";
    has_value = false;
    const size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    out.push_back({Canonical(name), value, loc(t.at)});
  }
  return out;
}

namespace {

// Megatron-LM's arguments as given: each classified (ClassifyMegatronArg),
// recorded in megatron.args, refused by name when unknown, refused or given
// twice.
absl::Status RecordMegatronArgs(const std::vector<MegatronArg>& args, RunSpec* run) {
  MegatronSpec& mg = run->megatron;
  mg.present = true;
  std::set<std::string> seen;
  for (const MegatronArg& a : args) {
    std::string why;
    const std::string kind = ClassifyMegatronArg(a.name, &why);
    const std::string where = a.where.empty() ? "" : a.where + ": ";
    if (!seen.insert(a.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, "megatron.args: --", a.name, " is given twice"));
    }
    const std::string shown = IsEnvironmentName(a.name) ? absl::StrCat(a.name, "=", a.value)
                              : absl::EndsWith(a.name, ".py") ? a.name
                                                              : "--" + a.name;
    if (kind == "unknown" || kind == "refused") {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "megatron.args: ", shown, ": ", kind == "refused" ? "not modelled: " : "", why));
    }
    if (kind == "no_effect") mg.no_effect.push_back(a.name);
    mg.args.emplace_back(a.name, kind == "modelled"       ? "modelled"
                                 : kind == "not_modelled" ? absl::StrCat("not modelled (costs time): ", why)
                                                          : absl::StrCat("no effect on memory or time: ", why));
    run->written["megatron.args." + a.name] = a.where;
  }
  return absl::OkStatus();
}

// The model's shape: layers, widths, heads, sequence and micro-batch;
// `*seq_len` the sequence length.
absl::Status ApplyModelShape(const Args& g, RunSpec* run, int64_t* seq_len) {
  MegatronSpec& mg = run->megatron;
  ModelSpec& m = run->model;
  for (const char* n : {"num-layers", "hidden-size", "num-attention-heads", "micro-batch-size"}) {
    RETURN_IF_ERROR(g.Require(n));
  }
  if (!g.Has("seq-length") && !g.Has("encoder-seq-length")) RETURN_IF_ERROR(g.Require("seq-length"));
  m.name = "megatron-gpt";
  m.family = "gpt";
  RETURN_IF_ERROR(g.Int("num-layers", &m.n_layers));
  // The unrolled cap (Note [Magnitude checks], spec_parse.h), checked here
  // first: per-stage tables below are sized by the pipeline stages, which
  // may not outnumber the layers (the megatron_args fuzzer sized one by
  // --pipeline-model-parallel-size 2^40 before any check).
  if (m.n_layers > internal::kMaxLayers) {
    return g.Error("num-layers", absl::StrCat("expected at most ", internal::kMaxLayers, " (a deeper eager model is not "
                                              "modelled), got ", m.n_layers));
  }
  RETURN_IF_ERROR(g.Int("hidden-size", &m.d_model));
  RETURN_IF_ERROR(g.Int("num-attention-heads", &m.n_heads));
  int64_t& seq = *seq_len;
  RETURN_IF_ERROR(g.Int("encoder-seq-length", &seq));
  RETURN_IF_ERROR(g.Int("seq-length", &seq));
  run->batch.seq_len = seq;
  RETURN_IF_ERROR(g.Int("micro-batch-size", &run->batch.per_device));
  RETURN_IF_ERROR(g.Flag("swiglu", &mg.swiglu));
  // Checked products throughout (Note [Magnitude checks] in spec_parse.cc):
  // issue 27's --micro-batch-size 2^62 on 8 GPUs wrapped micro x DP to 0
  // and divided by it (SIGFPE).
  ASSIGN_OR_RETURN(const int64_t four_h, CheckedProduct({{"4", 4}, {"--hidden-size", m.d_model}},
                                                        "the default --ffn-hidden-size"));
  m.mlp_dim = mg.swiglu ? static_cast<int64_t>(static_cast<__int128>(four_h) * 2 / 3 / 64 * 64) : four_h;
  RETURN_IF_ERROR(g.Int("ffn-hidden-size", &m.mlp_dim));
  if (m.d_model % m.n_heads != 0 && !g.Has("kv-channels")) {
    return g.Error("hidden-size", absl::StrCat("hidden-size (", m.d_model, ") must be a multiple of "
                                               "--num-attention-heads (", m.n_heads, ") unless --kv-channels is given"));
  }
  m.head_dim = m.d_model / m.n_heads;
  RETURN_IF_ERROR(g.Int("kv-channels", &m.head_dim));
  bool gqa = false;
  RETURN_IF_ERROR(g.Flag("group-query-attention", &gqa));
  m.n_kv_heads = m.n_heads;
  if (gqa) {
    m.n_kv_heads = 1;  // argparse default of --num-query-groups
    RETURN_IF_ERROR(g.Int("num-query-groups", &m.n_kv_heads));
    if (m.n_heads % m.n_kv_heads != 0) {
      return g.Error("num-query-groups", absl::StrCat("must divide --num-attention-heads (", m.n_heads, ")"));
    }
  }
  return absl::OkStatus();
}

// Precision, the layers' options and the attention backend.
absl::Status ApplyLayers(const Args& g, RunSpec* run, int64_t seq) {
  MegatronSpec& mg = run->megatron;
  ModelSpec& m = run->model;
  // Precision: params, compute, main_grad.
  bool bf16 = false, fp16 = false, fp32_grads = false;
  RETURN_IF_ERROR(g.Flag("bf16", &bf16));
  RETURN_IF_ERROR(g.Flag("fp16", &fp16));
  RETURN_IF_ERROR(g.Flag("accumulate-allreduce-grads-in-fp32", &fp32_grads));
  if (bf16 && fp16) return g.Error("fp16", "cannot be given with --bf16");
  m.weight_dtype = m.compute_dtype = bf16 ? DType::kBF16 : fp16 ? DType::kF16 : DType::kF32;
  mg.grad_dtype = (bf16 || fp32_grads || !fp16) ? DType::kF32 : DType::kF16;
  m.logits_dtype = DType::kF32;
  bool no_fusion = false;
  RETURN_IF_ERROR(g.Flag("no-gradient-accumulation-fusion", &no_fusion));
  mg.gradient_accumulation_fusion = !no_fusion;
  // Note [Megatron iteration on the host] (models/gpt_megatron_host.cc).
  RETURN_IF_ERROR(g.Flag("log-params-norm", &mg.log_params_norm));
  RETURN_IF_ERROR(g.Flag("log-num-zeros-in-grad", &mg.log_num_zeros_in_grad));
  bool no_nan_check = false;
  RETURN_IF_ERROR(g.Flag("no-check-for-nan-in-loss-and-grad", &no_nan_check));
  mg.check_for_nan = !no_nan_check;
  if (no_nan_check && g.Has("check-for-nan-in-loss-and-grad")) {
    return g.Error("check-for-nan-in-loss-and-grad", "contradicts --no-check-for-nan-in-loss-and-grad");
  }
  // Layers.
  std::string norm = "LayerNorm";
  RETURN_IF_ERROR(g.Choice("normalization", &norm, {"LayerNorm", "RMSNorm"}));
  mg.rms_norm = norm == "RMSNorm";
  RETURN_IF_ERROR(g.Flag("qk-layernorm", &mg.qk_layernorm));
  bool no_bias = false;
  RETURN_IF_ERROR(g.Flag("disable-bias-linear", &no_bias));
  mg.bias_linear = !no_bias;
  mg.qkv_bias = mg.bias_linear;
  RETURN_IF_ERROR(g.Flag("add-qkv-bias", &mg.qkv_bias));
  if (g.Has("add-bias-linear")) {
    bool b = true;
    RETURN_IF_ERROR(g.Flag("add-bias-linear", &b));
    if (b && no_bias) return g.Error("add-bias-linear", "contradicts --disable-bias-linear");
  }
  bool untie = false;
  RETURN_IF_ERROR(g.Flag("untie-embeddings-and-output-weights", &untie));
  m.tied_embeddings = !untie;
  RETURN_IF_ERROR(g.Choice("position-embedding-type", &mg.position, {"learned_absolute", "rope", "none"}));
  bool old_rope = false, no_pos = false;
  RETURN_IF_ERROR(g.Flag("use-rotary-position-embeddings", &old_rope));
  RETURN_IF_ERROR(g.Flag("no-position-embedding", &no_pos));
  if (old_rope) mg.position = "rope";
  if (no_pos) mg.position = "none";
  mg.max_position = seq;
  RETURN_IF_ERROR(g.Int("max-position-embeddings", &mg.max_position));
  if (mg.position == "learned_absolute" && mg.max_position < seq) {
    return g.Error("max-position-embeddings",
                   absl::StrCat("must be >= the sequence length (", seq, ") with learned absolute positions"));
  }
  RETURN_IF_ERROR(g.Float("attention-dropout", &mg.attention_dropout, 0, 1));
  RETURN_IF_ERROR(g.Float("hidden-dropout", &mg.hidden_dropout, 0, 1));
  RETURN_IF_ERROR(g.Choice("transformer-impl", &mg.transformer_impl, {"transformer_engine", "local"}));
  std::string backend = "auto";
  RETURN_IF_ERROR(g.Choice("attention-backend", &backend, {"auto", "flash", "fused", "unfused", "local"}));
  bool use_flash = false;
  RETURN_IF_ERROR(g.Flag("use-flash-attn", &use_flash));
  // Note [Megatron attention backends]: TE's DotProductAttention picks
  // FlashAttention or cuDNN FusedAttention under `auto`, `flash` and `fused`
  // (both keep O(s) values: q, k, v, the output and the softmax statistics);
  // `unfused` (TE UnfusedDotProductAttention) and `local` (Megatron's own
  // megatron/core/transformer/dot_product_attention.py with the fused
  // scale-mask-softmax) keep the s^2 softmax output and dropout mask
  // (Korthikanti's 5as/h term). --transformer-impl local is local attention
  // unless --use-flash-attn.
  const bool s2 = backend == "unfused" || backend == "local" ||
                  (mg.transformer_impl == "local" && backend == "auto" && !use_flash);
  mg.attention = s2 ? "unfused" : "flash";
  // --qk-layernorm under local: the local spec's norm (Apex FusedLayerNorm
  // or torch's) saves other tensors than TE's TENorm.
  if (mg.qk_layernorm && mg.transformer_impl != "transformer_engine") {
    return g.Error("qk-layernorm", "modelled under --transformer-impl transformer_engine (TE's TENorm) only");
  }
  return absl::OkStatus();
}

// The tokenizer and its vocabulary, unpadded (ApplyParallelism pads it).
absl::Status ApplyVocabulary(const Args& g, RunSpec* run) {
  MegatronSpec& mg = run->megatron;
  RETURN_IF_ERROR(g.Choice("tokenizer-type", &mg.tokenizer,
                           {"GPT2BPETokenizer", "NullTokenizer", "HuggingFaceTokenizer", "Llama2Tokenizer",
                            "SentencePieceTokenizer", "GPTSentencePieceTokenizer", "TikTokenizer"}));
  int64_t vocab_size = 0;
  RETURN_IF_ERROR(g.Int("vocab-size", &vocab_size));
  if (mg.tokenizer == "GPT2BPETokenizer" || (mg.tokenizer.empty() && vocab_size == 0)) {
    if (vocab_size != 0) return g.Error("vocab-size", "GPT2BPETokenizer fixes the vocabulary (50257)");
    mg.vocab_unpadded = 50257;  // GPT-2 BPE: gpt2-vocab.json
    if (mg.tokenizer.empty()) mg.tokenizer = "GPT2BPETokenizer";
  } else if (mg.tokenizer == "TikTokenizer" && vocab_size == 0) {
    // megatron/core/tokenizers/text/libraries/tiktoken_tokenizer.py
    // (57a02672): vocab_size defaults to DEFAULT_TIKTOKEN_MAX_VOCAB = 2**17.
    mg.vocab_unpadded = 131072;
  } else if (mg.tokenizer == "NullTokenizer") {
    if (vocab_size == 0) return g.Error("tokenizer-type", "NullTokenizer needs --vocab-size");
    mg.vocab_unpadded = vocab_size + 1;  // _NullTokenizer: an EOD id after the vocabulary
  } else {
    if (vocab_size == 0) {
      return g.Error("tokenizer-type", absl::StrCat(mg.tokenizer.empty() ? "a tokenizer" : mg.tokenizer,
                                                    " reads its vocabulary from a file: give its size with "
                                                    "--vocab-size"));
    }
    mg.vocab_unpadded = vocab_size;
  }
  return absl::OkStatus();
}

// Tensor, pipeline, context and data parallelism; the pipeline's stages.
absl::Status ApplyParallelism(const Args& g, RunSpec* run, int64_t seq) {
  MegatronSpec& mg = run->megatron;
  ModelSpec& m = run->model;
  int64_t tp = 1, pp = 1, cp = 1, divisible = 128;
  RETURN_IF_ERROR(g.Int("tensor-model-parallel-size", &tp));
  RETURN_IF_ERROR(g.Int("pipeline-model-parallel-size", &pp));
  RETURN_IF_ERROR(g.Int("context-parallel-size", &cp));
  RETURN_IF_ERROR(g.Int("make-vocab-size-divisible-by", &divisible));
  std::string cp_comm = "p2p";
  RETURN_IF_ERROR(g.Choice("cp-comm-type", &cp_comm, {"p2p", "a2a"}));
  ASSIGN_OR_RETURN(const int64_t vocab_multiple,
                   CheckedProduct({{"--make-vocab-size-divisible-by", divisible}, {"--tensor-model-parallel-size", tp}}));
  m.vocab = CeilTo(mg.vocab_unpadded, vocab_multiple);
  if (m.vocab == INT64_MAX) return g.Error("vocab-size", "the padded vocabulary exceeds 2^63 - 1");
  run->parallelism.tensor = tp;
  bool sp = false;
  RETURN_IF_ERROR(g.Flag("sequence-parallel", &sp));
  run->parallelism.sequence_parallel = sp && tp > 1;
  mg.pipeline = pp;
  mg.context = cp;
  mg.cp_comm = cp_comm;
  ASSIGN_OR_RETURN(const int64_t model_parallel,
                   CheckedProduct({{"--tensor-model-parallel-size", tp},
                                   {"--pipeline-model-parallel-size", pp},
                                   {"--context-parallel-size", cp}}));
  if (mg.world_size % model_parallel != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "megatron.world_size: ", mg.world_size, " is not a multiple of TP x PP x CP = ", tp, " x ", pp, " x ", cp));
  }
  mg.data = mg.world_size / model_parallel;
  if (m.n_heads % tp != 0) return g.Error("tensor-model-parallel-size", "must divide --num-attention-heads");
  if (m.n_kv_heads % tp != 0) return g.Error("tensor-model-parallel-size", "must divide the query groups");
  if (m.mlp_dim % tp != 0) return g.Error("tensor-model-parallel-size", "must divide --ffn-hidden-size");
  if (cp > 1 && (cp > seq / 2 || seq % (2 * cp) != 0)) {
    return g.Error("context-parallel-size", "2 x CP must divide the sequence length (load-balanced chunks)");
  }
  if (cp > 1 && mg.attention != "flash") {
    return g.Error("context-parallel-size", "context parallelism runs TE's flash/fused attention only");
  }
  // AttnFuncWithCPAndQKVOA2A.forward (TE v2.11 context_parallel.py) asserts
  // "The number of attention heads needs to be divisible by CP size!" on
  // each TP rank's query heads and key/value groups.
  if (cp > 1 && cp_comm == "a2a" && (m.n_heads / tp % cp != 0 || m.n_kv_heads / tp % cp != 0)) {
    return g.Error("cp-comm-type",
                   absl::StrCat("a2a needs each TP rank's attention heads (", m.n_heads / tp, ") and query groups (",
                                m.n_kv_heads / tp, ") divisible by --context-parallel-size ", cp,
                                " (Transformer Engine's AttnFuncWithCPAndQKVOA2A asserts it)"));
  }
  if (run->parallelism.sequence_parallel && seq / cp % tp != 0) {
    return g.Error("sequence-parallel", "TP must divide the sequence length per CP rank");
  }
  int64_t per_vp = 0, vstages = 0;
  RETURN_IF_ERROR(g.Int("num-layers-per-virtual-pipeline-stage", &per_vp));
  RETURN_IF_ERROR(g.Int("num-virtual-stages-per-pipeline-rank", &vstages));
  if (per_vp > 0 && vstages > 0) {
    return g.Error("num-virtual-stages-per-pipeline-rank", "give it or --num-layers-per-virtual-pipeline-stage");
  }
  // Every stage builds a layer, the embedding and the loss counting as one
  // each under --account-for-*-in-pipeline-split (StageLayers).
  if (pp > m.n_layers + 2) {
    return g.Error("pipeline-model-parallel-size",
                   absl::StrCat(pp, " stages for ", m.n_layers, " layers: every stage builds at least one layer"));
  }
  RETURN_IF_ERROR(StageLayers(g, m.n_layers, pp, per_vp, vstages, &mg));
  RETURN_IF_ERROR(g.Int("microbatch-group-size-per-virtual-pipeline-stage", &mg.microbatch_group));
  if (mg.microbatch_group == 0) mg.microbatch_group = pp;
  // Note [Megatron p2p settings]: overlap_p2p_comm is on unless
  // --no-overlap-p2p-communication, and validate_args switches it off
  // without the interleaved schedule; batch_p2p_comm = not overlap_p2p_comm
  // (argument_utils.py); the interleaved schedule without overlap needs
  // PP > 2 (validate_args). --use-tp-pp-dp-mapping orders ranks
  // tp-cp-ep-pp-dp instead of tp-cp-ep-dp-pp (initialize.py).
  bool old_overlap = false, no_overlap = false;
  RETURN_IF_ERROR(g.Flag("overlap-p2p-communication", &old_overlap));
  RETURN_IF_ERROR(g.Flag("no-overlap-p2p-communication", &no_overlap));
  if (old_overlap && no_overlap) {
    return g.Error("no-overlap-p2p-communication", "contradicts --overlap-p2p-communication");
  }
  mg.overlap_p2p = !no_overlap && mg.virtual_stages > 1;
  if (mg.virtual_stages > 1 && no_overlap && pp <= 2) {
    return g.Error("no-overlap-p2p-communication",
                   "the interleaved schedule without p2p overlap needs PP > 2 (Megatron's validate_args)");
  }
  RETURN_IF_ERROR(g.Flag("use-tp-pp-dp-mapping", &mg.tp_pp_dp_mapping));
  return absl::OkStatus();
}

// The micro-batches of a step.
absl::Status ApplyBatch(const Args& g, RunSpec* run) {
  MegatronSpec& mg = run->megatron;
  const int64_t micro = run->batch.per_device;
  ASSIGN_OR_RETURN(const int64_t per_step,
                   CheckedProduct({{"--micro-batch-size", micro}, {"data-parallel size", mg.data}},
                                  "the sequences of one micro-batch step"));
  mg.global_batch = per_step;
  RETURN_IF_ERROR(g.Int("global-batch-size", &mg.global_batch));
  if (mg.global_batch % per_step != 0) {
    return g.Error("global-batch-size", absl::StrCat("must be a multiple of micro-batch-size x data-parallel size (",
                                                     micro, " x ", mg.data, ")"));
  }
  mg.microbatches = mg.global_batch / per_step;
  // Every micro-batch is scheduled (megatron_step_pipeline.cc): the count
  // is bounded as loop iterations are (Note [Bounded expansion] in
  // sim/base/checked.h). --global-batch-size 8000000000 scheduled a
  // billion (issue 27).
  if (mg.microbatches > kMaxExpandedIterations) {
    return g.Error("global-batch-size",
                   absl::StrCat(mg.global_batch, " / (micro-batch-size x data-parallel size = ", per_step, ") = ",
                                mg.microbatches, " micro-batches; at most ", kMaxExpandedIterations,
                                " are scheduled (Note [Bounded expansion] in sim/base/checked.h)"));
  }
  if (mg.virtual_stages > 1 && mg.microbatches % mg.microbatch_group != 0) {
    return g.Error("global-batch-size",
                   absl::StrCat("the interleaved schedule needs the micro-batches (", mg.microbatches,
                                ") to be a multiple of the micro-batch group (", mg.microbatch_group, ")"));
  }
  return absl::OkStatus();
}

// The optimizer, data-parallel overlap and recompute.
absl::Status ApplyOptimizerAndRecompute(const Args& g, RunSpec* run) {
  MegatronSpec& mg = run->megatron;
  ModelSpec& m = run->model;
  const int64_t pp = mg.pipeline;
  // Optimizer and data parallelism.
  RETURN_IF_ERROR(g.Flag("use-distributed-optimizer", &mg.distributed_optimizer));
  RETURN_IF_ERROR(g.Flag("overlap-grad-reduce", &mg.overlap_grad_reduce));
  RETURN_IF_ERROR(g.Flag("overlap-param-gather", &mg.overlap_param_gather));
  if (mg.overlap_param_gather && !mg.distributed_optimizer) {
    return g.Error("overlap-param-gather", "needs --use-distributed-optimizer");
  }
  RETURN_IF_ERROR(g.Int("ddp-bucket-size", &mg.bucket_size));
  std::string opt = "adam";
  RETURN_IF_ERROR(g.Choice("optimizer", &opt, {"adam"}));
  run->optimizer.kind = "adamw";
  run->optimizer.moment_dtype = DType::kF32;
  double clip = 1.0;
  RETURN_IF_ERROR(g.Float("clip-grad", &clip, 0, 1e30));
  run->optimizer.clip_grad_norm = clip > 0;
  // Recompute.
  std::string gran;
  RETURN_IF_ERROR(g.Choice("recompute-granularity", &gran, {"full", "selective"}));
  bool old_selective = false;
  RETURN_IF_ERROR(g.Flag("recompute-activations", &old_selective));
  if (old_selective) gran = "selective";
  run->remat.policy = gran.empty() ? "none" : gran;
  std::string method = "uniform";
  if (gran == "full" && !g.Has("recompute-method")) {
    return g.Error("recompute-granularity", "full recompute needs --recompute-method uniform|block");
  }
  RETURN_IF_ERROR(g.Choice("recompute-method", &method, {"uniform", "block"}));
  run->remat.method = method;
  // Under the block method Megatron checkpoints the first
  // recompute_num_layers layers of each chunk and runs the rest as they are
  // (core/transformer/transformer_block.py _checkpointed_forward, 57a02672):
  // 0 recomputes none, the step without recompute. The uniform method steps
  // through the chunk recompute_num_layers at a time, so it needs >= 1.
  RETURN_IF_ERROR(g.Int("recompute-num-layers", &run->remat.num_layers, /*min=*/0));
  if (run->remat.num_layers == 0 && !(gran == "full" && method == "block")) {
    return g.Error("recompute-num-layers", "expected an integer >= 1, got '0' (0 only with --recompute-granularity "
                                           "full --recompute-method block: no layer recomputed)");
  }
  if (gran == "full" && method == "block" && run->remat.num_layers > m.n_layers / pp / mg.virtual_stages) {
    return g.Error("recompute-num-layers", "more layers than a model chunk holds");
  }
  if (gran == "full" && method == "block" && run->remat.num_layers == 0) {
    run->remat.policy = "none";
    run->remat.num_layers = RematSpec().num_layers;  // unused without recompute
  }
  if (run->remat.policy != "none") run->remat.policy_at = g.Get(old_selective ? "recompute-activations"
                                                                               : "recompute-granularity")->where;
  return absl::OkStatus();
}

// Note [Megatron fp8]: Megatron-LM megatron/training/arguments.py
// _add_transformer_engine_args (--fp8-format e4m3|hybrid, dest fp8, default
// off; --fp8-recipe default delayed; --fp8-amax-history-len default 1) and
// megatron/core/fp8_utils.py get_fp8_recipe (delayed -> TE DelayedScaling,
// tensorwise -> Float8CurrentScaling, mxfp8 -> MXFP8BlockScaling, blockwise
// -> Float8BlockScaling). fp8 runs in TE modules only (transformer-impl
// transformer_engine) and on top of --bf16 or --fp16 params. What it does to
// the step: models/gpt_fp8.cc.
absl::Status ApplyFp8(const Args& g, RunSpec* run) {
  MegatronSpec& mg = run->megatron;
  RETURN_IF_ERROR(g.Choice("fp8-format", &mg.fp8_format, {"e4m3", "hybrid"}));
  RETURN_IF_ERROR(g.Choice("fp8-recipe", &mg.fp8_recipe, {"delayed", "tensorwise", "mxfp8", "blockwise"}));
  RETURN_IF_ERROR(g.Int("fp8-amax-history-len", &mg.fp8_amax_history_len));
  RETURN_IF_ERROR(g.Flag("fp8-param-gather", &mg.fp8_param_gather));
  if (mg.fp8_format.empty()) {
    for (const char* n : {"fp8-recipe", "fp8-amax-history-len", "fp8-param-gather"}) {
      if (g.Has(n)) return g.Error(n, "has no effect without --fp8-format e4m3|hybrid (fp8 training is off)");
    }
    return absl::OkStatus();
  }
  if (g.Has("num-experts")) {
    // Note [Megatron fp8] casts the four dense linears' GEMMs; the grouped
    // expert GEMMs of models/gpt_moe.cc under fp8 (TE's fp8 grouped GEMM,
    // the fp8 token dispatch) are not modelled.
    return g.Error("fp8-format", "fp8 together with mixture of experts (--num-experts) is not modelled; "
                                 "drop one of them");
  }
  if (mg.fp8_recipe == "mxfp8" || mg.fp8_recipe == "blockwise") {
    return g.Error("fp8-recipe", absl::StrCat(mg.fp8_recipe, " block scaling (per-block scale tensors",
                                              mg.fp8_recipe == "mxfp8" ? ", Blackwell only" : "",
                                              ") is not modelled; modelled: delayed, tensorwise"));
  }
  if (mg.transformer_impl != "transformer_engine") {
    return g.Error("fp8-format", "fp8 runs in Transformer Engine modules: needs --transformer-impl transformer_engine");
  }
  if (run->model.compute_dtype == DType::kF32) {
    return g.Error("fp8-format", "fp8 training needs --bf16 or --fp16 (its non-GEMM ops and master weights)");
  }
  if (mg.fp8_param_gather && !mg.distributed_optimizer) {
    return g.Error("fp8-param-gather", "modelled with --use-distributed-optimizer only (its fp32 master shard)");
  }
  if (mg.fp8_recipe != "delayed" && g.Has("fp8-amax-history-len")) {
    return g.Error("fp8-amax-history-len", "is delayed scaling's; --fp8-recipe is " + mg.fp8_recipe);
  }
  return absl::OkStatus();
}

// --cross-entropy-loss-fusion and --cross-entropy-fusion-impl (NVIDIA/
// Megatron-LM 57a02672 megatron/training/arguments.py: impl default native,
// choices native | te; validate_args asserts that fusion is not used with
// impl te ("disabled due to stability issues", since 168cb15, 2026-06) nor
// with --deterministic-mode ("Cross Entropy Fusion is currently not
// deterministic")). Native runs megatron/core/fusions/fused_cross_entropy.py,
// te Transformer Engine's parallel_cross_entropy (launch lines from before
// 168cb15 run it): both modelled in models/gpt_cross_entropy.cc.
absl::Status ApplyCrossEntropyFusion(const Args& g, RunSpec* run) {
  MegatronSpec& mg = run->megatron;
  std::string impl = "native";
  RETURN_IF_ERROR(g.Flag("cross-entropy-loss-fusion", &mg.cross_entropy_fusion));
  RETURN_IF_ERROR(g.Choice("cross-entropy-fusion-impl", &impl, {"native", "te"}));
  if (!mg.cross_entropy_fusion) {
    // compute_language_model_loss reads the impl only under the fusion: the
    // unfused cross entropy runs whatever it says.
    for (auto& [name, how] : mg.args) {
      if (name != "cross-entropy-fusion-impl") continue;
      how = "no effect on memory or time: read only with --cross-entropy-loss-fusion";
      mg.no_effect.push_back(name);
    }
    return absl::OkStatus();
  }
  // te: Transformer Engine's parallel_cross_entropy (Note [Transformer
  // Engine cross entropy], models/gpt_cross_entropy.cc), as Megatron-LM ran
  // it before 168cb15 (2026-06, #5115), which refuses it since.
  mg.cross_entropy_te = impl == "te";
  bool deterministic = false;
  RETURN_IF_ERROR(g.Flag("deterministic-mode", &deterministic));
  if (deterministic) {
    return g.Error("cross-entropy-loss-fusion",
                   "is refused by Megatron-LM itself with --deterministic-mode (arguments.py validate_args: "
                   "Cross Entropy Fusion is currently not deterministic)");
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

// CUBLAS_WORKSPACE_CONFIG from the launcher (Note [Megatron GEMM workspaces],
// models/gpt_workspace.cc): ":SIZE:COUNT" pairs of positive integers, as
// PyTorch's parseChosenWorkspaceSize reads them. One it cannot parse PyTorch
// warns about and ignores; gpusim refuses it instead.
absl::Status ApplyCublasWorkspaceConfig(const Args& g, RunSpec* run) {
  const MegatronArg* c = g.Get("CUBLAS_WORKSPACE_CONFIG");
  if (c == nullptr) return absl::OkStatus();
  const std::vector<std::string> parts = absl::StrSplit(c->value, ':');
  bool ok = parts.size() >= 3 && parts.size() % 2 == 1 && parts[0].empty();
  for (size_t i = 1; ok && i < parts.size(); ++i) {
    int64_t v = 0;
    ok = absl::SimpleAtoi(parts[i], &v) && v > 0 && v <= (int64_t{1} << 20);
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(c->where.empty() ? "" : c->where + ": ",
                                                   "megatron.args: CUBLAS_WORKSPACE_CONFIG: expected :SIZE:COUNT pairs "
                                                   "(KiB x count, each 1 to 2^20), got '", c->value, "'"));
  }
  run->megatron.cublas_workspace_config = c->value;
  return absl::OkStatus();
}

}  // namespace

absl::Status ApplyMegatronArgs(const std::vector<MegatronArg>& args, RunSpec* run) {
  RETURN_IF_ERROR(RecordMegatronArgs(args, run));
  const Args g(args);
  int64_t seq = 0;
  RETURN_IF_ERROR(ApplyModelShape(g, run, &seq));
  RETURN_IF_ERROR(ApplyLayers(g, run, seq));
  if (g.Has("pretrain_deepseekv2.py")) run->megatron.script = "pretrain_deepseekv2.py";
  RETURN_IF_ERROR(ApplyVocabulary(g, run));
  RETURN_IF_ERROR(ApplyParallelism(g, run, seq));
  RETURN_IF_ERROR(ApplyBatch(g, run));
  RETURN_IF_ERROR(ApplyOptimizerAndRecompute(g, run));
  RETURN_IF_ERROR(ApplyFp8(g, run));
  RETURN_IF_ERROR(ApplyMlaArgs(g, run));
  RETURN_IF_ERROR(ApplyCrossEntropyFusion(g, run));
  // megatron/training/config/resilience_config.py rerun_mode (57a02672,
  // default validate_results): the rerun state machine's checks (Note
  // [Megatron iteration on the host]) run in disabled and validate_results
  // alike; report_stats reruns iterations to gather statistics.
  std::string rerun = "validate_results";
  RETURN_IF_ERROR(g.Choice("rerun-mode", &rerun, {"disabled", "validate_results", "report_stats"}));
  if (rerun == "report_stats") {
    return g.Error("rerun-mode", "not modelled: report_stats reruns iterations to gather statistics");
  }
  RETURN_IF_ERROR(ApplyMoeArgs(g, run));
  RETURN_IF_ERROR(ApplyCublasWorkspaceConfig(g, run));
  if (run->megatron.script == "pretrain_deepseekv2.py" && run->megatron.virtual_stages > 1) {
    return g.Error("pretrain_deepseekv2.py", "virtual pipeline stages: the script's model_provider takes no vp_stage "
                                             "(Megatron's get_model raises a TypeError)");
  }
  run->framework = "pytorch";
  return absl::OkStatus();
}

absl::Status ParseMegatronNode(const ConfigNode& node, RunSpec* run) {
  const std::string at = node.location().ToString();
  if (!node.is_map()) {
    return absl::InvalidArgumentError(absl::StrCat(at, ": megatron: expected a mapping {world_size, gpus_per_node, "
                                                   "args}, got ", node.Describe()));
  }
  MegatronSpec& mg = run->megatron;
  std::vector<MegatronArg> args;
  bool have_args = false;
  for (const ConfigEntry& e : node.entries()) {
    const std::string where = e.value.location().ToString();
    if (e.key == "world_size" || e.key == "gpus_per_node") {
      int64_t v = 0;
      if (!e.value.is_scalar() || !ParseInt64(e.value.scalar(), &v) || v < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": megatron.", e.key, ": expected an integer >= 1, got ", e.value.Describe()));
      }
      (e.key == "world_size" ? mg.world_size : mg.gpus_per_node) = v;
      run->written["megatron." + e.key] = where;
    } else if (e.key == "args") {
      have_args = true;
      if (e.value.is_scalar()) {
        ASSIGN_OR_RETURN(args, SplitMegatronArgs(e.value.scalar(), e.value.location()));
      } else if (e.value.is_map()) {
        for (const ConfigEntry& a : e.value.entries()) {
          if (!a.value.is_scalar() && !a.value.is_null()) {
            return absl::InvalidArgumentError(absl::StrCat(a.value.location().ToString(), ": megatron.args.", a.key,
                                                           ": expected a scalar value, got ", a.value.Describe()));
          }
          // A flag written false is a flag not given.
          std::string why;
          const std::string kind = ClassifyMegatronArg(Canonical(a.key), &why);
          if (a.value.is_scalar() && absl::AsciiStrToLower(a.value.scalar()) == "false" && (kind == "refused" || kind == "no_effect" || kind == "not_modelled")) {
            continue;
          }
          args.push_back({Canonical(a.key), a.value.is_null() ? "true" : a.value.scalar(),
                          a.key_location.ToString()});
        }
      } else if (!e.value.is_null()) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": megatron.args: expected a mapping of arguments or one launch-line string, got ",
            e.value.Describe()));
      }
    } else {
      std::string msg = absl::StrCat("unknown key '", e.key, "'");
      const std::string near = NearestName(e.key, {"world_size", "gpus_per_node", "args"});
      if (!near.empty()) absl::StrAppend(&msg, " (did you mean '", near, "'?)");
      return absl::InvalidArgumentError(absl::StrCat(e.key_location.ToString(), ": megatron: ", msg));
    }
  }
  if (!have_args) return absl::InvalidArgumentError(absl::StrCat(at, ": megatron: missing required key 'args'"));
  return ApplyMegatronArgs(args, run);
}

absl::StatusOr<ConfigNode> SetMegatronKey(const ConfigNode& node, const std::string& key, const std::string& value,
                                          const SourceLocation& where) {
  const std::string at = where.ToString();
  if (!node.is_map()) return absl::InvalidArgumentError(absl::StrCat(at, ": megatron: the config's block is not a mapping"));
  ConfigNode out = node;
  if (key == "world_size" || key == "gpus_per_node") {
    out.Set(key, where, ConfigNode::Scalar(value, where));
    return out;
  }
  if (!absl::StartsWith(key, "args.") || key.size() == 5) {
    return absl::InvalidArgumentError(absl::StrCat(at, ": megatron.", key, ": expected megatron.world_size, ",
                                                   "megatron.gpus_per_node or megatron.args.NAME (a launch-line argument)"));
  }
  const std::string name = Canonical(key.substr(5));
  ConfigNode args = ConfigNode::Map(where);
  SourceLocation args_at = where;
  if (const ConfigEntry* e = node.FindEntry("args"); e != nullptr) {
    args_at = e->key_location;
    if (e->value.is_scalar()) {
      ASSIGN_OR_RETURN(std::vector<MegatronArg> split, SplitMegatronArgs(e->value.scalar(), e->value.location()));
      args = ConfigNode::Map(e->value.location());
      for (const MegatronArg& a : split) {
        SourceLocation l;
        l.label = a.where;
        args.Set(a.name, l, ConfigNode::Scalar(a.value, l));
      }
    } else if (e->value.is_map()) {
      for (const ConfigEntry& a : e->value.entries()) args.Set(Canonical(a.key), a.key_location, a.value);
    }
  }
  args.Set(name, where, ConfigNode::Scalar(value, where));
  out.Set("args", args_at, std::move(args));
  return out;
}

}  // namespace gpusim
