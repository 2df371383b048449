// The llama step's scan structure: residual and gradient stacks of the remat
// plan's saved set, host offload, and the param_scan_axis transposes. See
// llama_builder.h.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "models/llama_builder.h"
#include "sim/ir/loop_slice.h"

namespace gpusim {
namespace llama_internal {

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

// The saved set of a layer is the plan's (sim/remat/apply.h Note [Saved
// set]): the layer input (the scan carry) is always saved; offloaded values
// are residuals too, kept in pinned host memory (Note [Host offload]).

// Flax nn.scan (flax/core/axes_scan.py transpose_to_front): stacked params
// whose layer axis is not 0 are transposed to put it first before the
// scan — a full copy, while the untransposed originals stay live as the
// donated train state.
void LlamaBuilder::PrepareScanSources() {
  for (Param& p : params_) {
    if (!p.per_layer) continue;
    p.scan_source = p.value;
    if (scan_axis_ == 0 || !scan_) continue;
    const Tensor& v = b_.tensor(p.value);
    TensorId t = b_.AddTensor(
        v.name + ".layers_first", Stacked0(Shard(p)), v.dtype, Role::kParameter,
        Origin{absl::StrFormat("transposed copy of stacked params (param_scan_axis=%d)", scan_axis_), p.name});
    b_.AddOp("transpose_to_front." + p.name, OpKind::kTranspose, {p.value}, {t}, 0);
    p.scan_source = t;
  }
}

// Counts the requests for zero-initialised stacks of each shape, in the
// order Build() will make them.
void LlamaBuilder::PlanZeroStacks() {
  if (!rolled_) return;
  auto count = [&](std::vector<int64_t> shape, DType dt) { ++zero_uses_[{std::move(shape), dt}]; };
  for (const Param& p : params_) {
    if (p.per_layer && ParamResidualDType(p).has_value()) count(Stacked0(Shard(p)), *ParamResidualDType(p));
  }
  for (const std::string& r : plan_.saved) {
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
TensorId LlamaBuilder::ZeroStack(const std::string& name, std::vector<int64_t> shape, DType dt, Role role,
                                 const Origin& origin) {
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
    if (origin.subject.empty()) b_.tensor(t).origin_kind.clear();  // the origin is its own kind
    b_.AddOp(name + ".init", OpKind::kElementwise, {}, {t}, 0);
    return t;
  }
  Tensor& t = b_.tensor(bufs[used]);
  t.name = name;
  t.role = role;
  t.origin = origin.Text();
  t.origin_kind = origin.subject.empty() ? "" : origin.kind;  // else the whole origin is its kind
  if (bufs.size() > 1) {
    absl::StrAppend(&t.origin, "; zero-initialised by one fused broadcast with ", bufs.size() - 1,
                    " other stack(s) of this shape (HloCSE + CopyFusion), so allocated before the first of them");
  }
  return bufs[used];
}

// The dtype of a param's saved per-layer residual (see Note [Param
// residual stacks]); nullopt when the slice is forwarded.
std::optional<DType> LlamaBuilder::ParamResidualDType(const Param& p) const {
  const bool is_norm = p.full.size() == 1;
  if (!plan_.no_remat || is_norm) return std::nullopt;
  return cdt_;
}

std::pair<std::vector<int64_t>, DType> LlamaBuilder::ResidualShape(const std::string& r) const {
  if (const LayerValue* f = graph_.Find(r)) return {f->shape, f->dtype};
  return {Rs(), cdt_};  // "x", the carry
}

// Rolled scan: every saved value is an extensive residual, stacked [L, ...]
// in a buffer preallocated before the loop and written in place each
// iteration (jax loops.py _scan_partial_eval; carries are never forwarded).
void LlamaBuilder::AllocResidualStacks() {
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
        Origin{absl::StrFormat("residual stack of layer parameters (%s, %s)", std::string(DTypeName(*dt)),
                               "the bf16 cast each dot saves"),
               p.name});
  }
  for (const std::string& r : plan_.saved) {
    auto [shape, dt] = ResidualShape(r);
    TensorId st = ZeroStack(
        "residual_stack." + r, Stacked0(shape), dt, Role::kResidual,
        Origin{absl::StrFormat("residual stack of %s `%s`, %d x %s", r == "x" ? "carry" : "value", r, L_,
                               FormatBytes(Bytes(Elements(shape) * DTypeSize(dt)))),
               ""});
    stacks_[r] = st;
  }
}

void LlamaBuilder::StoreResiduals(int l, const std::map<std::string, TensorId>& vals) {
  for (Param& p : params_) {
    if (p.residual_stack == kNoTensor) continue;
    const Bytes per_layer_src = Bytes(b_.tensor(p.scan_source).bytes().value() / L_);
    const Bytes per_layer_dst = Bytes(b_.tensor(p.residual_stack).bytes().value() / L_);
    Op& op = b_.AddOp(absl::StrCat("layer", l, ".stack_param_", p.name), OpKind::kDynamicUpdateSlice,
                      {p.residual_stack, p.scan_source}, {}, 0);
    op.bytes_read = per_layer_src;
    op.bytes_written = per_layer_dst;
  }
  for (const std::string& r : plan_.saved) {
    TensorId v = vals.at(r);
    Op& op = b_.AddOp(absl::StrCat("layer", l, ".stack_", r), OpKind::kDynamicUpdateSlice, {stacks_.at(r), v}, {}, 0);
    op.bytes_read = b_.tensor(v).bytes();
    op.bytes_written = b_.tensor(v).bytes();
  }
}

void LlamaBuilder::WaitForPending(Op& op) {
  if (pending_wait_.empty()) return;
  op.control_deps.insert(op.control_deps.end(), pending_wait_.begin(), pending_wait_.end());
  pending_wait_.clear();
}

void LlamaBuilder::OffloadResiduals(int l, const std::map<std::string, TensorId>& vals) {
  for (const std::string& r : plan_.offload) {
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
std::map<std::string, TensorId> LlamaBuilder::ReloadResiduals(int l) {
  std::map<std::string, TensorId> out;
  if (plan_.offload.empty()) return out;
  OpId start = b_.next_op() - 1;
  while (start >= 0 && !IsComputeKind(b_.op(start).kind)) --start;
  for (const std::string& r : plan_.offload) {
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
std::map<std::string, TensorId> LlamaBuilder::LoadResiduals(int) {
  std::map<std::string, TensorId> v;
  for (const std::string& r : plan_.saved) {
    const Tensor& st = b_.tensor(stacks_.at(r));
    b_.set_read_bytes(st.id, Bytes(st.bytes().value() / L_));
    v[r] = st.id;
  }
  return v;
}

// Rolled: the backward loop's stacked outputs (the cotangents of the
// scanned params) are [L, ...] buffers preallocated before it.
void LlamaBuilder::AllocGradStacks() {
  for (Param& p : params_) {
    if (!p.per_layer) continue;
    p.grad_stack = ZeroStack("grad_stack." + p.name, Stacked0(Shard(p)), wdt_, Role::kGradient,
                             Origin{"stacked gradients (backward scan output)", p.name});
  }
}

// After the backward scan: unrolled ys are stacked by concatenation; with
// param_scan_axis != 0 the stacked gradient is transposed back to the
// parameter layout (flax axes_scan.py transpose_from_front).
void LlamaBuilder::FinishStackedGrads() {
  if (!scan_) return;  // per-layer gradients feed the optimizer directly
  for (Param& p : params_) {
    if (!p.per_layer) continue;
    const Tensor& src = b_.tensor(p.scan_source);
    TensorId g = p.grad_stack;
    if (!rolled_) {
      g = b_.AddTensor("grads." + p.name + ".stacked", src.shape, wdt_, Role::kGradient,
                       absl::StrCat("gradient of ", p.name, " stacked by concatenation (unrolled scan)"));
      b_.AddOp("stack_grads." + p.name, OpKind::kCopy, p.grads, {g}, 0);
    }
    if (scan_axis_ != 0) {
      const Tensor& v = b_.tensor(p.value);
      TensorId t = b_.AddTensor(
          "grads." + p.name, v.shape, wdt_, Role::kGradient,
          Origin{absl::StrFormat("gradients transposed back (param_scan_axis=%d)", scan_axis_), p.name});
      b_.AddOp("transpose_from_front." + p.name, OpKind::kTranspose, {g}, {t}, 0);
      g = t;
    }
    p.grads = {g};
  }
}

// Note [Materialised loop slices] (sim/lower/xla/loop_slices.h): in the
// rolled backward body a saved value that a GEMM (a dW = Xᵀ·dY, a
// recomputed dot) or the attention backward (cuDNN custom call, or its
// batched dots) reads is a dynamic-slice of its stack, which lowering
// writes to a buffer of its own each iteration unless its readers fuse it;
// values only elementwise ops read (the norms' inputs, the SwiGLU
// operands) are read from the stack directly.
void LlamaBuilder::MaterialiseResidualSlices(int l, std::map<std::string, TensorId>& v) {
  static const std::set<std::string> kGemmRead = {"act", "h2", "attn_out", "h1", "probs"};
  static const std::set<std::string> kAttentionRead = {"query_proj", "key_proj", "value_proj", "attn_out",
                                                       "attn_lse"};
  for (const std::string& r : plan_.saved) {
    const bool attention = kAttentionRead.count(r) > 0;
    if (!kGemmRead.count(r) && !attention) continue;
    const SliceReader reader =
        attention && m_.attention == "flash" ? SliceReader::kCustomCall : SliceReader::kGemm;
    auto [shape, dt] = ResidualShape(r);
    v[r] = b_.AddLoopSlice(absl::StrCat("layer", l, ".slice_", r), stacks_.at(r), shape, dt, Role::kResidual,
                           {SliceSource::kStackedResidual, r, {{reader, {}}}});
  }
}

}  // namespace llama_internal
}  // namespace gpusim
