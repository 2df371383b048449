#include "sim/lower/eager/device_memory.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/base/status.h"
#include "sim/lower/eager/device_memory_conv.h"
#include "sim/lower/eager/device_memory_sdpa.h"
#include "sim/lower/eager/device_memory_sort.h"

namespace gpusim {
namespace {

constexpr std::string_view kCublasSource =
    "aten/src/ATen/cuda/CublasHandlePool.cpp parseChosenWorkspaceSize, setWorkspaceForHandle";
constexpr std::string_view kEmbeddingSource =
    "aten/src/ATen/native/cuda/Embedding.cu embedding_dense_backward_cuda; EmbeddingBackwardKernel.cu";
constexpr std::string_view kCublasLtSource =
    "aten/src/ATen/cuda/CUDABlas.cpp gemm_and_bias, _getWorkspaceSize (CUBLASLT_WORKSPACE_SIZE)";
constexpr std::string_view kSortSource =
    "aten/src/ATen/native/cuda/Indexing.cu index_put_with_sort_kernel; cub dispatch_radix_sort.cuh";
constexpr std::string_view kCudnnSource =
    "aten/src/ATen/native/cudnn/Conv_v7.cpp AlgoIterator::try_all, allocate_workspace; Conv_v8.cpp";
constexpr std::string_view kCudnnFindSource =
    "aten/src/ATen/native/cudnn/Conv_v7.cpp findAlgorithms, getMaxWorkspaceSize (cudnn.benchmark)";
// Note [Fused attention workspaces], per backend.
std::string_view SdpaSource(SdpaBackend b) {
  switch (b) {
    case SdpaBackend::kCudnn:
      return "aten/src/ATen/native/cudnn/MHA.cpp run_cudnn_SDP_fprop/bprop; cudnn-frontend CompositeSDPABackwardNode";
    case SdpaBackend::kFlash:
      return "aten/src/ATen/native/transformers/cuda/flash_attn/flash_api.cpp mha_fwd, mha_bwd";
    default:
      return "aten/src/ATen/native/transformers/cuda/attention_backward.cu _efficient_attention_backward; "
             "mem_eff_attention/kernel_backward.h workspace_size";
  }
}
constexpr std::string_view kReduceSource =
    "aten/src/ATen/native/cuda/Reduce.cuh setReduceConfig, ReduceConfig::global_memory_size";

// Ops that run through a cuBLAS handle (aten/src/ATen/native/cuda/Blas.cpp;
// python/gpusim_torch/ops.py CUBLAS_OPS tags them).
const std::set<std::string, std::less<>>& CublasOps() {
  static const auto* ops = new std::set<std::string, std::less<>>{
      "mm", "addmm", "bmm", "baddbmm", "addbmm", "addmv", "mv", "dot", "addr", "_scaled_mm", "vdot"};
  return *ops;
}

// Reductions through gpu_reduce_kernel with recorded facts (ops.py REDUCE_OPS).
const std::set<std::string, std::less<>>& ReduceOps() {
  static const auto* ops = new std::set<std::string, std::less<>>{
      "sum", "mean", "prod", "amax", "amin", "nansum", "linalg_vector_norm", "norm", "any", "all"};
  return *ops;
}

// A warm-up history allocation (Note [Warm-up history]).
WarmupOp WarmupAlloc(BufferId id, Bytes size) {
  WarmupOp w;
  w.kind = WarmupOp::Kind::kAlloc;
  w.buffer = id;
  w.size = size;
  return w;
}

// Reduce.cuh last_pow2: the largest power of two <= n (at least 1).
int64_t LastPow2(int64_t n) {
  int64_t p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// EagerDeviceMemory::step_start_live and step_peak_live of `t`.
void StepRise(const Trace& t, EagerDeviceMemory* report) {
  std::map<BufferId, int64_t> sizes;
  int64_t live = 0, peak = 0;
  bool in_start = false;
  for (const TraceEvent& e : t.events) {
    if (e.type == EventType::kMarker && e.name == "start_state") in_start = true;
    if (e.type == EventType::kMarker && e.name == "step" && in_start && !report->has_step) {
      report->has_step = true;
      report->step_start_live = Bytes(live);
      peak = live;
    }
    if (e.type == EventType::kAlloc) {
      const int64_t size = (e.size.value() + 511) / 512 * 512;
      sizes[e.buffer] = size;
      live += size;
    } else if (e.type == EventType::kFree) {
      auto it = sizes.find(e.buffer);
      if (it != sizes.end()) {
        live -= it->second;
        sizes.erase(it);
      }
    }
    peak = std::max(peak, live);
  }
  if (report->has_step) report->step_peak_live = Bytes(peak);
}

// The inserted events are allocs and frees, never timed, so the k-th timed
// event of `out` is the k-th of `recorded`: `after=` indices move with them.
absl::Status RemapAfter(const Trace& recorded, Trace* out) {
  std::vector<int64_t> timed_at;  // k -> index in out
  for (size_t i = 0; i < out->events.size(); ++i) {
    if (IsTimed(out->events[i].type)) timed_at.push_back(static_cast<int64_t>(i));
  }
  std::vector<int64_t> new_index(recorded.events.size(), -1);
  size_t k = 0;
  for (size_t i = 0; i < recorded.events.size(); ++i) {
    if (!IsTimed(recorded.events[i].type)) continue;
    if (k >= timed_at.size()) return absl::InternalError("device memory: timed events lost");
    new_index[i] = timed_at[k++];
  }
  for (TraceEvent& e : out->events) {
    for (int64_t& a : e.after) {
      if (a < 0 || static_cast<size_t>(a) >= new_index.size() || new_index[static_cast<size_t>(a)] < 0) {
        return absl::InternalError("device memory: after= names an event that is not timed");
      }
      a = new_index[static_cast<size_t>(a)];
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ReduceStaging> ReduceConfigFor(const std::vector<int64_t>& dims, const DeviceSpec& device) {
  if (dims.size() != 9) {
    return absl::InvalidArgumentError(absl::StrCat("expected 9 reduction facts, got ", dims.size()));
  }
  const int64_t num_outputs = dims[0], num_inputs = dims[1];
  bool fastest = dims[2] != 0;
  const int64_t n_red = dims[3], ndim = dims[4];
  bool unit = dims[5] != 0;
  const int64_t out_vec = dims[6], arg_size = dims[7];
  constexpr int64_t kMaxElements = int64_t{1} << 40;  // beyond any device; keeps the products in int64
  if (num_outputs < 1 || num_inputs < 1 || num_outputs > kMaxElements || num_inputs > kMaxElements ||
      n_red > ndim || (out_vec != 1 && out_vec != 2 && out_vec != 4) || arg_size < 1 || arg_size > 64) {
    return absl::InvalidArgumentError(absl::StrCat("reduction facts out of range: ", absl::StrJoin(dims, ",")));
  }
  int64_t dim0 = 1, dim1 = 1;
  if (ndim > 0) {
    dim0 = fastest ? num_inputs : num_outputs;
    dim1 = fastest ? num_outputs : num_inputs;
  } else {
    fastest = unit = true;
  }
  int64_t output_vec_size = 1;
  constexpr int64_t kInputVecSize = 4, kVt0 = 4;
  if (unit) {
    if (fastest && dim0 > 128 && n_red == 1 && kVt0 >= kInputVecSize) {
      dim0 /= kInputVecSize;  // vectorize along input
    } else if (!fastest) {
      output_vec_size = out_vec;  // vectorize along output
      dim0 /= output_vec_size;
    }
  }
  // set_block_dimension (MAX_NUM_THREADS 512; 256 only for complex double).
  const int64_t max_threads = 512 / output_vec_size;
  const int64_t dim0_pow2 = dim0 < max_threads ? LastPow2(dim0) : max_threads;
  const int64_t dim1_pow2 = dim1 < max_threads ? LastPow2(dim1) : max_threads;
  int64_t block_width = std::min<int64_t>(dim0_pow2, 32);  // warp size
  const int64_t block_height = std::min(dim1_pow2, max_threads / block_width);
  block_width = std::min(dim0_pow2, max_threads / block_height);
  const int64_t num_threads = block_width * block_height;
  int64_t step_input = 1, step_output = 1;
  bool block_x_reduce = false, block_y_reduce = false;
  if (ndim == 0 || fastest) {
    block_x_reduce = true;
    step_input *= block_width;
  } else {
    step_output *= block_width;
  }
  auto values_per_thread = [&] { return DivUp(num_inputs, step_input); };
  if (values_per_thread() >= block_height * 16 || values_per_thread() >= 256) {
    block_y_reduce = true;
    step_input *= block_height;
  } else {
    step_output *= block_height;
  }
  const int64_t blocks_per_sm = device.max_threads_per_sm / num_threads;
  const int64_t target_grid = static_cast<int64_t>(device.sms) * blocks_per_sm;
  const int64_t grid_x = DivUp(num_outputs / output_vec_size, step_output);
  ReduceStaging r;
  if (block_y_reduce && values_per_thread() >= 256 && grid_x <= target_grid) {
    const int64_t c1 = DivUp(target_grid, grid_x);
    const int64_t c2 = DivUp(values_per_thread(), 16);
    const int64_t c3 = DivUp(values_per_thread(), 256);
    r.ctas_per_output = std::max(std::min(c1, c2), c3);
    r.global = r.ctas_per_output > 1;
  }
  if (!r.global) return r;
  int64_t size = arg_size * num_outputs * r.ctas_per_output;
  if (!block_x_reduce) size *= block_width * output_vec_size;
  r.buffer = Bytes(size);
  r.semaphores = Bytes(4 * grid_x);  // sizeof(int) * grid().x
  return r;
}

namespace {

using ThreadStream = std::pair<std::string, StreamId>;  // (thread, stream)

// The host thread an op's cuBLAS handle belongs to: backward runs on
// autograd's device thread.
std::string ThreadOf(const TraceEvent& e) { return e.phase == Phase::kBackward ? "autograd" : "main"; }

std::string WorkspaceName(const ThreadStream& p) {
  return absl::StrCat("cublas_workspace (", p.first, " thread, stream ", p.second, ")");
}

std::string LtWorkspaceName(const ThreadStream& p) {
  return absl::StrCat("cublaslt_workspace (", p.first, " thread, stream ", p.second, ")");
}

// A failure of event `i`'s facts, naming the event.
absl::Status AtEvent(size_t i, const TraceEvent& e, const absl::Status& st) {
  return absl::InvalidArgumentError(absl::StrCat("event ", i, " (compute ", e.name, ", op=", e.op, "): dims=",
                                                 absl::StrJoin(e.dims, ","), ": ", st.message()));
}

// One AddEagerDeviceMemory pass over a PyTorch recording: the recording's
// settings, read once (ReadSettings), the kept workspaces a warm-up step made
// (PlaceWarmupHistory), then each event copied with the device's allocations
// around it (one Lower* per op family), and the report's summary lines.
class EagerDevicePass {
 public:
  EagerDevicePass(const Trace& recorded, const DeviceSpec& device, EagerDeviceMemory* report,
                  const EagerDeviceOptions& options)
      : recorded_(recorded), device_(device), report_(report), options_(options) {}

  absl::StatusOr<Trace> Run() {
    RETURN_IF_ERROR(ReadSettings());
    RETURN_IF_ERROR(ReadCublas());
    RETURN_IF_ERROR(PlaceWarmupHistory());
    out_ = recorded_;
    if (warmup_changed_) out_.warmup = std::move(warmup_out_);
    out_.events.clear();
    out_.events.reserve(recorded_.events.size() + 8);
    for (size_t i = 0; i < recorded_.events.size(); ++i) {
      RETURN_IF_ERROR(LowerEvent(i));
    }
    RETURN_IF_ERROR(Summarize());
    ASSIGN_OR_RETURN(report_->nccl, NcclDeviceMemory(recorded_, device_));
    if (report_->nccl.distributed) report_->assumptions.push_back(report_->nccl.assumption);
    RETURN_IF_ERROR(RemapAfter(recorded_, &out_));
    StepRise(out_, report_);
    return std::move(out_);
  }

 private:
  // The options and the recording's meta lines.
  absl::Status ReadSettings();
  // The (thread, stream) pairs that need cuBLAS and kept cuBLASLt workspaces.
  absl::Status ReadCublas();
  absl::Status PlaceWarmupHistory();
  absl::Status PlaceKeptInHistory(const WarmupOp& w);
  absl::Status LowerHistoryOp(size_t i, const WarmupOp& w);
  absl::Status LowerEvent(size_t i);
  // The device's allocations around compute event `e` (index `i`, for
  // errors), into the trace, or into the history while history_ is set.
  absl::Status LowerOp(size_t i, const TraceEvent& e);
  void AddKeptAtStepStart();
  absl::Status LowerCublas(const TraceEvent& e);
  absl::Status LowerReduce(size_t i, const TraceEvent& e);
  absl::Status LowerIndexSort(size_t i, const TraceEvent& e, bool index_put);
  absl::Status LowerSdpa(size_t i, const TraceEvent& e, const SdpaOp& sdpa);
  absl::Status LowerConv(size_t i, const TraceEvent& e);
  absl::Status Summarize();

  // Whether an addmm with these facts takes the cublasLt path (FORMAT.md Op
  // facts: the bias flag for CUDA >= 12.1, else the pre-12.1 flag). The
  // build's CUDA version is read once, when an addmm first asks.
  absl::StatusOr<bool> LtPath(const std::vector<int64_t>& dims) {
    if (!cuda_of_build_.has_value()) {
      ASSIGN_OR_RETURN(cuda_of_build_, CudaOfBuild(*version_, torch_cuda_ ? *torch_cuda_ : ""));
    }
    return *cuda_of_build_ >= std::make_pair(12, 1) ? dims[0] != 0 : dims[1] != 0;
  }
  void Note(const std::string& what, std::string_view source, Bytes size, bool kept) {
    if (history_ != nullptr) return;
    DeviceAddition& a = tally_.added[what];
    a.what = what;
    a.source = std::string(source);
    a.kept = kept;
    ++a.count;
    a.largest = std::max(a.largest, size);
  }
  BufferId Alloc(Bytes size, std::string name, Phase phase, const std::vector<int32_t>& stack, StreamId stream) {
    TraceEvent a;
    a.type = EventType::kAlloc;
    a.buffer = given_id_.has_value() ? *given_id_ : next_id_++;
    given_id_.reset();
    if (history_ != nullptr) {
      history_->push_back(WarmupAlloc(a.buffer, size));
      return a.buffer;
    }
    a.size = size;
    a.role = Role::kWorkspace;
    a.name = std::move(name);
    a.phase = phase;
    a.stack = stack;
    a.stream = stream;
    out_.events.push_back(a);
    return a.buffer;
  }
  void FreeBuffer(BufferId id, Phase phase, StreamId stream) {
    if (history_ != nullptr) {
      WarmupOp w;
      w.kind = WarmupOp::Kind::kFree;
      w.buffer = id;
      history_->push_back(w);
      return;
    }
    TraceEvent f;
    f.type = EventType::kFree;
    f.buffer = id;
    f.phase = phase;
    f.stream = stream;
    out_.events.push_back(f);
  }
  // The op's own event, into the trace being written (none for a history op:
  // its `warmup compute` line is copied as it is).
  void Emit(TraceEvent e) {
    if (history_ == nullptr) out_.events.push_back(std::move(e));
  }

  const Trace& recorded_;
  const DeviceSpec& device_;
  EagerDeviceMemory* report_;
  const EagerDeviceOptions& options_;

  // Settings (ReadSettings).
  std::optional<SdpaBackend> sdpa_forced_;
  CudnnAssumption cudnn_assumed_ = CudnnAssumption::kNone;
  bool cudnn_benchmark_ = false;
  const std::string* version_ = nullptr;
  const std::string* config_ = nullptr;
  const std::string* torch_cuda_ = nullptr;
  bool deterministic_ = false;
  bool warm_ = false;
  std::optional<CubBuild> cub_;  // read when an op needs it
  BufferId next_id_ = 0;
  int64_t step_marker_ = -1;  // where the start state ends (the `step` marker after `start_state`)

  // cuBLAS and cuBLASLt (ReadCublas).
  std::vector<ThreadStream> pairs_;  // first use order
  bool lt_per_call_ = false;
  bool lt_kept_ = false;
  std::set<ThreadStream> have_lt_;
  Bytes lt_bytes_;
  Bytes cublas_;
  std::optional<std::pair<int, int>> cuda_of_build_;
  // The (thread, stream) pairs whose addmm takes the cublasLt path, for the
  // kept workspaces a warm-up step made (as the cuBLAS pairs above).
  std::vector<ThreadStream> lt_pairs_;

  // The warm-up history (PlaceWarmupHistory).
  std::map<ThreadStream, BufferId> history_ws_, history_lt_;
  std::vector<WarmupOp> warmup_out_;
  bool warmup_changed_ = false;

  // The trace being written and what was added to it.
  Trace out_;
  // While the history's ops are lowered (PlaceWarmupHistory): where the
  // allocations and frees go instead of out_.events.
  std::vector<WarmupOp>* history_ = nullptr;
  // What the window's ops needed, for the report (Summarize); the history's
  // ops are tallied apart and dropped.
  struct Tally {
    std::map<std::string, DeviceAddition> added;  // by `what`
    int64_t conv_directions = 0, conv_unsized = 0;
    int64_t conv_layout_unrecorded = 0;  // convolutions recorded before format 1.7
    int64_t convs = 0, embeddings = 0, index_sorts = 0, sdpa_calls = 0;
    std::map<std::tuple<std::string, std::string, std::string>, int64_t> sdpa_classes;  // (op, backend, why)
    std::set<std::string> index_why, embedding_why;
  };
  Tally tally_;
  std::optional<BufferId> given_id_;  // the id the next alloc takes, when the history placed it
  std::set<ThreadStream> have_;
  std::set<std::vector<int64_t>> benchmarked_;  // Conv_v7.cpp BenchmarkCache keys
};

absl::Status EagerDevicePass::ReadSettings() {
  if (!options_.sdpa_backend.empty()) {
    ASSIGN_OR_RETURN(sdpa_forced_, ParseSdpaBackend(options_.sdpa_backend));
  }
  ASSIGN_OR_RETURN(cudnn_assumed_,
                   ParseCudnnAssumption(options_.cudnn_workspace.empty() ? "none" : options_.cudnn_workspace));
  const std::string* bench_meta = FindMeta(recorded_, "cudnn_benchmark");
  const std::string* cudnn_det_meta = FindMeta(recorded_, "cudnn_deterministic");
  cudnn_benchmark_ = bench_meta != nullptr && *bench_meta == "1";
  const bool cudnn_default_only = cudnn_det_meta != nullptr && *cudnn_det_meta == "1" && !cudnn_benchmark_;
  if (cudnn_default_only && cudnn_assumed_ != CudnnAssumption::kNone) {
    // AlgoIterator::try_all: deterministic && !benchmark runs only
    // DEFAULT_ALGO (onlyDefaultAlgorithm), which gpusim does not size.
    return absl::InvalidArgumentError(absl::StrCat(
        "--cudnn-workspace ", CudnnAssumptionName(cudnn_assumed_),
        ": the step was recorded with cudnn.deterministic and without cudnn.benchmark, so PyTorch runs only "
        "cuDNN's default algorithms (Conv_v7.cpp onlyDefaultAlgorithm: implicit precomputed GEMM forward, "
        "ALGO_1 backward), whose workspace gpusim does not size; use none"));
  }
  report_->applied = true;
  if (!recorded_.repeats.empty()) {
    // Inserting events would move the repeats' event ranges; a recording read
    // from a file never has them (sim/trace/trace.h Trace::repeats).
    return absl::InvalidArgumentError("a PyTorch recording with loop repeats: the device model inserts events");
  }
  version_ = FindMeta(recorded_, "torch_version");
  if (version_ == nullptr) {
    return absl::InvalidArgumentError("a PyTorch recording (meta framework pytorch) without meta torch_version");
  }
  report_->torch_version = *version_;
  config_ = FindMeta(recorded_, "CUBLAS_WORKSPACE_CONFIG");
  const std::string* warmup = FindMeta(recorded_, "warmup_steps");
  const std::string* det_meta = FindMeta(recorded_, "deterministic_algorithms");
  deterministic_ = det_meta != nullptr && *det_meta == "1";
  torch_cuda_ = FindMeta(recorded_, "torch_cuda");
  warm_ = warmup != nullptr && *warmup != "0";

  for (const TraceEvent& e : recorded_.events) next_id_ = std::max(next_id_, e.buffer + 1);
  for (const WarmupOp& w : recorded_.warmup) next_id_ = std::max(next_id_, w.buffer + 1);
  bool in_start = false;
  for (size_t i = 0; i < recorded_.events.size(); ++i) {
    const TraceEvent& e = recorded_.events[i];
    if (e.type != EventType::kMarker) continue;
    if (e.name == "start_state") in_start = true;
    if (e.name == "step" && in_start) {
      step_marker_ = static_cast<int64_t>(i);
      break;
    }
  }
  return absl::OkStatus();
}

absl::Status EagerDevicePass::ReadCublas() {
  for (const TraceEvent& e : recorded_.events) {
    if (e.type != EventType::kCompute || !CublasOps().contains(e.op)) continue;
    ThreadStream key{ThreadOf(e), e.stream};
    if (std::find(pairs_.begin(), pairs_.end(), key) == pairs_.end()) pairs_.push_back(key);
  }
  // Note [cuBLASLt workspace]: addmm with a bias runs gemm_and_bias
  // (aten/src/ATen/cuda/CUDABlas.cpp) through cublasLt. Up to torch 2.6 it
  // allocates CUBLASLT_WORKSPACE_SIZE KiB (default 1024, _getWorkspaceSize /
  // parseCUDABlasLtWorkspaceSize; "see #73328") from the caching allocator
  // per call and frees it on return. From torch 2.7 getCUDABlasLtWorkspace
  // (CublasHandlePool.cpp) keeps one block of getCUDABlasLtWorkspaceSize()
  // per (handle, stream) in cublaslt_handle_stream_to_workspace, never
  // freed, unless TORCH_CUBLASLT_UNIFIED_WORKSPACE turns on
  // unified_cublas_and_lt_workspaces (the stream's cuBLAS workspace, nothing
  // added). Measured: on an H200 with torch 2.11+cu130, every zoo step whose
  // forward runs addmm with a bias (GPT-2, Qwen2, BERT, both ViTs) held one
  // 1,048,576 B block more at the step's start than its recording, and the
  // steps without one (Llama, Mistral: mm only) held none
  // (validation/h200_2026-12-04/zoo.json allocated_before;
  // tools/collect/check_zoo.py), so the switch is off by default there. The
  // 2.7 boundary is an assumption (not read from a tag).
  const std::optional<std::pair<int, int>> tv = MajorMinor(*version_);
  lt_per_call_ = tv.has_value() && *tv < std::make_pair(2, 7);
  const std::string* unified_env = FindMeta(recorded_, "TORCH_CUBLASLT_UNIFIED_WORKSPACE");
  const bool unified = unified_env != nullptr &&
                       (*unified_env == "1" || *unified_env == "true" || *unified_env == "TRUE" ||
                        *unified_env == "True" || *unified_env == "ON" || *unified_env == "on");
  lt_kept_ = !lt_per_call_ && !unified;
  lt_bytes_ = Bytes(int64_t{1024} * 1024);
  if (const std::string* lt_env = FindMeta(recorded_, "CUBLASLT_WORKSPACE_SIZE")) {
    int64_t kib = 0;
    auto [p, ec] = std::from_chars(lt_env->data(), lt_env->data() + lt_env->size(), kib);
    // std::stoi: a leading integer; otherwise PyTorch warns and keeps 1024.
    if (ec == std::errc() && p != lt_env->data() && kib >= 0 && kib <= (int64_t{1} << 30)) {
      lt_bytes_ = Bytes(kib * 1024);
    }
  }
  if (!pairs_.empty()) {
    ASSIGN_OR_RETURN(cublas_, CublasWorkspaceBytes(*version_, device_, config_ ? *config_ : ""));
  }
  if (lt_kept_ && warm_) {
    for (const TraceEvent& e : recorded_.events) {
      if (e.type != EventType::kCompute || e.op != "addmm" || e.dims.size() != 2) continue;
      ASSIGN_OR_RETURN(const bool lt, LtPath(e.dims));
      ThreadStream key{ThreadOf(e), e.stream};
      if (lt && std::find(lt_pairs_.begin(), lt_pairs_.end(), key) == lt_pairs_.end()) lt_pairs_.push_back(key);
    }
  }
  return absl::OkStatus();
}

// Note [Warm-up history] (sim/replay/replay.cc): a recording that carries
// its warm-up marks each cuBLAS op there (`warmup compute`, with every other
// op that has device facts: Note [Transient workspaces in the warm-up
// history], below); the kept
// workspaces of a (thread, stream) are made at its first one
// (CublasHandlePool.cpp getCurrentCUDABlasHandle / getCUDABlasLtWorkspace
// allocate on first use), so they are placed in the history there, under
// the ids the start state allocates them with. Measured: the H200 zoo's
// checkpointed Llama and Mistral steps reserved exactly the two 32 MiB
// cuBLAS workspaces more than a replay that made them at the window's
// start (validation/h200_2026-12-04/zoo.json, tools/collect/check_zoo.py).
absl::Status EagerDevicePass::PlaceWarmupHistory() {
  if (!warm_) return absl::OkStatus();
  for (size_t i = 0; i < recorded_.warmup.size(); ++i) {
    const WarmupOp& w = recorded_.warmup[i];
    warmup_out_.push_back(w);
    if (w.kind != WarmupOp::Kind::kCompute) continue;
    RETURN_IF_ERROR(PlaceKeptInHistory(w));
    RETURN_IF_ERROR(LowerHistoryOp(i, w));
  }
  return absl::OkStatus();
}

// Note [Transient workspaces in the warm-up history]
// The warm-up steps ran the same kernels as the window, so the libraries'
// transient allocations (reduction staging, the fused attention kernels'
// workspaces, sort temporaries, cuDNN convolution workspaces under the
// assumption, per-call cublasLt workspaces) went through the caching
// allocator there too: an op's transient of 130 MiB mapped a segment in the
// first step, and what it left cached decided where later blocks went
// (CUDACachingAllocator.cpp malloc: get_free_block best fit over the cached
// blocks, else alloc_block maps a new segment). Measured: the checkpointed
// ViT-B/16 of the H200 zoo, whose backward's bias-gradient sums each stage
// ~133 MiB (Reduce.cuh global reduce), held 53 segments at its step's end;
// replayed without the history's transients, 75 (its 2-9 MiB gradients and
// Adam states mapping 20 MiB segments of their own), with them 57 (they
// split the cached staging segments instead; docs/validation_torch_zoo.md).
// python/gpusim_torch writes every op with device facts into the history
// (`warmup compute OP dims=...`, Note [The warm-up history]); each is
// lowered here as in the window, into `warmup alloc`/`warmup free` pairs
// around the op (older recordings name cuBLAS ops only). What the window's
// report lists is the window's only. cudnn.benchmark's timing workspace is
// allocated at each parameter set's first call, so in the history when
// there is one.
absl::Status EagerDevicePass::LowerHistoryOp(size_t i, const WarmupOp& w) {
  TraceEvent e;
  e.type = EventType::kCompute;
  e.name = "warm-up history";
  e.op = w.op;
  e.dims = w.dims;
  e.phase = w.phase;
  const size_t before = warmup_out_.size();
  history_ = &warmup_out_;
  const absl::Status st = LowerOp(i, e);
  history_ = nullptr;
  if (!st.ok()) return absl::InvalidArgumentError(absl::StrCat("warm-up history, ", st.message()));
  if (warmup_out_.size() != before) warmup_changed_ = true;
  return absl::OkStatus();
}

// The kept cuBLAS(Lt) workspaces, at the first cuBLAS op of each (thread,
// stream) pair the window uses.
absl::Status EagerDevicePass::PlaceKeptInHistory(const WarmupOp& w) {
  if (!CublasOps().contains(w.op)) return absl::OkStatus();
  const ThreadStream key{w.phase == Phase::kBackward ? "autograd" : "main", 0};
  if (std::find(pairs_.begin(), pairs_.end(), key) != pairs_.end() && !history_ws_.contains(key)) {
    history_ws_[key] = next_id_;
    warmup_out_.push_back(WarmupAlloc(next_id_++, cublas_));
    warmup_changed_ = true;
  }
  if (w.op == "addmm" && w.dims.size() == 2 &&
      std::find(lt_pairs_.begin(), lt_pairs_.end(), key) != lt_pairs_.end() && !history_lt_.contains(key)) {
    ASSIGN_OR_RETURN(const bool lt, LtPath(w.dims));
    if (lt) {
      history_lt_[key] = next_id_;
      warmup_out_.push_back(WarmupAlloc(next_id_++, lt_bytes_));
      warmup_changed_ = true;
    }
  }
  return absl::OkStatus();
}

// At the step's start of a warm recording: the kept workspaces the warm-up
// step made.
void EagerDevicePass::AddKeptAtStepStart() {
  for (const auto& p : pairs_) {
    if (auto h = history_ws_.find(p); h != history_ws_.end()) given_id_ = h->second;
    Alloc(cublas_, WorkspaceName(p), Phase::kOther, {}, p.second);
    Note("cuBLAS workspace", kCublasSource, cublas_, true);
    have_.insert(p);
  }
  // The kept cublasLt workspaces were made by the warm-up step too.
  for (const auto& p : lt_pairs_) {
    if (auto h = history_lt_.find(p); h != history_lt_.end()) given_id_ = h->second;
    Alloc(lt_bytes_, LtWorkspaceName(p), Phase::kOther, {}, p.second);
    Note("cuBLASLt workspace", kCublasLtSource, lt_bytes_, true);
    have_lt_.insert(p);
  }
}

absl::Status EagerDevicePass::LowerEvent(size_t i) {
  const TraceEvent& e = recorded_.events[i];
  if (warm_ && static_cast<int64_t>(i) == step_marker_) AddKeptAtStepStart();
  if (e.type != EventType::kCompute || e.op.empty()) {
    out_.events.push_back(e);
    return absl::OkStatus();
  }
  return LowerOp(i, e);
}

absl::Status EagerDevicePass::LowerOp(size_t i, const TraceEvent& e) {
  if (CublasOps().contains(e.op)) return LowerCublas(e);
  if (ReduceOps().contains(e.op)) return LowerReduce(i, e);
  const bool index_put = e.op.rfind("index_put", 0) == 0 || e.op.rfind("_index_put_impl", 0) == 0;
  if (index_put || e.op == "embedding_dense_backward") return LowerIndexSort(i, e, index_put);
  if (const std::optional<SdpaOp> sdpa = SdpaOpOf(e.op)) return LowerSdpa(i, e, *sdpa);
  if (e.op == "convolution" || e.op == "_convolution" || e.op == "convolution_backward") return LowerConv(i, e);
  if (e.kind == OpKind::kElementwise && !e.dims.empty() &&
      (e.dims.size() != 1 || e.dims[0] < 0 || e.dims[0] > 3)) {
    // Note [ATen elementwise loops] (sim/device/impl/tiled.h): one fact.
    return AtEvent(i, e, absl::InvalidArgumentError(
                             "an elementwise op's facts are its TensorIterator loop, one of 0 (vectorised), "
                             "1 (unrolled with casts), 2 (legacy strided) or 3 (legacy with casts)"));
  }
  Emit(e);
  return absl::OkStatus();
}

absl::Status EagerDevicePass::LowerCublas(const TraceEvent& e) {
  // The kept workspaces of a history op: PlaceKeptInHistory.
  const bool window = history_ == nullptr;
  ThreadStream key{ThreadOf(e), e.stream};
  if (window && have_.insert(key).second) {
    Alloc(cublas_, WorkspaceName(key), e.phase, e.stack, e.stream);
    Note("cuBLAS workspace", kCublasSource, cublas_, true);
  }
  if (e.op == "addmm" && e.dims.size() == 2) {
    ASSIGN_OR_RETURN(const bool lt, LtPath(e.dims));
    if (window && lt && lt_kept_) {
      if (have_lt_.insert(key).second) {
        Alloc(lt_bytes_, LtWorkspaceName(key), e.phase, e.stack, e.stream);
        Note("cuBLASLt workspace", kCublasLtSource, lt_bytes_, true);
      }
    }
    if (lt && *cuda_of_build_ >= std::make_pair(11, 4) && lt_per_call_) {
      const BufferId w = Alloc(lt_bytes_, absl::StrCat(e.name, " cublasLt workspace"), e.phase, e.stack, e.stream);
      Note("cuBLASLt workspace (per call)", kCublasLtSource, lt_bytes_, false);
      TraceEvent c = e;
      if (!c.uses.empty()) c.uses.push_back(w);
      Emit(std::move(c));
      FreeBuffer(w, e.phase, e.stream);
      return absl::OkStatus();
    }
  }
  Emit(e);
  return absl::OkStatus();
}

absl::Status EagerDevicePass::LowerReduce(size_t i, const TraceEvent& e) {
  absl::StatusOr<ReduceStaging> cfg = ReduceConfigFor(e.dims, device_);
  if (!cfg.ok()) return AtEvent(i, e, cfg.status());
  if (!cfg->global) {
    Emit(e);
    return absl::OkStatus();
  }
  const BufferId buf = Alloc(cfg->buffer, absl::StrCat(e.name, " reduction staging"), e.phase, e.stack, e.stream);
  const BufferId sem =
      Alloc(cfg->semaphores, absl::StrCat(e.name, " reduction semaphores"), e.phase, e.stack, e.stream);
  Note("reduction staging buffer", kReduceSource, cfg->buffer, false);
  Note("reduction semaphores", kReduceSource, cfg->semaphores, false);
  TraceEvent c = e;
  if (!c.uses.empty()) {
    c.uses.push_back(buf);
    c.uses.push_back(sem);
  }
  Emit(std::move(c));
  FreeBuffer(sem, e.phase, e.stream);  // DataPtrs die in reverse order
  FreeBuffer(buf, e.phase, e.stream);
  return absl::OkStatus();
}

// index_put(accumulate) and embedding_dense_backward: their sort temporaries.
absl::Status EagerDevicePass::LowerIndexSort(size_t i, const TraceEvent& e, bool index_put) {
  if (!cub_.has_value()) {
    ASSIGN_OR_RETURN(cub_, CubBuildFor(*version_, torch_cuda_ ? *torch_cuda_ : ""));
  }
  absl::StatusOr<OpTemporaries> tmp = index_put
                                          ? IndexPutTemporaries(e.dims, deterministic_, *version_, *cub_, device_)
                                          : EmbeddingBackwardTemporaries(e.dims, *cub_, device_);
  if (!tmp.ok()) return AtEvent(i, e, tmp.status());
  if (!tmp->not_modelled.empty()) {
    ++(index_put ? tally_.index_sorts : tally_.embeddings);
    (index_put ? tally_.index_why : tally_.embedding_why).insert(tmp->not_modelled);
  }
  const std::string_view source = index_put ? kSortSource : kEmbeddingSource;
  const std::string buffers = index_put ? "index_put index buffers" : "embedding backward buffers";
  std::map<int, BufferId> ids;
  auto apply = [&](const std::vector<TempStep>& steps) {
    for (const TempStep& s : steps) {
      if (s.alloc) {
        ids[s.slot] = Alloc(s.size, absl::StrCat(e.name, " ", s.what), e.phase, e.stack, e.stream);
        Note(s.what == "CUB radix sort storage" ? "CUB radix-sort storage" : buffers, source, s.size, false);
      } else {
        FreeBuffer(ids.at(s.slot), e.phase, e.stream);
      }
    }
  };
  apply(tmp->before);
  TraceEvent c = e;
  if (!c.uses.empty()) {
    for (const TempStep& s : tmp->before) {
      if (s.alloc) c.uses.push_back(ids[s.slot]);
    }
    // Buffers freed before the kernel (CUB storage, range checks) are
    // not the kernel's; keep only those still live at it.
    std::set<BufferId> freed;
    for (const TempStep& s : tmp->before) {
      if (!s.alloc) freed.insert(ids[s.slot]);
    }
    std::erase_if(c.uses, [&](BufferId id) { return freed.contains(id); });
  }
  Emit(std::move(c));
  apply(tmp->after);
  return absl::OkStatus();
}

absl::Status EagerDevicePass::LowerSdpa(size_t i, const TraceEvent& e, const SdpaOp& sdpa) {
  ++tally_.sdpa_calls;
  absl::StatusOr<SdpaFacts> facts = ParseSdpaFacts(e.dims);
  if (!facts.ok()) return AtEvent(i, e, facts.status());
  absl::StatusOr<SdpaChoice> choice = ChooseSdpaBackend(sdpa, e.op, *facts, device_, sdpa_forced_);
  if (!choice.ok()) return AtEvent(i, e, choice.status());
  ++tally_.sdpa_classes[{e.op, SdpaBackendName(choice->backend), choice->why}];
  const OpTemporaries tmp = SdpaWorkspaces(*facts, sdpa.backward, choice->backend, device_, deterministic_);
  std::map<int, BufferId> ids;
  std::set<BufferId> freed;
  auto apply = [&](const std::vector<TempStep>& steps, bool before) {
    for (const TempStep& s : steps) {
      if (s.alloc) {
        ids[s.slot] = Alloc(s.size, absl::StrCat(e.name, " ", s.what), e.phase, e.stack, e.stream);
        Note(s.what, SdpaSource(choice->backend), s.size, false);
      } else {
        FreeBuffer(ids.at(s.slot), e.phase, e.stream);
        if (before) freed.insert(ids.at(s.slot));
      }
    }
  };
  apply(tmp.before, true);
  TraceEvent c = e;
  // Re-targeted or forced: the event names the backend that runs, whose
  // kernels the device's kernel model times (sim/device/impl/attention.h,
  // Note [Fused attention time]).
  if (choice->backend != sdpa.backend) {
    c.op = absl::StrCat("_scaled_dot_product_", SdpaBackendName(choice->backend), "_attention",
                        sdpa.backward ? "_backward" : "");
  }
  if (!c.uses.empty()) {
    for (const auto& [slot, id] : ids) {
      if (!freed.contains(id)) c.uses.push_back(id);
    }
  }
  Emit(std::move(c));
  apply(tmp.after, false);
  return absl::OkStatus();
}

absl::Status EagerDevicePass::LowerConv(size_t i, const TraceEvent& e) {
  const bool conv_backward = e.op == "convolution_backward";
  ++tally_.convs;
  if (e.dims.empty()) {
    // Not a 2-D convolution (no facts): one direction counted unsized.
    ++tally_.conv_directions;
    ++tally_.conv_unsized;
    Emit(e);
    return absl::OkStatus();
  }
  absl::StatusOr<ConvGeometry> g = ParseConvFacts(e.dims, conv_backward);
  if (!g.ok()) return AtEvent(i, e, g.status());
  tally_.conv_layout_unrecorded += g->layout == ConvLayout::kUnrecorded ? 1 : 0;
  if (cudnn_assumed_ == CudnnAssumption::kNone) {
    Emit(e);
    return absl::OkStatus();
  }
  std::vector<ConvDirection> dirs;
  if (!conv_backward) dirs.push_back(ConvDirection::kForward);
  if (conv_backward && g->grad_input) dirs.push_back(ConvDirection::kBackwardData);
  if (conv_backward && g->grad_weight) dirs.push_back(ConvDirection::kBackwardFilter);
  // Each direction in the order cudnn_convolution_backward runs them:
  // its workspace allocated, the kernel, the workspace freed.
  bool first = true;
  for (ConvDirection d : dirs) {
    ++tally_.conv_directions;
    const ConvWorkspace ws = AssumedWorkspace(cudnn_assumed_, d, *g);
    tally_.conv_unsized += ws.sized ? 0 : 1;
    const std::string where = absl::StrCat(e.name, " cuDNN ", ConvDirectionName(d));
    // cudnn.benchmark without a warm-up step: the first call of each
    // parameter set times the candidates in a scratch workspace
    // (findAlgorithms, getMaxWorkspaceSize), allocated and freed before
    // the chosen algorithm's; later calls hit the BenchmarkCache.
    std::vector<int64_t> key(e.dims.begin(), e.dims.begin() + 17);
    key.push_back(static_cast<int64_t>(d));
    if (cudnn_benchmark_ && (!warm_ || history_ != nullptr) && benchmarked_.insert(key).second) {
      const int64_t find = AssumedWorkspace(CudnnAssumption::kBound, d, *g).bytes;
      if (find > 0) {
        const BufferId f =
            Alloc(Bytes(find), absl::StrCat(where, " benchmark workspace"), e.phase, e.stack, e.stream);
        FreeBuffer(f, e.phase, e.stream);
        Note("cuDNN benchmark workspace (find)", kCudnnFindSource, Bytes(find), false);
      }
    }
    BufferId w = -1;
    if (ws.bytes > 0) {
      w = Alloc(Bytes(ws.bytes), absl::StrCat(where, " workspace (", ws.algorithm, ")"), e.phase, e.stack,
                e.stream);
      Note(absl::StrCat("cuDNN workspace (assumed ", CudnnAssumptionName(cudnn_assumed_), ")"), kCudnnSource,
           Bytes(ws.bytes), false);
    }
    if (first) {
      TraceEvent c = e;
      if (!c.uses.empty() && w >= 0) c.uses.push_back(w);
      Emit(std::move(c));
      first = false;
    }
    if (w >= 0) FreeBuffer(w, e.phase, e.stream);
  }
  if (first) Emit(e);
  return absl::OkStatus();
}

// The report's additions, SDPA classes, assumptions and what is not modelled;
// an option given for ops the step does not have is refused by name.
absl::Status EagerDevicePass::Summarize() {
  for (auto& [what, a] : tally_.added) report_->added.push_back(std::move(a));
  for (const auto& [key, count] : tally_.sdpa_classes) {
    report_->sdpa.push_back(SdpaCallClass{std::get<0>(key), count, std::get<1>(key), std::get<2>(key)});
  }
  if (tally_.sdpa_calls == 0 && sdpa_forced_.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--sdpa-backend ", options_.sdpa_backend,
        ": the step has no fused SDPA events (_scaled_dot_product_{cudnn,flash,efficient}_attention)"));
  }
  if (tally_.convs == 0 && !options_.cudnn_workspace.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--cudnn-workspace ", options_.cudnn_workspace,
                                                   ": the step has no convolutions"));
  }
  if (tally_.convs > 0 && cudnn_assumed_ == CudnnAssumption::kNone) {
    report_->assumptions.push_back(absl::StrCat(
        "cuDNN convolution workspaces (", tally_.convs, " convolution ops): ASSUMED NONE (--cudnn-workspace none",
        options_.cudnn_workspace.empty() ? ", the default" : "",
        "); the algorithm, and so the workspace, is chosen on the GPU by cuDNN's heuristics",
        cudnn_benchmark_ ? " or, with cudnn.benchmark as recorded, by timing" : "",
        " (aten/src/ATen/native/cudnn/Conv_v7.cpp / Conv_v8.cpp); gemm, winograd_nonfused or bound size them"));
  } else if (tally_.convs > 0) {
    report_->assumptions.push_back(absl::StrCat(
        "cuDNN convolution workspaces ASSUMED ", CudnnAssumptionName(cudnn_assumed_), " (--cudnn-workspace; the "
        "algorithm is chosen on the GPU): ",
        cudnn_assumed_ == CudnnAssumption::kBound
            ? absl::StrCat(tally_.conv_directions, " convolution directions each given the larger of the gemm and "
                           "winograd_nonfused workspaces where they apply (none elsewhere); not a bound over "
                           "cuDNN's FFT, FFT tiling or precomputed-GEMM algorithms, which gpusim does not size")
            : absl::StrCat(tally_.conv_directions - tally_.conv_unsized, " of ", tally_.conv_directions,
                           " convolution directions sized, the rest assumed none (the algorithm does not apply "
                           "to them, or not a 2-D convolution: no facts)"),
        cudnn_benchmark_ ? (warm_ ? "; cudnn.benchmark: timed in the warm-up step (benchmark cache hits in this step)"
                                  : "; cudnn.benchmark without a warm-up step: each parameter set's first call "
                                    "times in a scratch workspace sized as bound (a lower bound of "
                                    "getMaxWorkspaceSize)")
                         : ""));
  }
  if (tally_.conv_layout_unrecorded > 0) {
    report_->assumptions.push_back(absl::StrCat(
        "convolution memory format: ", tally_.conv_layout_unrecorded, " of ", tally_.convs,
        " convolution ops recorded without it (a trace before format 1.7): timed as contiguous (NCHW), "
        "PyTorch's default, behind cuDNN's layout transforms where they apply (Note [cuDNN layout transforms], "
        "sim/device/impl/conv.h); a recording by the current gpusim_torch writes it"));
  }
  if (tally_.embeddings > 0) {
    report_->not_modelled.push_back(absl::StrCat(
        "embedding backward temporaries (", tally_.embeddings, " embedding_dense_backward ops: ",
        absl::StrJoin(tally_.embedding_why, "; "), "; aten/src/ATen/native/cuda/Embedding.cu, EmbeddingBackwardKernel.cu)"));
  }
  if (tally_.index_sorts > 0) {
    report_->not_modelled.push_back(absl::StrCat(
        "index_put(accumulate) sort temporaries (", tally_.index_sorts, " ops: ", absl::StrJoin(tally_.index_why, "; "),
        "; aten/src/ATen/native/cuda/Indexing.cu index_put_with_sort_kernel)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Trace> AddEagerDeviceMemory(const Trace& recorded, const DeviceSpec& device,
                                           EagerDeviceMemory* report, const EagerDeviceOptions& options) {
  *report = EagerDeviceMemory{};
  report->device = device.name;
  report->context_reserve = device.context_reserve;
  const std::string* framework = FindMeta(recorded, "framework");
  if (framework == nullptr || *framework != "pytorch") {
    for (const auto& [flag, value] : {std::pair<std::string, const std::string*>{"--cudnn-workspace",
                                                                                    &options.cudnn_workspace},
                                      {"--sdpa-backend", &options.sdpa_backend}}) {
      if (value->empty()) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          flag, " applies to a step recorded from PyTorch (python/gpusim_torch; meta framework pytorch), and this "
          "trace is not one"));
    }
    return recorded;
  }
  return EagerDevicePass(recorded, device, report, options).Run();
}

}  // namespace gpusim
