#include "models/llama.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/base/status.h"
#include "sim/ir/builder.h"
#include "sim/lower/xla/entry_tuple.h"
#include "sim/lower/xla/loop_slices.h"
#include "sim/remat/remat_policy.h"

namespace gpusim {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One trainable parameter (or a stack of L of them when layers are scanned).
struct Param {
  std::string name;
  std::vector<int64_t> full;   // unsharded shape of one layer's (or the global) weight
  int shard_axis = 0;          // the embed axis FSDP shards
  bool per_layer = false;
  TensorId value = kNoTensor, mu = kNoTensor, nu = kNoTensor;  // arguments
  std::vector<TensorId> grads;  // fp32 sharded gradient(s), one per layer when per_layer
  TensorId scan_source = kNoTensor;  // what layer slices are read from: value, or its transpose
  TensorId grad_stack = kNoTensor;   // rolled: the [L, ...] gradient ys of the backward loop
  TensorId residual_stack = kNoTensor;  // rolled: the saved per-layer slices, stacked [L, ...]
};

// A forward value of one decoder layer, declared once and emitted for the
// forward pass and (when not saved) again as recompute in the backward pass.
struct FwdNode {
  std::string out;
  std::vector<int64_t> shape;
  DType dtype;
  OpKind kind;
  std::vector<std::string> ins;  // "x" (layer input), "W:name" (gathered weight), other outs
  double flops;
  std::string tag;               // checkpoint_name, MaxText's
  bool is_dot = false;
  bool dot_batch_dims = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;
};

class LlamaBuilder {
 public:
  LlamaBuilder(const RunSpec& s, const RematPolicy& policy)
      : s_(s), m_(s.model), policy_(policy), b_(absl::StrCat(s.model.name, "-train-step")) {
    B_ = s.batch.per_device;
    S_ = s.batch.seq_len;
    T_ = B_ * S_;
    D_ = m_.d_model;
    H_ = m_.n_heads;
    K_ = m_.n_kv_heads;
    Dh_ = m_.head_dim;
    M_ = m_.mlp_dim;
    V_ = m_.vocab;
    L_ = m_.n_layers;
    N_ = s.parallelism.fsdp;
    cdt_ = m_.compute_dtype;
    wdt_ = m_.weight_dtype;
    gdt_ = s.parallelism.gather_dtype == "weight" ? wdt_ : cdt_;
    // A scanned layer stack with trip count 1 is inlined (XLA
    // WhileLoopSimplifier), which is the unrolled form.
    rolled_ = m_.scan_layers && s.loop.mode == "rolled" && L_ > 1;
  }

  absl::StatusOr<Program> Build() {
    DeclareState();
    RETURN_IF_ERROR(DecideSavedSet());
    PlanZeroStacks();
    b_.set_phase(Phase::kForward);
    TensorId x = Embedding();
    PrepareScanSources();
    if (rolled_) AllocResidualStacks();
    std::vector<TensorId> layer_inputs;
    std::vector<std::map<std::string, TensorId>> saved(static_cast<size_t>(L_));
    b_.BeginRegion("forward_scan", "loop", rolled_);
    // Weights are all-gathered one layer ahead (XLA's latency-hiding
    // scheduler / --xla_gpu_enable_pipelined_all_gather; PyTorch FSDP
    // forward_prefetch): two layers' gathered weights are live at a time.
    // Without FSDP there is no gather to hide: each layer's weight casts are
    // made in its own iteration (XLA fuses nothing across a while body's
    // iterations), one layer's at a time.
    const bool prefetch = N_ > 1;
    std::map<std::string, TensorId> next = prefetch ? GatherLayer(0, "forward") : std::map<std::string, TensorId>{};
    for (int l = 0; l < L_; ++l) {
      layer_inputs.push_back(x);
      b_.set_layer(l);
      b_.BeginRegion(absl::StrCat("layer", l, ".forward"), "layer");
      std::map<std::string, TensorId> weights = prefetch ? std::move(next) : GatherLayer(l, "forward");
      if (prefetch && l + 1 < L_) next = GatherLayer(l + 1, "forward");
      auto vals = EmitLayerForward(l, x, weights, /*recompute=*/false, {});
      if (rolled_) StoreResiduals(l, vals);
      OffloadResiduals(l, vals);
      b_.EndRegion();
      x = vals.at("y");
      saved[static_cast<size_t>(l)] = std::move(vals);
    }
    b_.EndRegion();
    b_.set_layer(-1);
    const OpId head_first = b_.next_op();
    HeadResult head = HeadAndLoss(x);
    // The forward loop ends when its last iteration's copies are done.
    for (OpId op = head_first; op < b_.next_op() && !pending_wait_.empty(); ++op) {
      if (IsComputeKind(b_.op(op).kind)) WaitForPending(b_.op(op));
    }

    b_.set_phase(Phase::kBackward);
    TensorId dx = HeadBackward(head);
    if (rolled_) AllocGradStacks();
    b_.BeginRegion("backward_scan", "loop", rolled_);
    if (prefetch) next = GatherLayer(static_cast<int>(L_) - 1, "backward");
    for (int l = static_cast<int>(L_) - 1; l >= 0; --l) {
      b_.set_layer(l);
      b_.BeginRegion(absl::StrCat("layer", l, ".backward"), "layer");
      std::map<std::string, TensorId> weights = prefetch ? std::move(next) : GatherLayer(l, "backward");
      std::map<std::string, TensorId> reloaded = ReloadResiduals(l);
      if (prefetch && l > 0) next = GatherLayer(l - 1, "backward");
      std::map<std::string, TensorId> fwd = rolled_ ? LoadResiduals(l) : saved[static_cast<size_t>(l)];
      for (const auto& [name, t] : reloaded) fwd[name] = t;
      TensorId xin = rolled_ ? fwd.at("x") : layer_inputs[static_cast<size_t>(l)];
      dx = EmitLayerBackward(l, xin, fwd, weights, dx);
      b_.EndRegion();
    }
    b_.EndRegion();
    b_.set_layer(-1);
    FinishStackedGrads();
    EmbeddingBackward(dx);

    b_.set_phase(Phase::kOptimizer);
    Optimizer(head.loss);
    if (s_.framework == "jax") AddEntryTupleTable(b_);  // Note [Entry result tuple]
    return b_.Finish();
  }

 private:
  // --- scan structure (../shared/reference/xla_semantics.md §3-§5) -------------

  // The saved set of a layer under the remat policy; the layer input (the
  // scan carry) is always saved. Offloaded values are residuals too, kept in
  // pinned host memory (Note [Host offload]).
  // As JAX's remat partial evaluation does (ad_checkpoint.py
  // remat_partial_eval): walk back from the values the backward rules read;
  // a value the policy saves is a residual, any other is recomputed and its
  // own inputs become needed in turn. So a saveable value is saved only if
  // the backward pass or a recomputation reads it.
  absl::Status DecideSavedSet() {
    const std::vector<FwdNode> nodes = LayerNodes();
    saved_names_ = {"x"};
    recompute_names_.clear();
    offload_names_.clear();
    std::vector<std::string> work = Residuals(m_.attention == "flash");
    while (!work.empty()) {
      const std::string n = work.back();
      work.pop_back();
      if (n == "x" || n.rfind("W:", 0) == 0 || saved_names_.count(n) || recompute_names_.count(n)) continue;
      const FwdNode* f = nullptr;
      for (const FwdNode& node : nodes) {
        if (node.out == n) f = &node;
      }
      const SaveDecision d =
          policy_.no_remat() ? SaveDecision::kSave : policy_.Decide({f->tag, f->is_dot, f->dot_batch_dims});
      if (d == SaveDecision::kOffload) {
        offload_names_.insert(n);
      } else if (d == SaveDecision::kSave) {
        saved_names_.insert(n);
      } else {
        recompute_names_.insert(n);
        for (const std::string& in : f->ins) work.push_back(in);
      }
    }
    return absl::OkStatus();
  }

  const std::set<std::string>& saved_names() const { return saved_names_; }

  // Flax nn.scan (flax/core/axes_scan.py transpose_to_front): stacked params
  // whose layer axis is not 0 are transposed to put it first before the
  // scan — a full copy, while the untransposed originals stay live as the
  // donated train state.
  void PrepareScanSources() {
    for (Param& p : params_) {
      if (!p.per_layer) continue;
      p.scan_source = p.value;
      if (m_.param_scan_axis == 0 || !m_.scan_layers) continue;
      const Tensor& v = b_.tensor(p.value);
      TensorId t = b_.AddTensor(
          v.name + ".layers_first", Stacked0(Shard(p)), v.dtype, Role::kParameter,
          absl::StrFormat("transposed copy of stacked params (param_scan_axis=%d): %s", m_.param_scan_axis, p.name));
      b_.AddOp("transpose_to_front." + p.name, OpKind::kTranspose, {p.value}, {t}, 0);
      p.scan_source = t;
    }
  }

  std::vector<int64_t> Stacked0(std::vector<int64_t> shape) const {
    shape.insert(shape.begin(), L_);
    return shape;
  }

  // Note [Stack initialisation and CSE]: JAX allocates every rolled scan's
  // stacked outputs as `_empty_array` = broadcast(constant 0) (jax v0.5.2
  // loops.py _scan_impl), and XLA's HloCSE (hlo_cse.cc) merges equal
  // broadcasts: the forward scan's residual stacks and the backward scan's
  // gradient stacks of the same shape and dtype become one broadcast
  // (openxla/xla#20373). Copy insertion (copy_insertion.cc AddCopiesForWhile
  // / RemoveUnnecessaryCopies) then gives every loop-state slot but the last
  // user its own copy of it.
  //
  // Note [Copy fusion of stack inits]: on GPU those copies are then fused
  // with the broadcast that feeds them: CopyFusion::DoCopyFusion
  // (xla/service/gpu/transforms/copy_fusion.cc, pass
  // "horizontal-loop-fusion-for-copy", run after copy insertion on the
  // entry computation) makes every same-shape copy of an elementwise-only
  // fusion (the zero broadcast qualifies) an extra output of that fusion.
  // One kernel then writes the broadcast and all its copies, so every stack
  // of that shape and dtype — forward and backward — is allocated before
  // the first loop that uses any of them (reported in openxla/xla#27322:
  // 16 scans' ys all live at once, fixed by
  // --xla_disable_hlo_passes=horizontal-loop-fusion-for-copy).
  using StackKey = std::pair<std::vector<int64_t>, DType>;

  // Counts the requests for zero-initialised stacks of each shape, in the
  // order Build() will make them.
  void PlanZeroStacks() {
    if (!rolled_) return;
    auto count = [&](std::vector<int64_t> shape, DType dt) { ++zero_uses_[{std::move(shape), dt}]; };
    for (const Param& p : params_) {
      if (p.per_layer && ParamResidualDType(p).has_value()) count(Stacked0(Shard(p)), *ParamResidualDType(p));
    }
    for (const std::string& r : saved_names_) {
      auto [shape, dt] = ResidualShape(r);
      count(Stacked0(shape), dt);
    }
    for (const Param& p : params_) {
      if (p.per_layer) count(Stacked0(Shard(p)), wdt_);
    }
  }

  // A zero-initialised [L, ...] stack. The first request of a shape emits
  // the fused broadcast + copies (Note [Copy fusion of stack inits]): one
  // buffer per request of that shape, all written at once; later requests
  // take the next one, the last request takes the broadcast itself.
  TensorId ZeroStack(const std::string& name, std::vector<int64_t> shape, DType dt, Role role,
                     const std::string& origin) {
    const StackKey key{shape, dt};
    auto it = zero_init_.find(key);
    if (it == zero_init_.end()) {
      const int users = std::max(1, zero_uses_[key]);
      std::vector<TensorId> bufs;
      TensorId bcast = b_.AddTensor("stack_zeros." + name, shape, dt, Role::kTemporary,
                                    "zero broadcast initialising stacks of this shape (HloCSE-merged)");
      for (int i = 0; i + 1 < users; ++i) {
        bufs.push_back(b_.AddTensor(absl::StrCat("stack_zeros.", name, ".copy", i), shape, dt, Role::kTemporary,
                                    "copy of the shared zero broadcast (copy insertion)"));
      }
      bufs.push_back(bcast);  // the last user takes the broadcast itself
      std::vector<TensorId> outs = bufs;
      Op& op = b_.AddOp("stack_zeros." + name, OpKind::kElementwise, {}, outs, 0);
      op.bytes_written = Bytes(b_.tensor(bcast).bytes().value() * users);
      it = zero_init_.emplace(key, std::move(bufs)).first;
    }
    std::vector<TensorId>& bufs = it->second;
    const size_t used = static_cast<size_t>(zero_handed_[key]++);
    if (used >= bufs.size()) {
      // More requests than planned: a fresh broadcast of its own.
      TensorId t = b_.AddTensor(name, std::move(shape), dt, role, origin);
      b_.AddOp(name + ".init", OpKind::kElementwise, {}, {t}, 0);
      return t;
    }
    Tensor& t = b_.tensor(bufs[used]);
    t.name = name;
    t.role = role;
    t.origin = origin;
    if (bufs.size() > 1) {
      absl::StrAppend(&t.origin, "; zero-initialised by one fused broadcast with ", bufs.size() - 1,
                      " other stack(s) of this shape (HloCSE + CopyFusion), so allocated before the first of them");
    }
    return bufs[used];
  }

  // The dtype of a param's saved per-layer residual (see Note [Param
  // residual stacks]); nullopt when the slice is forwarded.
  std::optional<DType> ParamResidualDType(const Param& p) const {
    const bool is_norm = p.full.size() == 1;
    if (!policy_.no_remat() || is_norm) return std::nullopt;
    return cdt_;
  }

  std::pair<std::vector<int64_t>, DType> ResidualShape(const std::string& r) const {
    for (const FwdNode& f : LayerNodes()) {
      if (f.out == r) return {f.shape, f.dtype};
    }
    return {{B_, S_, D_}, cdt_};  // "x", the carry
  }

  // Rolled scan: every saved value is an extensive residual, stacked [L, ...]
  // in a buffer preallocated before the loop and written in place each
  // iteration (jax loops.py _scan_partial_eval; carries are never forwarded).
  void AllocResidualStacks() {
    // Note [Param residual stacks]: the backward body needs each layer's
    // weights. Under jax.checkpoint (any policy) they are *inputs* of the
    // remat, not residuals: remat_partial_eval (jax v0.5.2
    // jax/_src/ad_checkpoint.py) calls pe.partial_eval_jaxpr_custom with
    // in_inst all True, so the staged remat takes every input directly
    // (ensure_instantiated adds only non-instantiated vars to the
    // residuals), and _insert_reduce_precision wraps only the policy's
    // saved intermediates. The enclosing scan's partial eval
    // (loops.py _scan_partial_eval) then sees the instantiated per-layer
    // slice as a residual equal to a scanned input and forwards the xs
    // array itself (pe._jaxpr_forwarding, "extensive input to extensive
    // output"): the backward loop reads the stacked params (or their
    // layer-first transpose) directly, and no stack is built. Without
    // remat the residual is the bf16 cast each dot reads
    // (convert_element_type f32→bf16 is not a forwarding), stacked [L, ...];
    // norm scales are read directly and stay forwarded.
    for (Param& p : params_) {
      if (!p.per_layer) continue;
      const std::optional<DType> dt = ParamResidualDType(p);
      if (!dt.has_value()) continue;
      p.residual_stack = ZeroStack(
          "residual_stack.params." + p.name, Stacked0(Shard(p)), *dt, Role::kResidual,
          absl::StrFormat("residual stack of layer parameters (%s, %s): %s", std::string(DTypeName(*dt)),
                          "the bf16 cast each dot saves", p.name));
    }
    for (const std::string& r : saved_names_) {
      auto [shape, dt] = ResidualShape(r);
      TensorId st = ZeroStack(
          "residual_stack." + r, Stacked0(shape), dt, Role::kResidual,
          absl::StrFormat("residual stack of %s `%s`, %d x %s", r == "x" ? "carry" : "value", r, L_,
                          FormatBytes(Bytes(Elements(shape) * DTypeSize(dt)))));
      stacks_[r] = st;
    }
  }

  static int64_t Elements(const std::vector<int64_t>& s) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    return n;
  }

  void StoreResiduals(int l, const std::map<std::string, TensorId>& vals) {
    for (Param& p : params_) {
      if (p.residual_stack == kNoTensor) continue;
      const Bytes per_layer_src = Bytes(b_.tensor(p.scan_source).bytes().value() / L_);
      const Bytes per_layer_dst = Bytes(b_.tensor(p.residual_stack).bytes().value() / L_);
      Op& op = b_.AddOp(absl::StrCat("layer", l, ".stack_param_", p.name), OpKind::kDynamicUpdateSlice,
                        {p.residual_stack, p.scan_source}, {}, 0);
      op.bytes_read = per_layer_src;
      op.bytes_written = per_layer_dst;
    }
    for (const std::string& r : saved_names_) {
      TensorId v = vals.at(r);
      Op& op = b_.AddOp(absl::StrCat("layer", l, ".stack_", r), OpKind::kDynamicUpdateSlice, {stacks_.at(r), v}, {}, 0);
      op.bytes_read = b_.tensor(v).bytes();
      op.bytes_written = b_.tensor(v).bytes();
    }
  }

  // Note [Host offload]: a value the policy marks Offloadable
  // (jax/_src/interpreters/partial_eval.py partial_eval_jaxpr_custom: the
  // known jaxpr device_puts it to memory kind "pinned_host", the staged one
  // device_puts it back) becomes a residual in host memory. Inside a scan
  // the residual is a host-memory [L, ...] stack: XLA's HostOffloader
  // (xla/service/host_offloader.h, MemoryOnlyOffloadStartingWithDus) moves
  // the dynamic-update-slice that writes each iteration's slice and the
  // dynamic-slice that reads it back to host memory, i.e. a device→host
  // copy after the value is produced and a host→device copy in the backward
  // iteration, and replaces the stack's zero broadcast by a host
  // allocation. The copies run on their own stream over PCIe
  // (links.pcie) as async copy-start/copy-done pairs the scheduler places
  // within one loop iteration: a forward iteration ends when its copies to
  // host are done (the next iteration's compute waits for them), and a
  // backward iteration issues its copies back at its start, overlapped with
  // the iteration's first ops (its weight gathers, the recomputation that
  // does not read them). On the device, offloaded values are transients:
  // produced, copied out, freed; reloaded, read, freed.
  static bool IsComputeKind(OpKind k) {
    return !IsCollective(k) && k != OpKind::kHostToDevice && k != OpKind::kDeviceToHost;
  }

  void WaitForPending(Op& op) {
    if (pending_wait_.empty()) return;
    op.control_deps.insert(op.control_deps.end(), pending_wait_.begin(), pending_wait_.end());
    pending_wait_.clear();
  }

  void OffloadResiduals(int l, const std::map<std::string, TensorId>& vals) {
    for (const std::string& r : offload_names_) {
      auto [shape, dt] = ResidualShape(r);
      const Bytes bytes(Elements(shape) * DTypeSize(dt));
      const std::string name = absl::StrCat("layer", l, ".offload_", r);
      if (rolled_) {
        auto it = host_stacks_.find(r);
        if (it == host_stacks_.end()) {
          // Allocated in host memory before the loop (in program order: at
          // the first store; an allocation, no kernel, so no bytes moved).
          TensorId st = b_.AddTensor(
              "host_stack." + r, Stacked0(shape), dt, Role::kResidual,
              absl::StrFormat("pinned-host residual stack of `%s`, %d x %s (offloaded)", r, L_, FormatBytes(bytes)));
          b_.tensor(st).host = true;
          Op& alloc = b_.AddOp("host_stack_alloc." + r, OpKind::kElementwise, {}, {st}, 0);
          alloc.bytes_written = Bytes(0);
          it = host_stacks_.emplace(r, st).first;
        }
        Op& op = b_.AddOp(name, OpKind::kDeviceToHost, {it->second, vals.at(r)}, {}, 0);
        op.bytes_read = bytes;
        op.bytes_written = bytes;
        pending_wait_.push_back(op.id);
      } else {
        TensorId h = b_.AddTensor(absl::StrCat("host.layer", l, ".", r), shape, dt, Role::kResidual,
                                  absl::StrFormat("layer %d `%s` offloaded to pinned host", l, r));
        b_.tensor(h).host = true;
        Op& op = b_.AddOp(name, OpKind::kDeviceToHost, {vals.at(r)}, {h}, 0);
        pending_wait_.push_back(op.id);
        host_values_[{l, r}] = h;
      }
    }
  }

  // Copies layer l's offloaded residuals back at the start of its backward
  // iteration (they may not start before the iteration does).
  std::map<std::string, TensorId> ReloadResiduals(int l) {
    std::map<std::string, TensorId> out;
    if (offload_names_.empty()) return out;
    OpId start = b_.next_op() - 1;
    while (start >= 0 && !IsComputeKind(b_.op(start).kind)) --start;
    for (const std::string& r : offload_names_) {
      auto [shape, dt] = ResidualShape(r);
      const Bytes bytes(Elements(shape) * DTypeSize(dt));
      TensorId src = rolled_ ? host_stacks_.at(r) : host_values_.at({l, r});
      TensorId t = b_.AddTensor(absl::StrCat("layer", l, ".reload.", r), shape, dt, Role::kResidual,
                                absl::StrFormat("layer %d `%s` copied back from pinned host", l, r));
      Op& op = b_.AddOp(absl::StrCat("layer", l, ".reload_", r), OpKind::kHostToDevice, {src}, {t}, 0);
      op.bytes_read = bytes;
      op.bytes_written = bytes;
      if (start >= 0) op.control_deps.push_back(start);
      out[r] = t;
    }
    return out;
  }

  // The backward body reads its residuals back with dynamic-slices that XLA
  // fuses into their consumers (elementwise ops, the cast before the gather):
  // the body reads the stacks directly, one layer's slice per read.
  std::map<std::string, TensorId> LoadResiduals(int) {
    std::map<std::string, TensorId> v;
    for (const std::string& r : saved_names_) {
      const Tensor& st = b_.tensor(stacks_.at(r));
      b_.set_read_bytes(st.id, Bytes(st.bytes().value() / L_));
      v[r] = st.id;
    }
    return v;
  }

  // Rolled: the backward loop's stacked outputs (the cotangents of the
  // scanned params) are [L, ...] buffers preallocated before it.
  void AllocGradStacks() {
    for (Param& p : params_) {
      if (!p.per_layer) continue;
      p.grad_stack = ZeroStack("grad_stack." + p.name, Stacked0(Shard(p)), wdt_, Role::kGradient,
                               absl::StrCat("stacked gradients (backward scan output): ", p.name));
    }
  }

  // After the backward scan: unrolled ys are stacked by concatenation; with
  // param_scan_axis != 0 the stacked gradient is transposed back to the
  // parameter layout (flax axes_scan.py transpose_from_front).
  void FinishStackedGrads() {
    if (!m_.scan_layers) return;  // per-layer gradients feed the optimizer directly
    for (Param& p : params_) {
      if (!p.per_layer) continue;
      const Tensor& src = b_.tensor(p.scan_source);
      TensorId g = p.grad_stack;
      if (!rolled_) {
        g = b_.AddTensor("grads." + p.name + ".stacked", src.shape, wdt_, Role::kGradient,
                         absl::StrCat("gradient of ", p.name, " stacked by concatenation (unrolled scan)"));
        b_.AddOp("stack_grads." + p.name, OpKind::kCopy, p.grads, {g}, 0);
      }
      if (m_.param_scan_axis != 0) {
        const Tensor& v = b_.tensor(p.value);
        TensorId t = b_.AddTensor("grads." + p.name, v.shape, wdt_, Role::kGradient,
                                  absl::StrFormat("gradients transposed back (param_scan_axis=%d): %s",
                                                  m_.param_scan_axis, p.name));
        b_.AddOp("transpose_from_front." + p.name, OpKind::kTranspose, {g}, {t}, 0);
        g = t;
      }
      p.grads = {g};
    }
  }

  std::vector<int64_t> Shard(const Param& p) const {
    std::vector<int64_t> s = p.full;
    s[static_cast<size_t>(p.shard_axis)] = CeilDiv(s[static_cast<size_t>(p.shard_axis)], N_);
    return s;
  }
  // Stacked shape: the layer axis inserted at model.param_scan_axis.
  std::vector<int64_t> Stacked(std::vector<int64_t> shard) const {
    size_t axis = std::min<size_t>(static_cast<size_t>(m_.param_scan_axis), shard.size());
    shard.insert(shard.begin() + static_cast<std::ptrdiff_t>(axis), L_);
    return shard;
  }

  void AddParam(std::string name, std::vector<int64_t> full, int shard_axis, bool per_layer) {
    Param p;
    p.name = std::move(name);
    p.full = std::move(full);
    p.shard_axis = shard_axis;
    p.per_layer = per_layer;
    std::vector<int64_t> shape = Shard(p);
    if (per_layer) shape = Stacked(shape);
    const std::string sharding = N_ > 1 ? absl::StrFormat(", FSDP shard 1/%d", N_) : "";
    const std::string what = per_layer ? absl::StrFormat("stacked [L=%d] layer parameter", L_) : "parameter";
    p.value = b_.AddArgument("params." + p.name, shape, wdt_, Role::kParameter, true,
                             absl::StrCat(what, " ", p.name, sharding));
    if (s_.optimizer.kind == "adamw") {
      p.mu = b_.AddArgument("opt.mu." + p.name, shape, s_.optimizer.moment_dtype,
                            Role::kOptimizerState, true, "AdamW first moment of " + p.name);
      p.nu = b_.AddArgument("opt.nu." + p.name, shape, s_.optimizer.moment_dtype,
                            Role::kOptimizerState, true, "AdamW second moment of " + p.name);
    }
    param_index_[p.name] = params_.size();
    params_.push_back(std::move(p));
  }

  // The donated train state (MaxText train.py: donate_argnums=0) and the
  // batch. jax.jit's keep_unused=False prunes inputs the step never reads, so
  // `targets_position` is not an argument.
  void DeclareState() {
    step_ = b_.AddArgument("state.step", {}, DType::kI32, Role::kScalar, true, "train-state step counter");
    AddParam("token_embedder", {V_, D_}, 1, false);
    const int64_t q = H_ * Dh_, kv = K_ * Dh_;
    AddParam("attn_norm", {D_}, 0, true);
    AddParam("wq", {D_, q}, 0, true);
    AddParam("wk", {D_, kv}, 0, true);
    AddParam("wv", {D_, kv}, 0, true);
    AddParam("wo", {q, D_}, 1, true);
    AddParam("mlp_norm", {D_}, 0, true);
    AddParam("wi_0", {D_, M_}, 0, true);
    AddParam("wi_1", {D_, M_}, 0, true);
    AddParam("wo_mlp", {M_, D_}, 1, true);
    AddParam("final_norm", {D_}, 0, false);
    if (!m_.tied_embeddings) AddParam("logits_dense", {D_, V_}, 0, false);
    if (s_.optimizer.kind == "adamw") {
      // optax.chain(scale_by_adam, add_decayed_weights, scale_by_schedule):
      // ScaleByAdamState.count and ScaleByScheduleState.count, both int32.
      adam_count_ = b_.AddArgument("opt.count", {}, DType::kI32, Role::kScalar, true, "scale_by_adam count");
      sched_count_ = b_.AddArgument("opt.schedule_count", {}, DType::kI32, Role::kScalar, true,
                                    "scale_by_schedule count");
    }
    for (const char* n : {"inputs", "inputs_position", "inputs_segmentation", "targets",
                          "targets_segmentation"}) {
      batch_[n] = b_.AddArgument(absl::StrCat("batch.", n), {B_, S_}, DType::kI32, Role::kInputBatch,
                                 false, "input batch (int32 [B,S])");
    }
  }

  Param& P(const std::string& name) { return params_[param_index_.at(name)]; }

  // All-gathers one layer's (or a global) weight for compute: the shard is
  // cast to the gather dtype, gathered over the FSDP group, cast to compute.
  TensorId Gather(const std::string& name, int layer, const std::string& why) {
    Param& p = P(name);
    const std::vector<int64_t> shard = Shard(p);
    const std::string base = absl::StrCat(layer >= 0 ? absl::StrCat("layer", layer, ".") : "", name);
    TensorId src = p.per_layer && p.scan_source != kNoTensor ? p.scan_source : p.value;
    if (b_.phase() == Phase::kBackward && p.residual_stack != kNoTensor) src = p.residual_stack;
    const Bytes slice = Bytes(b_.tensor(src).bytes().value() / (p.per_layer ? L_ : 1));
    TensorId cur = src;
    // Note [Materialised loop slices]: a rolled loop's per-layer slice of a
    // stacked weight that no cast fuses is a buffer of its own when an
    // all-gather (FSDP) or a GEMM (no FSDP, weights already in the compute
    // dtype) reads it; a cast reads it in place and its output is the buffer.
    if (rolled_ && p.per_layer && layer >= 0 && p.full.size() > 1 && gdt_ == b_.tensor(src).dtype &&
        (N_ > 1 || b_.tensor(src).dtype == cdt_)) {
      const SliceReader reader = N_ > 1 ? SliceReader::kAllGather : SliceReader::kGemm;
      if (SliceMaterialises(reader, s_.xla)) {
        cur = MaterialiseSlice(b_, src, shard, b_.tensor(src).dtype, Role::kTemporary, base + ".slice",
                               absl::StrCat("stacked weights `", name, "`"), reader);
        src = cur;
      }
    }
    if (gdt_ != b_.tensor(src).dtype) {
      cur = b_.AddTensor(base + ".cast", shard, gdt_, Role::kTemporary, "weight shard cast for gather");
      Op& op = b_.AddOp(base + ".cast", OpKind::kConvert, {src}, {cur}, 0);
      op.bytes_read = slice;
    }
    if (N_ > 1) {
      TensorId full = b_.AddTensor(base + ".gathered", p.full, gdt_, Role::kTemporary,
                                   absl::StrCat("all-gathered weight ", name, " (", why, ")"));
      Op& op = b_.AddOp(base + ".all_gather", OpKind::kAllGather, {cur}, {full}, 0);
      op.group = N_;
      if (cur == src) op.bytes_read = slice;
      cur = full;
    }
    if (b_.tensor(cur).dtype != cdt_) {
      TensorId c = b_.AddTensor(base + ".compute", p.full, cdt_, Role::kTemporary, "weight cast to compute dtype");
      Op& op = b_.AddOp(base + ".to_compute", OpKind::kConvert, {cur}, {c}, 0);
      if (cur == src) op.bytes_read = slice;
      cur = c;
    }
    return cur;
  }

  // Reduce-scatters a full bf16 weight gradient to this device's shard, cast
  // to the weight dtype: a per-layer gradient, or (rolled scan) an in-place
  // dynamic-update-slice into the backward loop's stacked output.
  void ReduceGrad(const std::string& name, int layer, TensorId full_grad) {
    Param& p = P(name);
    const std::string base = absl::StrCat(layer >= 0 ? absl::StrCat("layer", layer, ".") : "", name);
    TensorId cur = full_grad;
    if (N_ > 1) {
      TensorId sh = b_.AddTensor(base + ".grad_shard", Shard(p), b_.tensor(full_grad).dtype,
                                 Role::kTemporary, "reduce-scattered gradient shard");
      Op& op = b_.AddOp(base + ".reduce_scatter", OpKind::kReduceScatter, {cur}, {sh}, 0);
      op.group = N_;
      cur = sh;
    }
    if (p.per_layer && p.grad_stack != kNoTensor) {
      Op& op = b_.AddOp(base + ".grad_to_stack", OpKind::kDynamicUpdateSlice, {p.grad_stack, cur}, {}, 0);
      op.bytes_read = b_.tensor(cur).bytes();
      op.bytes_written = Bytes(b_.tensor(cur).elements() * DTypeSize(wdt_));
      return;
    }
    if (s_.framework == "jax" && b_.tensor(cur).dtype != wdt_) {
      // XLA: the convert to the weight dtype is fusible and every user of
      // it (the global-norm reduces and the AdamW update) fuses it
      // (priority_fusion.cc CanFuseWithAllNonBitcastUsers), so the gradient
      // buffer is the compute-dtype one; no weight-dtype copy is held.
      b_.tensor(cur).role = Role::kGradient;
      b_.tensor(cur).origin = absl::StrCat("gradient of ", name, " (", std::string(DTypeName(b_.tensor(cur).dtype)),
                                           "; its cast to ", std::string(DTypeName(wdt_)), " fuses into its readers)");
      p.grads.push_back(cur);
      return;
    }
    TensorId g = b_.AddTensor(base + ".grad", Shard(p), wdt_, Role::kGradient,
                              absl::StrCat("gradient of ", name, " (", std::string(DTypeName(wdt_)), ")"));
    b_.AddOp(base + ".grad_cast", OpKind::kConvert, {cur}, {g}, 0);
    p.grads.push_back(g);
  }

  // --- decoder layer ---------------------------------------------------------

  static const std::vector<std::string>& LayerWeights() {
    static const std::vector<std::string> kWeights = {"attn_norm", "wq", "wk", "wv", "wo",
                                                      "mlp_norm", "wi_0", "wi_1", "wo_mlp"};
    return kWeights;
  }

  std::map<std::string, TensorId> GatherLayer(int l, const char* why) {
    std::map<std::string, TensorId> w;
    for (const std::string& n : LayerWeights()) w["W:" + n] = Gather(n, l, why);
    return w;
  }

  // The part of the causal S x S score matrix the attention kernels compute.
  double CausalFraction() const { return m_.attention == "flash" ? 0.5 : 1.0; }

  std::vector<FwdNode> LayerNodes() const {
    const int64_t q = H_ * Dh_, kv = K_ * Dh_;
    const double T = static_cast<double>(T_), D = static_cast<double>(D_), M = static_cast<double>(M_);
    std::vector<FwdNode> n;
    auto dot = [&](std::string out, std::vector<int64_t> shape, std::string in, std::string w, int64_t kdim,
                   int64_t ndim, std::string tag) {
      FwdNode f{std::move(out), std::move(shape), cdt_, OpKind::kMatmul, {std::move(in), std::move(w)},
                2.0 * T * static_cast<double>(kdim) * static_cast<double>(ndim), std::move(tag), true, false};
      f.m = T_; f.n = ndim; f.k = kdim;
      n.push_back(std::move(f));
    };
    // RMSNorm computes in fp32 and casts its output (MaxText normalizations.py).
    n.push_back({"h1", {B_, S_, D_}, cdt_, OpKind::kElementwise, {"x", "W:attn_norm"}, 4 * T * D, ""});
    dot("q_lin", {B_, S_, H_, Dh_}, "h1", "W:wq", D_, q, "");
    dot("k_lin", {B_, S_, K_, Dh_}, "h1", "W:wk", D_, kv, "");
    dot("value_proj", {B_, S_, K_, Dh_}, "h1", "W:wv", D_, kv, "value_proj");
    // RoPE (embeddings.py); MaxText tags query_proj/key_proj after it.
    n.push_back({"query_proj", {B_, S_, H_, Dh_}, cdt_, OpKind::kElementwise, {"q_lin"}, 6 * T * q, "query_proj"});
    n.push_back({"key_proj", {B_, S_, K_, Dh_}, cdt_, OpKind::kElementwise, {"k_lin"}, 6 * T * kv, "key_proj"});
    // Causal attention: QKᵀ and AV. cuDNN's causal flash kernel skips the
    // masked tiles, half the score matrix; the explicit form (MaxText
    // dot_product: attentions.py apply_attention_dot, einsum then mask)
    // computes all of it, as the imported HLO's dots do.
    const double attn_flops = 2.0 * 2.0 * static_cast<double>(B_ * H_ * Dh_) * static_cast<double>(S_) *
                              static_cast<double>(S_) * CausalFraction();
    if (m_.attention == "flash") {
      n.push_back({"attn_out", {B_, S_, H_, Dh_}, cdt_, OpKind::kAttention, {"query_proj", "key_proj", "value_proj"},
                   attn_flops, "context"});
      n.push_back({"attn_lse", {B_, H_, S_}, DType::kF32, OpKind::kAttention, {"query_proj", "key_proj"}, 0,
                   "context"});
    } else {
      FwdNode sc{"scores", {B_, H_, S_, S_}, cdt_, OpKind::kMatmul, {"query_proj", "key_proj"}, attn_flops / 2, "",
                 true, true};
      sc.m = S_; sc.n = S_; sc.k = Dh_; sc.batch = B_ * H_;
      n.push_back(sc);
      n.push_back({"probs", {B_, H_, S_, S_}, cdt_, OpKind::kElementwise, {"scores"},
                   5.0 * static_cast<double>(B_ * H_ * S_ * S_), ""});
      FwdNode av{"attn_out", {B_, S_, H_, Dh_}, cdt_, OpKind::kMatmul, {"probs", "value_proj"}, attn_flops / 2,
                 "context", true, true};
      av.m = S_; av.n = Dh_; av.k = S_; av.batch = B_ * H_;
      n.push_back(av);
    }
    dot("out_proj", {B_, S_, D_}, "attn_out", "W:wo", q, D_, "out_proj");
    n.push_back({"x1", {B_, S_, D_}, cdt_, OpKind::kElementwise, {"x", "out_proj"}, T * D, ""});
    n.push_back({"h2", {B_, S_, D_}, cdt_, OpKind::kElementwise, {"x1", "W:mlp_norm"}, 4 * T * D, ""});
    dot("mlpwi_0", {B_, S_, M_}, "h2", "W:wi_0", D_, M_, "mlpwi_0");
    dot("mlpwi_1", {B_, S_, M_}, "h2", "W:wi_1", D_, M_, "mlpwi_1");
    n.push_back({"act", {B_, S_, M_}, cdt_, OpKind::kElementwise, {"mlpwi_0", "mlpwi_1"}, 5 * T * M, ""});
    dot("mlpwo", {B_, S_, D_}, "act", "W:wo_mlp", M_, D_, "mlpwo");
    n.push_back({"y", {B_, S_, D_}, cdt_, OpKind::kElementwise, {"x1", "mlpwo"}, T * D, "decoder_layer_input"});
    return n;
  }

  // Emits the forward nodes in `only` (all when empty). Weights are gathered
  // on first use. Returns name → tensor for every emitted value.
  // `known` holds the gathered weights ("W:name") and, when recomputing,
  // the saved values the recomputation starts from.
  std::map<std::string, TensorId> EmitLayerForward(int l, TensorId x,
                                                   const std::map<std::string, TensorId>& known,
                                                   bool recompute, const std::set<std::string>& only) {
    std::map<std::string, TensorId> v = known;
    v["x"] = x;
    b_.set_recompute(recompute);
    const std::string pre = absl::StrCat("layer", l, recompute ? ".remat." : ".");
    for (const FwdNode& f : LayerNodes()) {
      if (!only.empty() && !only.count(f.out)) continue;
      std::vector<TensorId> ins;
      for (const std::string& in : f.ins) ins.push_back(v.at(in));
      const Role role = Role::kActivation;
      TensorId out = b_.AddTensor(pre + f.out, f.shape, f.dtype, role,
                                  absl::StrCat(recompute ? "recomputed " : "", "layer ", l, " ", f.out));
      Op& op = b_.AddOp(pre + f.out, f.kind, ins, {out}, f.flops);
      op.dtype = cdt_;
      op.m = f.m; op.n = f.n; op.k = f.k; op.batch = f.batch;
      if (!recompute) WaitForPending(op);
      v[f.out] = out;
    }
    b_.set_recompute(false);
    return v;
  }

  // Which forward values the backward pass of a layer reads.
  static const std::vector<std::string>& Residuals(bool flash) {
    static const std::vector<std::string> kFlash = {"h1", "query_proj", "key_proj", "value_proj", "attn_out",
                                                    "attn_lse", "x1", "h2", "mlpwi_0", "mlpwi_1", "act"};
    static const std::vector<std::string> kExplicit = {"h1", "query_proj", "key_proj", "value_proj", "probs",
                                                       "attn_out", "x1", "h2", "mlpwi_0", "mlpwi_1", "act"};
    return flash ? kFlash : kExplicit;
  }

  // Backward of one layer: `fwd` holds the saved values (by name); the rest
  // are recomputed from them (remat), then the gradient ops run.
  TensorId EmitLayerBackward(int l, TensorId x, const std::map<std::string, TensorId>& fwd,
                             const std::map<std::string, TensorId>& weights, TensorId dy) {
    const std::vector<FwdNode> nodes = LayerNodes();
    std::map<std::string, const FwdNode*> by_name;
    for (const FwdNode& f : nodes) by_name[f.out] = &f;
    for (const std::string& r : saved_names_) {
      if (r != "x" && !rolled_) b_.tensor(fwd.at(r)).role = Role::kResidual;
    }
    const std::set<std::string>& need = recompute_names_;
    std::map<std::string, TensorId> v;
    for (const std::string& r : saved_names_) v[r] = fwd.at(r);
    if (rolled_) MaterialiseResidualSlices(l, v);
    for (const std::string& r : offload_names_) v[r] = fwd.at(r);
    for (const auto& [k, t] : weights) v[k] = t;  // the backward's own gather
    if (!need.empty()) {
      auto re = EmitLayerForward(l, x, v, /*recompute=*/true, need);
      for (const std::string& k : need) v[k] = re.at(k);
    }
    return LayerBackwardOps(l, x, v, dy);
  }

  // Note [Materialised loop slices] (sim/lower/xla/loop_slices.h): in the
  // rolled backward body a saved value that a GEMM (a dW = Xᵀ·dY, a
  // recomputed dot) or the attention backward (cuDNN custom call, or its
  // batched dots) reads is a dynamic-slice of its stack written to a buffer
  // of its own each iteration; values only elementwise ops read (the norms'
  // inputs, the SwiGLU operands) are read in place.
  void MaterialiseResidualSlices(int l, std::map<std::string, TensorId>& v) {
    static const std::set<std::string> kGemmRead = {"act", "h2", "attn_out", "h1", "probs"};
    static const std::set<std::string> kAttentionRead = {"query_proj", "key_proj", "value_proj", "attn_out",
                                                         "attn_lse"};
    for (const std::string& r : saved_names_) {
      const bool attention = kAttentionRead.count(r) > 0;
      if (!kGemmRead.count(r) && !attention) continue;
      const SliceReader reader =
          attention && m_.attention == "flash" ? SliceReader::kCustomCall : SliceReader::kGemm;
      if (!SliceMaterialises(reader, s_.xla)) continue;
      auto [shape, dt] = ResidualShape(r);
      v[r] = MaterialiseSlice(b_, stacks_.at(r), shape, dt, Role::kResidual, absl::StrCat("layer", l, ".slice_", r),
                              absl::StrCat("stacked residual `", r, "`"), reader);
    }
  }

  TensorId Grad(const std::string& name, std::vector<int64_t> shape, DType dt = DType::kBF16) {
    return b_.AddTensor(name, std::move(shape), dt, Role::kTemporary, "backward temporary");
  }

  TensorId MatmulOp(const std::string& name, TensorId a, TensorId w, std::vector<int64_t> shape, int64_t m,
                    int64_t n, int64_t k) {
    TensorId out = Grad(name, std::move(shape), cdt_);
    Op& op = b_.AddOp(name, OpKind::kMatmul, {a, w}, {out}, 2.0 * static_cast<double>(m) * n * k);
    op.dtype = cdt_;
    op.m = m; op.n = n; op.k = k;
    return out;
  }

  // dX = dY·Wᵀ and dW = Xᵀ·dY for Y = X·W, X [T,kdim], W [kdim,ndim].
  TensorId DenseBackward(int l, const std::string& w, TensorId x_in, TensorId dy, TensorId wt, int64_t kdim,
                         int64_t ndim, std::vector<int64_t> x_shape) {
    const std::string pre = absl::StrCat("layer", l, ".d_", w);
    TensorId dx = MatmulOp(pre + ".dx", dy, wt, std::move(x_shape), T_, kdim, ndim);
    TensorId dw = MatmulOp(pre + ".dw", x_in, dy, b_.tensor(wt).shape, kdim, ndim, T_);
    ReduceGrad(w, l, dw);
    return dx;
  }

  TensorId Elementwise(const std::string& name, std::vector<TensorId> ins, std::vector<int64_t> shape,
                       double flops, DType dt) {
    TensorId out = Grad(name, std::move(shape), dt);
    b_.AddOp(name, OpKind::kElementwise, std::move(ins), {out}, flops);
    return out;
  }

  TensorId NormBackward(int l, const std::string& w, TensorId x_in, TensorId d_out, TensorId scale) {
    const std::string pre = absl::StrCat("layer", l, ".d_", w);
    TensorId dx = Elementwise(pre + ".dx", {x_in, d_out, scale}, {B_, S_, D_}, 8.0 * T_ * D_, cdt_);
    TensorId ds = Grad(pre + ".dscale", {D_}, DType::kF32);
    b_.AddOp(pre + ".dscale", OpKind::kReduce, {x_in, d_out}, {ds}, 3.0 * T_ * D_);
    ReduceGrad(w, l, ds);
    return dx;
  }

  TensorId LayerBackwardOps(int l, TensorId x, std::map<std::string, TensorId>& v, TensorId dy) {
    const int64_t q = H_ * Dh_, kv = K_ * Dh_;
    const std::string pre = absl::StrCat("layer", l, ".");
    // MLP: y = x1 + wo_mlp(silu(wi_0) * wi_1)
    TensorId d_act = DenseBackward(l, "wo_mlp", v.at("act"), dy, v.at("W:wo_mlp"), M_, D_, {B_, S_, M_});
    TensorId d_wi = Elementwise(pre + "d_swiglu", {d_act, v.at("mlpwi_0"), v.at("mlpwi_1")}, {B_, S_, 2, M_},
                                8.0 * T_ * M_, cdt_);
    TensorId d_h2a = DenseBackward(l, "wi_0", v.at("h2"), d_wi, v.at("W:wi_0"), D_, M_, {B_, S_, D_});
    TensorId d_h2b = DenseBackward(l, "wi_1", v.at("h2"), d_wi, v.at("W:wi_1"), D_, M_, {B_, S_, D_});
    TensorId d_h2 = Elementwise(pre + "d_h2", {d_h2a, d_h2b}, {B_, S_, D_}, 1.0 * T_ * D_, cdt_);
    TensorId d_x1n = NormBackward(l, "mlp_norm", v.at("x1"), d_h2, v.at("W:mlp_norm"));
    TensorId d_x1 = Elementwise(pre + "d_x1", {dy, d_x1n}, {B_, S_, D_}, 1.0 * T_ * D_, cdt_);
    // Attention: x1 = x + wo(attn(q, k, v))
    TensorId d_attn = DenseBackward(l, "wo", v.at("attn_out"), d_x1, v.at("W:wo"), q, D_, {B_, S_, H_, Dh_});
    const double attn_flops = 2.0 * 2.0 * static_cast<double>(B_ * H_ * Dh_) * S_ * S_ * CausalFraction();
    TensorId dq = Grad(pre + "d_query", {B_, S_, H_, Dh_}, cdt_);
    TensorId dk = Grad(pre + "d_key", {B_, S_, K_, Dh_}, cdt_);
    TensorId dvv = Grad(pre + "d_value", {B_, S_, K_, Dh_}, cdt_);
    if (m_.attention == "flash") {
      // Flash backward recomputes the scores: 5 S×S matmuls vs 2 forward.
      b_.AddOp(pre + "flash_bwd", OpKind::kAttention,
               {v.at("query_proj"), v.at("key_proj"), v.at("value_proj"), v.at("attn_out"), v.at("attn_lse"), d_attn},
               {dq, dk, dvv}, attn_flops * 2.5).dtype = cdt_;
    } else {
      TensorId dp = Grad(pre + "d_probs", {B_, H_, S_, S_}, cdt_);
      Op& a = b_.AddOp(pre + "d_probs", OpKind::kMatmul, {d_attn, v.at("value_proj")}, {dp}, attn_flops / 2);
      a.m = S_; a.n = S_; a.k = Dh_; a.batch = B_ * H_;
      Op& b = b_.AddOp(pre + "d_value", OpKind::kMatmul, {v.at("probs"), d_attn}, {dvv}, attn_flops / 2);
      b.m = S_; b.n = Dh_; b.k = S_; b.batch = B_ * H_;
      TensorId ds = Elementwise(pre + "d_scores", {dp, v.at("probs")}, {B_, H_, S_, S_}, 4.0 * B_ * H_ * S_ * S_,
                                cdt_);
      Op& c = b_.AddOp(pre + "d_qk", OpKind::kMatmul, {ds, v.at("query_proj"), v.at("key_proj")}, {dq, dk},
                       attn_flops);
      c.m = S_; c.n = Dh_; c.k = S_; c.batch = B_ * H_;
    }
    TensorId dq_lin = Elementwise(pre + "d_rope_q", {dq}, {B_, S_, H_, Dh_}, 6.0 * T_ * q, cdt_);
    TensorId dk_lin = Elementwise(pre + "d_rope_k", {dk}, {B_, S_, K_, Dh_}, 6.0 * T_ * kv, cdt_);
    TensorId d_h1q = DenseBackward(l, "wq", v.at("h1"), dq_lin, v.at("W:wq"), D_, q, {B_, S_, D_});
    TensorId d_h1k = DenseBackward(l, "wk", v.at("h1"), dk_lin, v.at("W:wk"), D_, kv, {B_, S_, D_});
    TensorId d_h1v = DenseBackward(l, "wv", v.at("h1"), dvv, v.at("W:wv"), D_, kv, {B_, S_, D_});
    TensorId d_h1 = Elementwise(pre + "d_h1", {d_h1q, d_h1k, d_h1v}, {B_, S_, D_}, 2.0 * T_ * D_, cdt_);
    TensorId d_xn = NormBackward(l, "attn_norm", x, d_h1, v.at("W:attn_norm"));
    return Elementwise(pre + "d_x", {d_x1, d_xn}, {B_, S_, D_}, 1.0 * T_ * D_, cdt_);
  }

  // --- embedding, head, loss ---------------------------------------------------

  TensorId Embedding() {
    TensorId table = Gather("token_embedder", -1, "forward");
    TensorId x = b_.AddTensor("embed.out", {B_, S_, D_}, cdt_, Role::kActivation, "embedding lookup output");
    b_.AddOp("embed.lookup", OpKind::kGather, {table, batch_.at("inputs")}, {x}, 0);
    return x;
  }

  struct HeadResult {
    TensorId h_final, logits_f32, onehot, exp_shifted, log_softmax, loss, w_out;
  };

  HeadResult HeadAndLoss(TensorId x) {
    HeadResult r{};
    b_.BeginRegion("head.forward", "phase");
    TensorId scale = Gather("final_norm", -1, "forward");
    r.h_final = Elementwise("final_norm", {x, scale}, {B_, S_, D_}, 4.0 * T_ * D_, cdt_);
    b_.tensor(r.h_final).role = Role::kActivation;
    r.w_out = Gather(m_.tied_embeddings ? "token_embedder" : "logits_dense", -1, "forward");
    // logits_dot_in_fp32 False: a bf16 dot, then cast_logits_to_fp32.
    TensorId logits = MatmulOp("logits", r.h_final, r.w_out, {B_, S_, V_}, T_, V_, D_);
    auto f32 = [&](const std::string& n, std::vector<TensorId> ins, double flops) {
      TensorId t = Elementwise(n, std::move(ins), {B_, S_, V_}, flops, m_.logits_dtype);
      b_.tensor(t).role = Role::kActivation;
      return t;
    };
    const double tv = static_cast<double>(T_) * V_;
    r.logits_f32 = f32("logits_f32", {logits}, tv);
    r.onehot = f32("onehot_targets", {batch_.at("targets")}, tv);
    // cross_entropy_with_logits (MaxText max_utils.py) is a custom VJP whose
    // residuals are fp32 [B,S,V] arrays: logits, targets, exp_shifted, log_softmax.
    r.exp_shifted = f32("ce.exp_shifted", {r.logits_f32}, 3 * tv);
    r.log_softmax = f32("ce.log_softmax", {r.logits_f32, r.exp_shifted}, 3 * tv);
    r.loss = b_.AddTensor("loss", {}, DType::kF32, Role::kScalar, "loss (metric output)");
    b_.AddOp("ce.loss", OpKind::kReduce, {r.log_softmax, r.onehot, batch_.at("targets_segmentation")}, {r.loss},
             2 * tv);
    b_.tensor(r.loss).live_out = true;
    if (s_.framework == "jax") {
      // MaxText train.py train_step's other scalar metrics (4bf3beaa):
      // learning/total_weights = sum(targets_segmentation != 0) (int32) and
      // learning/moe_lb_loss (0.0 for a dense model), outputs like loss.
      TensorId tw = b_.AddTensor("total_weights", {}, DType::kI32, Role::kScalar, "total_weights (metric output)");
      b_.AddOp("total_weights.reduce", OpKind::kReduce, {batch_.at("targets_segmentation")}, {tw},
               static_cast<double>(T_));
      b_.tensor(tw).live_out = true;
      TensorId lb = b_.AddTensor("moe_lb_loss", {}, DType::kF32, Role::kScalar,
                                 "moe_lb_loss (metric output; 0 for a dense model)");
      b_.AddOp("moe_lb_loss.zero", OpKind::kElementwise, {}, {lb}, 0);
      b_.tensor(lb).live_out = true;
    }
    for (TensorId t : {r.logits_f32, r.onehot, r.exp_shifted, r.log_softmax}) b_.tensor(t).role = Role::kResidual;
    b_.EndRegion();
    return r;
  }

  TensorId HeadBackward(const HeadResult& r) {
    b_.BeginRegion("head.backward", "phase");
    const double tv = static_cast<double>(T_) * V_;
    TensorId d_logits = Elementwise("ce.d_logits", {r.exp_shifted, r.onehot, r.log_softmax}, {B_, S_, V_}, 3 * tv,
                                    m_.logits_dtype);
    TensorId d_logits_c = Elementwise("ce.d_logits_cast", {d_logits}, {B_, S_, V_}, 0, cdt_);
    TensorId w_out = Gather(m_.tied_embeddings ? "token_embedder" : "logits_dense", -1, "backward");
    TensorId dh = MatmulOp("d_logits.dx", d_logits_c, w_out, {B_, S_, D_}, T_, D_, V_);
    TensorId dw = MatmulOp("d_logits.dw", r.h_final, d_logits_c, {D_, V_}, D_, V_, T_);
    ReduceGrad(m_.tied_embeddings ? "token_embedder" : "logits_dense", -1, dw);
    TensorId scale = Gather("final_norm", -1, "backward");
    TensorId dx = Elementwise("d_final_norm.dx", {dh, scale}, {B_, S_, D_}, 8.0 * T_ * D_, cdt_);
    TensorId ds = Grad("d_final_norm.dscale", {D_}, DType::kF32);
    b_.AddOp("d_final_norm.dscale", OpKind::kReduce, {dh}, {ds}, 3.0 * T_ * D_);
    ReduceGrad("final_norm", -1, ds);
    b_.EndRegion();
    return dx;
  }

  void EmbeddingBackward(TensorId dx) {
    TensorId dt = Grad("d_embed.table", {V_, D_}, cdt_);
    b_.AddOp("d_embed.scatter", OpKind::kScatter, {dx, batch_.at("inputs")}, {dt}, 1.0 * T_ * D_);
    ReduceGrad("token_embedder", -1, dt);
  }

  // --- optimizer -------------------------------------------------------------

  // Note [Optimizer step]: MaxText train_step (train.py at 4bf3beaa,
  // L464-485): grads = optax.clip_by_global_norm(1.0).update(raw_grads)
  // (g_norm = global_norm(raw_grads); each leaf where(g_norm < max, t,
  // t / g_norm * max)) when gradient_clipping_threshold > 0, else raw_grads;
  // new_state = state.apply_gradients(grads) (optax.chain(scale_by_adam,
  // add_decayed_weights, scale_by_schedule)); then three metrics:
  // grad_norm = l2norm_pytree(grads), raw_grad_norm = l2norm_pytree(raw_grads),
  // param_norm = l2norm_pytree(new_state.params) (max_utils.py L74).
  // Lowered as:
  //  - raw_grad_norm and the clip's global norm are the same per-leaf
  //    reduce(multiply(x, x)) (optax numerics.abs_sq and jnp.square both
  //    lower to x*x on reals), one computation after HloCSE: one reduction
  //    pass over the raw gradients, before any update (each clipped leaf
  //    needs the norm);
  //  - assumed from XLA GPU fusion, not checked against an HLO dump: the
  //    clip is fused into each leaf's update, which writes the new param,
  //    mu and nu into the donated buffers (no clipped tree is
  //    materialised), and the grad_norm / param_norm reductions of values
  //    that fusion computes are extra outputs of it (multi-output fusion):
  //    per-leaf partial sums, added up and all-reduced at the end.
  // So each raw gradient dies at its leaf's update.
  void Optimizer(TensorId loss) {
    (void)loss;
    b_.BeginRegion("optimizer", "phase");
    const bool clip = s_.optimizer.clip_grad_norm;
    std::vector<TensorId> all_grads;
    for (const Param& p : params_) all_grads.insert(all_grads.end(), p.grads.begin(), p.grads.end());
    // A scalar metric from per-device partial sums: summed, then all-reduced
    // over the FSDP group.
    auto norm = [&](const std::string& name, const std::vector<TensorId>& partials, const std::string& what) {
      TensorId sq = b_.AddTensor(name + ".local", {}, DType::kF32, Role::kTemporary, "local sum of squares");
      b_.AddOp(name + ".sum", OpKind::kReduce, partials, {sq}, static_cast<double>(partials.size()));
      TensorId n = b_.AddTensor(name, {}, DType::kF32, Role::kScalar, what);
      if (N_ > 1) {
        b_.AddOp(name + ".all_reduce", OpKind::kAllReduce, {sq}, {n}, 0).group = N_;
      } else {
        b_.AddOp(name + ".sqrt", OpKind::kElementwise, {sq}, {n}, 1);
      }
      b_.tensor(n).live_out = true;
      return n;
    };
    // The raw gradients' norm: the clip's g_norm and the raw_grad_norm metric.
    TensorId raw_norm = kNoTensor;
    if (clip) {
      TensorId sq = b_.AddTensor("raw_grad_norm.partial", {}, DType::kF32, Role::kTemporary,
                                 "local sum of squares of the raw gradients");
      const double elems = static_cast<double>(
          std::accumulate(all_grads.begin(), all_grads.end(), int64_t{0},
                          [&](int64_t n, TensorId g) { return n + b_.tensor(g).elements(); }));
      b_.AddOp("raw_grad_norm.reduce", OpKind::kReduce, all_grads, {sq}, 2.0 * elems);
      raw_norm = norm("raw_grad_norm", {sq}, "global norm of the raw gradients (clip threshold input; metric)");
    }
    std::vector<TensorId> grad_partials, param_partials;
    for (Param& p : params_) {
      std::vector<TensorId> ins = {p.value, p.mu, p.nu};
      if (s_.optimizer.kind != "adamw") ins = {p.value};
      if (raw_norm != kNoTensor) ins.push_back(raw_norm);
      ins.insert(ins.end(), p.grads.begin(), p.grads.end());
      std::vector<TensorId> outs;
      for (TensorId src : {p.value, p.mu, p.nu}) {
        if (src == kNoTensor) continue;
        const Tensor& t = b_.tensor(src);
        TensorId o = b_.AddTensor(t.name + ".new", t.shape, t.dtype, t.role, "updated " + t.origin);
        b_.tensor(o).live_out = true;
        b_.tensor(o).aliases = src;
        outs.push_back(o);
      }
      for (auto* partials : {&grad_partials, &param_partials}) {
        const std::string what = partials == &grad_partials ? "grad_norm" : "param_norm";
        TensorId t = b_.AddTensor(absl::StrCat(what, ".partial.", p.name), {}, DType::kF32, Role::kTemporary,
                                  absl::StrCat(what, " partial sum of ", p.name, " (multi-output of its update)"));
        partials->push_back(t);
        outs.push_back(t);
      }
      const double elems = static_cast<double>(b_.tensor(p.value).elements());
      Op& op = b_.AddOp("adamw." + p.name, OpKind::kElementwise, ins, outs, 20.0 * elems);
      op.dtype = DType::kF32;
    }
    const TensorId grad_norm = norm("grad_norm", grad_partials,
                                    clip ? "global norm of the clipped gradients (metric)"
                                         : "global gradient norm (metric)");
    if (!clip) {
      // grads = raw_grads: raw_grad_norm is the same computation (HloCSE).
      TensorId raw = b_.AddTensor("raw_grad_norm", {}, DType::kF32, Role::kScalar,
                                  "global norm of the raw gradients (metric; = grad_norm without clipping)");
      b_.AddOp("raw_grad_norm.copy", OpKind::kElementwise, {grad_norm}, {raw}, 0);
      b_.tensor(raw).live_out = true;
    }
    norm("param_norm", param_partials, "global norm of the updated parameters (metric)");
    for (TensorId src : {step_, adam_count_, sched_count_}) {
      if (src == kNoTensor) continue;
      const Tensor& t = b_.tensor(src);
      TensorId o = b_.AddTensor(t.name + ".new", {}, t.dtype, t.role, "incremented " + t.name);
      b_.tensor(o).live_out = true;
      b_.tensor(o).aliases = src;
      b_.AddOp(t.name + ".increment", OpKind::kElementwise, {src}, {o}, 1);
    }
    b_.EndRegion();
  }

  const RunSpec& s_;
  const ModelSpec& m_;
  const RematPolicy& policy_;
  ProgramBuilder b_;
  int64_t B_, S_, T_, D_, H_, K_, Dh_, M_, V_, L_, N_;
  DType cdt_, wdt_, gdt_;
  bool rolled_ = true;
  std::set<std::string> saved_names_;           // per-layer saved set (names of FwdNodes, "x")
  std::set<std::string> recompute_names_;       // recomputed in the backward pass
  std::set<std::string> offload_names_;         // offloaded to pinned host (Note [Host offload])
  std::map<std::string, TensorId> host_stacks_; // rolled: [L, ...] host-memory residual stacks
  std::map<std::pair<int, std::string>, TensorId> host_values_;  // unrolled: per layer
  std::vector<OpId> pending_wait_;              // copies the next iteration waits for
  std::map<std::string, TensorId> stacks_;      // rolled: residual stacks by name
  std::map<StackKey, std::vector<TensorId>> zero_init_;  // Note [Copy fusion of stack inits]
  std::map<StackKey, int> zero_uses_;           // requests planned, per shape
  std::map<StackKey, int> zero_handed_;         // requests served so far, per shape
  std::vector<Param> params_;
  std::map<std::string, size_t> param_index_;
  std::map<std::string, TensorId> batch_;
  TensorId step_ = kNoTensor, adam_count_ = kNoTensor, sched_count_ = kNoTensor;
};

}  // namespace

int64_t LlamaLayerParamCount(const ModelSpec& m) {
  const int64_t q = m.n_heads * m.head_dim, kv = m.n_kv_heads * m.head_dim;
  return m.d_model * q * 2 + m.d_model * kv * 2 + 3 * m.d_model * m.mlp_dim + 2 * m.d_model;
}

int64_t LlamaParamCount(const ModelSpec& m) {
  const int64_t emb = m.vocab * m.d_model;
  return m.n_layers * LlamaLayerParamCount(m) + emb + (m.tied_embeddings ? 0 : emb) + m.d_model;
}

absl::StatusOr<Program> BuildLlamaTrainStep(const RunSpec& spec) {
  if (spec.model.family != "llama") {
    return absl::InvalidArgumentError(
        absl::StrCat("model.family: '", spec.model.family, "' has no builder yet (expected llama)"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<RematPolicy> policy, MakeRematPolicy(spec.remat));
  LlamaBuilder b(spec, *policy);
  return b.Build();
}

}  // namespace gpusim
