// Typed specifications: what a run configuration means once parsed. The YAML
// layer (sim/config/loader.h) is the only producer; nothing past sim/config
// sees a YAML node. Every field's YAML key is named in its comment.
#ifndef GPUSIM_SIM_CONFIG_SPEC_H_
#define GPUSIM_SIM_CONFIG_SPEC_H_

#include <any>
#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <utility>
#include <string>
#include <vector>

#include "sim/base/units.h"
#include "sim/ir/dtype.h"

namespace gpusim {

// The kernel models sim/device/kernel_model.cc registers (the config layer
// sits below sim/device; sim/device/timing_test.cc checks the two agree).
inline constexpr const char* kKernelModelNames[] = {"roofline", "tiled"};

// configs/devices/*.yaml. Rates are peak datasheet values; the *_efficiency
// fields are the achievable fractions that calibration fits.
struct DeviceSpec {
  std::string name;            // name
  std::string description;     // description
  Bytes cuda_total;            // memory.cuda_total: cudaMemGetInfo total
  Bytes context_reserve;       // memory.context_reserve: CUDA context + libs
  int sms = 0;                 // sms
  // compute_capability: "MAJOR.MINOR" (CUDA's cudaDeviceProp major/minor);
  // 0.0 when the device file gives none. The PyTorch device model reads it
  // (sim/lower/eager/device_memory.h: cuBLAS workspace size).
  int cc_major = 0, cc_minor = 0;
  int max_threads_per_sm = 2048;  // max_threads_per_sm: cudaDeviceProp maxThreadsPerMultiProcessor
  double hbm_bandwidth = 0;    // hbm_bandwidth: bytes/s, peak
  double peak_bf16 = 0;        // flops.bf16: FLOP/s, dense tensor core
  double peak_fp16 = 0;        // flops.fp16
  double peak_tf32 = 0;        // flops.tf32
  double peak_fp32 = 0;        // flops.fp32: non-tensor
  // flops.fp8: FP8 tensor-core FLOP/s, dense; 0 = the device has no fp8
  // tensor cores (A100), and an fp8 matmul on it is refused by name
  // (sim/device/timing.h UnrunnableReason). Note [fp8 peak] in spec_parse.cc.
  double peak_fp8 = 0;
  Bytes l2;                    // l2
  double nvlink_bandwidth = 0; // links.nvlink: bytes/s per direction
  double pcie_bandwidth = 0;   // links.pcie: bytes/s per direction
  double network_bandwidth = 0;// links.network: bytes/s per GPU between nodes
  SimTime link_latency;        // links.latency: per collective step
  SimTime launch_overhead;     // launch_overhead: per kernel
  double matmul_efficiency = 0;     // efficiency.matmul
  double attention_efficiency = 0;  // efficiency.attention (roofline attention: FLOPs at this share of the peak)
  // efficiency.fused_attention: the share of the tile model's ideal a
  // perfectly tiled fused SDPA kernel reaches (sim/device/impl/attention.h,
  // Note [Fused attention time]); read by the tiled kernel model only.
  double fused_attention_efficiency = 0;
  double memory_efficiency = 0;     // efficiency.memory (streaming ops)
  double collective_efficiency = 0; // efficiency.collective (bus bandwidth)
  // allocator_cost: device-memory calls an allocator makes, charged to the
  // stream of the allocation that triggered them (engine.h, Note [Allocator
  // time]).
  SimTime malloc_cost;         // allocator_cost.malloc: one cudaMalloc (a new segment)
  SimTime free_cost;           // allocator_cost.free: one cudaFree, after the device drains
  SimTime map_page_cost;       // allocator_cost.map_page: one expandable-segment page mapped
  SimTime unmap_page_cost;     // allocator_cost.unmap_page: one page unmapped, after its stream drains
  // host: the CPU side of an eager step (Note [Host timeline] in
  // sim/engine/engine.h): what the host spends issuing one kernel (PyTorch
  // dispatch and the CUDA launch call) and one Python module call.
  SimTime host_op_cost;        // host.op
  SimTime host_module_cost;    // host.module
  // A recorded PyTorch step's host work (Note [Host work per kernel],
  // python/gpusim_torch/recorder.py; Note [Recorded host costs],
  // sim/lower/eager/host_timeline.h), in place of host.op for events
  // that carry it: per aten op dispatched from Python, per autograd node
  // the engine runs, per nn.Module call (its Python forward included).
  SimTime host_dispatch_cost;  // host.dispatch
  SimTime host_node_cost;      // host.node
  SimTime host_python_module_cost;  // host.python_module
  // Note [Megatron host costs]: host.op and host.module for a Megatron-LM
  // launch line's iteration (its Python: Megatron-Core and Transformer
  // Engine modules, on the host this GPU sits in); below zero: not given,
  // host.op and host.module price it like any eager step.
  SimTime host_megatron_op_cost = SimTime(-1);      // host.megatron_op
  SimTime host_megatron_module_cost = SimTime(-1);  // host.megatron_module
  bool host_given = false;     // the device file gives host.op or host.module
  bool host_recorded_given = false;  // ... with dispatch, node or python_module
  // kernel_model: the KernelModel (sim/device/kernel_model.h) that times
  // this device's events; one of kKernelModelNames.
  std::string kernel_model = "tiled";
  std::string source_file;          // where it was read from

  // Bytes an allocator may use: CUDA total minus the context reserve.
  Bytes usable() const { return cuda_total - context_reserve; }
  // Peak FLOP/s of the unit that runs `dtype` matmuls.
  double PeakFlops(DType dtype) const;
};

// Note [Megatron host costs]
// A Megatron-LM launch line's step prices its host work (Note [Megatron
// iteration on the host], models/gpt_megatron_host.cc: what it issues) with
// host.megatron_op per kernel and host.megatron_module per Python module
// call where the device gives them; other eager steps keep host.op and
// host.module. Why apart: host.op / host.module are measured from plain
// PyTorch (Hugging Face models) on the H200 machine (Note [Host cost per
// kernel], spec_parse.cc), and a Megatron iteration's Python is heavier per
// call (Transformer Engine's modules and autograd Functions, Megatron-Core's
// tensor-parallel wrappers) on a different host (a DGX's CPUs). Megatron-LM's
// own CI logs its iteration time on DGX A100 and DGX H100
// (validation/megatron_functional.json): at host.op / host.module the
// small host-bound models come out 36-71% short. The device files carry
// prices fitted to those iterations by `gpusim calibrate
// traces/calibration/megatron_dgx_{a100,h100}.yaml` (written by
// tools/collect/megatron_host_calibration.py), with their leave-one-out
// error; they describe the DGX host each GPU ships in, not a measurement of
// a single op. Idempotent.
inline void UseMegatronHostCosts(DeviceSpec* d) {
  if (d->host_megatron_op_cost >= SimTime(0)) d->host_op_cost = d->host_megatron_op_cost;
  if (d->host_megatron_module_cost >= SimTime(0)) d->host_module_cost = d->host_megatron_module_cost;
}

// configs/models/*.yaml: the transformer family (Llama, GPT).
struct ModelSpec {
  std::string name;           // name
  std::string family;         // family: llama
  int64_t d_model = 0;        // d_model
  int64_t n_layers = 0;       // n_layers
  int64_t n_heads = 0;        // n_heads
  int64_t n_kv_heads = 0;     // n_kv_heads
  int64_t head_dim = 0;       // head_dim
  int64_t mlp_dim = 0;        // mlp_dim
  int64_t vocab = 0;          // vocab
  bool tied_embeddings = false;  // tied_embeddings
  DType weight_dtype = DType::kF32;   // weight_dtype
  DType compute_dtype = DType::kBF16; // compute_dtype
  DType logits_dtype = DType::kF32;   // logits_dtype
  std::string attention = "flash";    // attention: flash | explicit
  int param_scan_axis = 0;            // param_scan_axis: layer axis of stacked params
  bool scan_layers = true;            // scan_layers
  // Mixture of experts (llama family under jax: Note [MaxText MoE dense
  // matmul], models/llama_moe.cc). experts 1: a dense SwiGLU MLP.
  int64_t experts = 1;                // experts: MoE layers of this many experts
  int64_t experts_per_token = 1;      // experts_per_token: the router's top-k
};

struct OptimizerSpec {
  std::string kind = "adamw";         // optimizer.kind: adamw | sgd
  DType moment_dtype = DType::kF32;   // optimizer.moment_dtype
  bool clip_grad_norm = true;         // optimizer.clip_grad_norm
};

struct LoopSpec {
  std::string mode = "rolled";  // loop.mode: rolled | unrolled
  int64_t trip_count = 0;       // loop.trip_count: 0 = from the model
  int64_t unroll = 1;           // loop.unroll: bodies per trip when rolled
};

struct RematSpec {
  std::string policy = "none";       // remat.policy
  std::string policy_at;             // where remat.policy was written (FILE:LINE:COL), for messages; "" = default
  std::vector<std::string> names;    // remat.names: for save_only_these_names etc.
  std::vector<std::string> offload_names;  // remat.offload_names
  // save_from_both_policies: the two policies whose saved sets are joined.
  std::vector<std::string> policies;       // remat.policies
  // Full recompute, how layers are grouped into checkpoints:
  // Megatron-LM --recompute-method / --recompute-num-layers: `uniform`
  // checkpoints the input of every group of num_layers layers (activation
  // checkpointing every k layers); `block` recomputes the first num_layers
  // layers only. torch.utils.checkpoint.checkpoint_sequential: `sequential`
  // splits the layers into num_layers segments and checkpoints all but the
  // last. Chen et al. 2016 (arXiv 1604.06174): `sqrt` checkpoints segments
  // of ceil(sqrt(n)) layers.
  std::string method = "uniform";          // remat.method: uniform | block | sequential | sqrt
  int64_t num_layers = 1;                  // remat.num_layers
};

struct ParallelismSpec {
  int64_t fsdp = 1;              // parallelism.fsdp: devices the state is sharded over
  int64_t tensor = 1;            // parallelism.tensor
  bool sequence_parallel = false;// parallelism.sequence_parallel
  std::string gather_dtype = "compute";  // parallelism.gather_dtype: compute | weight
};

struct BatchSpec {
  int64_t per_device = 1;   // batch.per_device
  int64_t seq_len = 2048;   // batch.seq_len
};

struct AllocatorSpec {
  AllocatorSpec() = default;
  AllocatorSpec(std::string impl_name, std::map<std::string, std::string> written_options)
      : impl(std::move(impl_name)), options(std::move(written_options)) {}

  std::string impl = "ideal";                   // allocator.impl
  std::map<std::string, std::string> options;   // allocator.<option>, as written
  // The options read and checked once into the implementation's typed
  // options: sim/alloc's AllocatorConfig (BfcOptions, PyTorchCachingOptions,
  // parsed members, ...), type-erased here because sim/config sits below
  // sim/alloc. Set by ParseAllocatorOptions (sim/alloc/allocator.h) when
  // the spec is checked (sim/step ApplyCapabilities), with errors at
  // FILE:LINE:COL of the option; null before. MakeAllocator builds from it
  // when it was parsed from this impl and these options.
  std::shared_ptr<const std::any> typed;
};

// A small JAX program described in a run config's `program:` section
// (examples/scan_carry.yaml): entry inputs, one lax.scan with carry and xs,
// jax.grad of a final carry with respect to some inputs, donation. Body ops
// are a small vocabulary with shapes inferred by models/jax_program.cc.
struct ProgramInputSpec {
  std::string name;
  std::vector<int64_t> shape;    // a dim of -1 stands for loop.trip_count
  DType dtype = DType::kF32;
  bool donate = false;           // in jax.jit donate_argnums
};

struct ProgramOpSpec {
  std::string op;                // matmul | mul | add | sum | scale
  std::string out;
  std::vector<std::string> in;
};

struct ProgramSpec {
  bool present = false;
  std::string name;
  std::vector<ProgramInputSpec> inputs;  // argument order
  // Body name ← initial value: an input's name, or `zero` (a scalar 0).
  std::vector<std::pair<std::string, std::string>> carry;
  // Body name ← stacked input sliced along its leading (trip_count) axis.
  std::vector<std::pair<std::string, std::string>> xs;
  // Body name ← a loop-invariant input the body closes over (scan consts).
  std::vector<std::pair<std::string, std::string>> consts;
  std::vector<ProgramOpSpec> body;
  // Carry name ← the body value that becomes its next value.
  std::vector<std::pair<std::string, std::string>> carry_out;
  std::string loss;               // the carry whose final value jax.grad differentiates
  std::vector<std::string> grad;  // inputs differentiated (argnums), the outputs in order
};

// A whole run: what `gpusim run CONFIG` simulates.
// xla: compiler options of the XLA lowering (framework jax), named after the
// XLA debug options they stand for.
struct XlaSpec {
  // xla.dynamic_slice_fusion: --xla_gpu_enable_dynamic_slice_fusion (XLA's
  // default false): library calls read loop slices in place (Note
  // [Materialised loop slices] in sim/lower/xla/loop_slices.h).
  bool dynamic_slice_fusion = false;
};

// A `megatron:` block (or `gpusim run --megatron-args`): a Megatron-LM
// launch line, argument names as megatron/training/arguments.py spells them
// (sim/config/megatron_args.h parses and checks them). What the gpt layers
// read (sizes, TP/SP, recompute, micro-batch) is written into RunSpec's own
// fields; the rest is here. Defaults are Megatron's.
// Mixture of experts in a launch line (--num-experts; sim/config/
// megatron_moe_args.cc parses it, models/gpt_moe.cc builds it). experts 0:
// a dense model.
struct MegatronMoeSpec {
  int64_t experts = 0;               // --num-experts
  int64_t topk = 2;                  // --moe-router-topk
  int64_t ep = 1;                    // --expert-model-parallel-size
  int64_t etp = 1;                   // --expert-tensor-parallel-size (default TP)
  int64_t edp = 1;                   // expert data parallel: TP x CP x DP / (EP x ETP)
  int64_t ffn = 0;                   // --moe-ffn-hidden-size (default --ffn-hidden-size)
  int64_t shared_ffn = 0;            // --moe-shared-expert-intermediate-size (0: none)
  bool grouped_gemm = false;         // --moe-grouped-gemm
  std::string dispatcher = "allgather";  // --moe-token-dispatcher-type allgather | alltoall
  double capacity_factor = 0;        // --moe-expert-capacity-factor (0: none, no dropping)
  bool pad_to_capacity = false;      // --moe-pad-expert-input-to-capacity
  bool aux_loss = false;             // --moe-router-load-balancing-type aux_loss with a coefficient > 0
  bool pre_softmax = false;          // --moe-router-pre-softmax: the softmax over all experts, then top-k
  bool sigmoid = false;              // --moe-router-score-function sigmoid (else softmax)
  bool expert_bias = false;          // --moe-router-enable-expert-bias (aux-loss-free balancing)
  bool router_fp32 = false;          // --moe-router-dtype fp32 (Note [Megatron fp32 router])
  int64_t router_groups = 0;         // --moe-router-num-groups (0: routing not group-limited)
  int64_t group_topk = 0;            // --moe-router-group-topk
  bool permute_fusion = false;       // --moe-permute-fusion: TE's fused permute kernels
  // --moe-layer-freq per decoder layer: 1 an MoE layer, 0 a dense one
  // (Note [Megatron MoE layer pattern], sim/config/megatron_moe_args.cc);
  // empty: every layer an MoE layer (the default, 1).
  std::vector<int> layer_pattern;
  // Which routing the program is built for: "balanced" (tokens x topk /
  // experts on every expert) or "bound" (the capacity-limited case with a
  // capacity factor, else every token on one rank's experts); Note
  // [MoE routing cases] in models/gpt_moe.cc.
  std::string routing = "balanced";
};

// Multi-latent attention (--multi-latent-attention; Note [Megatron
// multi-latent attention], models/gpt_mla.cc): defaults are Megatron-LM
// 23e00ed megatron/training/arguments.py's.
struct MegatronMlaSpec {
  bool present = false;
  int64_t q_lora_rank = 0;   // --q-lora-rank (0: None, one query projection from h)
  int64_t kv_lora_rank = 32; // --kv-lora-rank
  int64_t qk_head_dim = 128; // --qk-head-dim
  int64_t qk_pos_dim = 64;   // --qk-pos-emb-head-dim
  int64_t v_head_dim = 128;  // --v-head-dim
  bool rope_fusion = true;   // TE/Triton fused MLA rope (yarn, the default); false: torch ops
};

struct MegatronSpec {
  bool present = false;
  MegatronMoeSpec moe;               // mixture of experts (experts 0: dense)
  MegatronMlaSpec mla;               // multi-latent attention
  // The training script: pretrain_gpt.py, or SimuMax's pretrain_deepseekv2.py
  // (its loss_func checks NaN only: Note [SimuMax pretrain_deepseekv2.py]).
  std::string script = "pretrain_gpt.py";
  int64_t world_size = 1;            // megatron.world_size
  int64_t gpus_per_node = 8;         // megatron.gpus_per_node
  int64_t pipeline = 1;              // --pipeline-model-parallel-size
  int64_t virtual_stages = 1;        // model chunks per pipeline rank (--num-layers-per-virtual-pipeline-stage)
  int64_t microbatch_group = 0;      // --microbatch-group-size-per-virtual-pipeline-stage (0: = pipeline)
  bool overlap_p2p = true;           // interleaved: p2p overlapped (--no-overlap-p2p-communication: off)
  bool tp_pp_dp_mapping = false;     // --use-tp-pp-dp-mapping: rank order tp-cp-ep-pp-dp
  // Transformer layers of each virtual stage k = chunk x pipeline + rank
  // (uneven stages: Note [Megatron uneven stages], sim/config/megatron_args.cc).
  std::vector<int64_t> stage_layers;
  int64_t context = 1;               // --context-parallel-size
  // --cp-comm-type: "p2p" (TE AttnFuncWithCPAndKVP2P, the K/V ring) or "a2a"
  // (AttnFuncWithCPAndQKVOA2A, Note [Megatron CP all-to-all], models/gpt_layer.cc).
  std::string cp_comm = "p2p";
  int64_t data = 1;                  // world_size / (TP x PP x CP)
  int64_t global_batch = 0;          // --global-batch-size
  int64_t microbatches = 1;          // global / (micro x data)
  bool distributed_optimizer = false;   // --use-distributed-optimizer
  bool overlap_grad_reduce = false;     // --overlap-grad-reduce
  bool overlap_param_gather = false;    // --overlap-param-gather
  int64_t bucket_size = 0;              // --ddp-bucket-size (elements; 0: Megatron's default)
  DType grad_dtype = DType::kF32;       // main_grad buffers (--accumulate-allreduce-grads-in-fp32, bf16)
  bool gradient_accumulation_fusion = true;  // --no-gradient-accumulation-fusion
  // What each iteration computes and syncs on besides the step (Note
  // [Megatron iteration on the host], models/gpt_megatron_host.cc).
  bool log_params_norm = false;         // --log-params-norm
  bool log_num_zeros_in_grad = false;   // --log-num-zeros-in-grad
  bool check_for_nan = true;            // --no-check-for-nan-in-loss-and-grad: false
  bool swiglu = false;                  // --swiglu
  bool rms_norm = false;                // --normalization RMSNorm
  bool qk_layernorm = false;            // --qk-layernorm (Note [Megatron QK layernorm], models/gpt_layer.cc)
  bool bias_linear = true;              // --disable-bias-linear
  bool qkv_bias = true;                 // --add-qkv-bias (with --disable-bias-linear)
  std::string position = "learned_absolute";  // --position-embedding-type: learned_absolute | rope | none
  int64_t max_position = 0;             // --max-position-embeddings
  std::string attention = "flash";      // --attention-backend / --use-flash-attn: flash | fused | unfused
  double attention_dropout = 0.1;       // --attention-dropout
  double hidden_dropout = 0.1;          // --hidden-dropout
  std::string transformer_impl = "transformer_engine";  // --transformer-impl
  // fp8 training with Transformer Engine (Note [Megatron fp8], models/gpt_fp8.cc).
  std::string fp8_format;               // --fp8-format: e4m3 | hybrid; empty: no fp8
  std::string fp8_recipe = "delayed";   // --fp8-recipe: delayed | tensorwise (mxfp8, blockwise refused)
  int64_t fp8_amax_history_len = 1;     // --fp8-amax-history-len (Megatron's default 1)
  bool fp8_param_gather = false;        // --fp8-param-gather: fp8 params, fp8 param all-gather
  // --cross-entropy-loss-fusion (impl native): the loss's torch.compile'd
  // functions (Note [Megatron fused cross entropy], models/gpt_cross_entropy.cc).
  bool cross_entropy_fusion = false;
  // --cross-entropy-fusion-impl te with the fusion: Transformer Engine's
  // parallel_cross_entropy (Note [Transformer Engine cross entropy]).
  bool cross_entropy_te = false;
  // CUBLAS_WORKSPACE_CONFIG before the script (empty: PyTorch's default for
  // the device; Note [Megatron GEMM workspaces], models/gpt_workspace.cc).
  std::string cublas_workspace_config;
  std::string tokenizer;                // --tokenizer-type
  int64_t vocab_unpadded = 0;           // the tokenizer's vocabulary before padding
  // Pipeline rank this spec builds, set per rank by sim/step/megatron_step.h
  // (rank_selected); a step of a launch line without it is refused.
  int64_t stage = 0;
  bool rank_selected = false;
  // Every argument as written, in order, with how gpusim treats it:
  // "modelled", "no effect on memory or time", for the report.
  std::vector<std::pair<std::string, std::string>> args;
  std::vector<std::string> no_effect;   // argument names accepted as not affecting memory or time
};

// A run written as a `maxtext:` block (sim/config/maxtext.h): what the
// report adds beside gpusim's own figures. present is false otherwise.
struct MaxTextSpec {
  bool present = false;
  std::string model_name;  // maxtext.model_name
  std::string commit;      // the MaxText version its keys and formula follow
  // calculate_tflops_training_per_device (MaxText/maxtext_utils.py): TFLOP
  // per device per step, and its two parts.
  double tflops_per_device_step = 0;
  double learnable_weight_tflops = 0;
  double attention_tflops = 0;
  // calculate_tokens_training_per_device: max_target_length x
  // per_device_batch_size x gradient_accumulation_steps.
  double tokens_per_device_step = 0;
  // Keys written that do not affect the device step (accepted, listed).
  std::vector<std::string> no_effect;
  // num_experts and num_experts_per_tok (1: a dense MLP); the report's
  // routing figures (Note [MaxText MoE routing figures], sim/report/render.cc).
  int64_t experts = 1;
  int64_t experts_per_token = 1;
};

struct RunSpec {
  std::string source_file;
  std::string framework = "jax";   // framework: jax (XLA static) | pytorch (eager)
  DeviceSpec device;
  ModelSpec model;              // absent (name empty) when `program` is given
  ProgramSpec program;          // a program file instead of a model
  // program_hlo: an HLO module's text (jax.jit(f).lower(...).as_text(
  // dialect="hlo"); tools/collect/export_hlo.py) instead of a model; the
  // path as written, resolved against the run config's directory.
  std::string program_hlo;
  OptimizerSpec optimizer;
  LoopSpec loop;
  RematSpec remat;
  ParallelismSpec parallelism;
  BatchSpec batch;
  AllocatorSpec allocator;
  XlaSpec xla;
  MegatronSpec megatron;        // a Megatron-LM launch line instead of a model
  MaxTextSpec maxtext;
  // Where each setting was written, by key path ("parallelism.tensor",
  // "model.n_kv_heads", "allocator.expandable_segments"): "FILE:LINE:COL"
  // of the value, or "--set PATH=VALUE". Settings left at their defaults are
  // absent. Read by the capability check (sim/step/capabilities.h) to name
  // where a setting the chosen combination does not model was given.
  std::map<std::string, std::string> written;
  // The written model.* paths whose value a model file gave (a `model:`
  // NAME or `from:`, configs/models/NAME.yaml) rather than the run config
  // or --set: a model's defaults, which the capability check lets a
  // framework that has no such setting replace (Note [Framework
  // semantics], sim/lower/semantics.h).
  std::set<std::string> from_model_file;
};

}  // namespace gpusim

#endif  // GPUSIM_SIM_CONFIG_SPEC_H_
