"""F.scaled_dot_product_attention as the CUDA build runs it, on the meta device.

Note [SDPA as dispatched on CUDA]
On a CUDA tensor, the CompositeImplicit aten::scaled_dot_product_attention
(aten/src/ATen/native/transformers/attention.cpp scaled_dot_product_attention)
asks _fused_sdp_choice_stub which kernel to run (cuda/sdp_utils.cpp
select_sdp_backend: the first backend of priority_order() whose
can_use_<backend>() passes), converts a boolean attn_mask into an additive
one of the query's dtype (convert_boolean_attn_mask / _cudnn), and calls one
fused aten op -- _scaled_dot_product_cudnn_attention, _flash_attention or
_efficient_attention -- whose autograd formula (tools/autograd/
derivatives.yaml) saves the op's results (output, logsumexp, RNG state), not
the S x S probabilities. On the meta device the stub is the meta one and the
composite falls back to the math decomposition (scores, softmax, dropout
mask, probabilities saved for backward): a 2x over-count on GPT-2.

While recording, `sdpa_override` replaces the composite: it evaluates
select_sdp_backend's rules for a target GPU (compute capability, the
recording torch's cuDNN runtime version, the user's backend enables and
priority order, deterministic algorithms) and calls the same fused aten op
on the meta tensors. The ops' meta kernels (torch/_meta_registrations.py)
give the results' shapes and dtypes, and autograd runs the real backward op,
so the trace holds what the CUDA kernel allocates; transient workspaces are
the device model's (sim/lower/eager/device_memory_sdpa.h). The choice is
evaluated for each architecture class gpusim models (sm70, sm80, sm90,
sm100) and written into the op's facts, so a replay on another device knows
which kernel would run there.

Rules: sdp_utils.cpp at pytorch commit 001f694 (read 2026-12), cross-checked
against what torch 2.11+cu130 (cuDNN 9.19) dispatched on an H200
(validation/h200_2026-12-04/probes.json, 47 calls, and the zoo's Kineto
traces). Three measured facts differ from that commit and are kept as
measured for the versions measured: on torch 2.11 cuDNN ran backward at head
dim 192 and with dropout 0.1 (the commit's check_cudnn_d256_bprop_head_dim
and check_cudnn_dropout would refuse both: applied only from torch 2.12, the
first release after the measured one; where between the two they began is
not pinned), and an attn_mask that requires grad went to the math kernel
(T5's relative position bias), so memory-efficient attention refuses one
too. The rules are those of the recording torch's version unless the
recorder is told another (--cuda-torch-version: the torch of the CUDA build
the step will run on)."""

import math
import os

import torch

MATH, FLASH, EFFICIENT, CUDNN, NONE = 0, 1, 2, 3, 4
NAMES = {MATH: "math", FLASH: "flash", EFFICIENT: "efficient", CUDNN: "cudnn", NONE: "none"}
BY_NAME = {v: k for k, v in NAMES.items()}
# The architecture classes gpusim's devices fall in (compute capability),
# in the order of the op facts (traces/FORMAT.md, SDPA ops).
CLASSES = ((7, 0), (8, 0), (9, 0), (10, 0))
# at::Context::sdp_priority_order's default (aten/src/ATen/Context.h).
DEFAULT_ORDER = (FLASH, EFFICIENT, MATH, CUDNN)


def _version(v):
    out = []
    for part in str(v).split("+")[0].split(".")[:2]:
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits or 0))
    return tuple(out)


class Target:
    """What select_sdp_backend reads from the device and the build."""

    def __init__(self, major, minor, cudnn_version=None, cuda_version=None, torch_version=None):
        self.major, self.minor = major, minor
        self.cudnn = cudnn_version if cudnn_version is not None else (torch.backends.cudnn.version() or 0)
        cuda = cuda_version if cuda_version is not None else (torch.version.cuda or "0")
        self.cuda = _version(cuda)
        self.torch = _version(torch_version or torch.__version__)


class Call:
    """The facts of one SDPA call the rules read (sdp_params)."""

    def __init__(self, q, k, v, mask, dropout_p, is_causal, enable_gqa):
        self.q, self.k, self.v, self.mask = q, k, v, mask
        self.dropout = float(dropout_p)
        self.causal = bool(is_causal)
        self.gqa = bool(enable_gqa)
        self.requires_grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)


def _warn_env(name):
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on", "y")


def prefer_cudnn(t):
    """check_prefer_cudnn_attention: cuDNN first unless
    TORCH_CUDNN_SDPA_DEPRIORITIZED, with cuDNN > 9.15.0 on compute 9.x/10.x
    (CUDA < 13 builds: 9.0/10.0/10.3 only)."""
    if _warn_env("TORCH_CUDNN_SDPA_DEPRIORITIZED"):
        return False
    if not (t.cudnn > 91500 and t.major in (9, 10)):
        return False
    if t.cuda < (13, 0):
        return t.minor in (0, 3)
    return True


def _compiling():
    f = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    return bool(f()) if f is not None else False


# The SDPA settings as last read outside Dynamo's tracing: the torch._C
# getters below cannot be traced (Dynamo breaks the graph on a torch.* op
# returning a non-tensor), so a compiled region's choice uses the settings
# the step's eager code last saw (the recording's start).
_SETTINGS = {}


def priority(t):
    """priority_order(): the user's order (sdpa_kernel(..., set_priority=True))
    when it is not the default, else the default with cuDNN first where
    preferred."""
    get = getattr(torch._C, "_get_sdp_priority_order", None)
    if _compiling():
        order = _SETTINGS.get("order", DEFAULT_ORDER)
    else:
        order = tuple(int(x) for x in get())[:4] if get else DEFAULT_ORDER
        _SETTINGS["order"] = order
    order = tuple(b for b in order if b in NAMES)
    if order == DEFAULT_ORDER and prefer_cudnn(t):
        return (CUDNN, FLASH, EFFICIENT, MATH)
    return order


def enabled():
    if _compiling() and "enabled" in _SETTINGS:
        return dict(_SETTINGS["enabled"])
    b = torch.backends.cuda
    _SETTINGS["enabled"] = {FLASH: b.flash_sdp_enabled(), EFFICIENT: b.mem_efficient_sdp_enabled(),
                            MATH: b.math_sdp_enabled(),
                            CUDNN: b.cudnn_sdp_enabled() if hasattr(b, "cudnn_sdp_enabled") else False}
    return dict(_SETTINGS["enabled"])


def _heads_ok(c, requires_same_num_heads):
    """check_batch_size_and_num_heads_dense (+ check_grouped_query_attention)."""
    q, k, v = c.q, c.k, c.v
    if not (q.shape[0] == k.shape[0] == v.shape[0]):
        return False, "batch sizes differ"
    hq, hk, hv = q.shape[-3], k.shape[-3], v.shape[-3]
    if c.gqa:
        if hk != hv or hq % hk != 0:
            return False, "enable_gqa needs KV heads equal and dividing the query heads"
        return True, ""
    if requires_same_num_heads and not (hq == hk == hv):
        return False, "query and key/value head counts differ without enable_gqa"
    return True, ""


def _common(c):
    if c.q.dim() != 4 or c.k.dim() != 4 or c.v.dim() != 4:
        return "inputs are not 4-D (check_tensor_shapes)"
    if min(c.q.shape[-2], c.k.shape[-2]) == 0:
        return "a zero sequence length (check_nonzero_sequence_lengths_dense)"
    return None


def _mask_shape_ok(c):
    """check_attn_mask_shape."""
    m = c.mask
    if m is None:
        return True, ""
    if m.requires_grad:
        return False, "the attn_mask requires grad"
    B, H, Sq, Sk = c.q.shape[0], c.q.shape[1], c.q.shape[2], c.k.shape[2]
    if m.shape[-2] not in (Sq, 1) or m.shape[-1] not in (Sk, 1):
        return False, "the attn_mask's last two dims do not broadcast to (Sq, Skv)"
    if m.dim() == 2:
        return True, ""
    if m.dim() == 4 and m.shape[0] in (1, B) and m.shape[1] in (1, H):
        return True, ""
    return False, "the attn_mask is not 2-D or a (B|1, H|1, ., .) 4-D one"


def _stride_ok(c, ignore_singleton):
    for t in (c.q, c.k, c.v):
        if t.stride(-1) != 1 and not (ignore_singleton and t.shape[-1] == 1):
            return False
    return True


def can_cudnn(c, t):
    """can_use_cudnn_attention (dense inputs)."""
    if t.cudnn < 90000:
        return "cuDNN runtime %d < 9.0.0" % t.cudnn
    if c.dropout > 0 and 91100 < t.cudnn < 91400:
        return "cuDNN 9.11-9.13 runs no dropout in SDPA"
    why = _common(c)
    if why:
        return why
    if torch.are_deterministic_algorithms_enabled() and not torch.is_deterministic_algorithms_warn_only_enabled():
        return "deterministic algorithms are on (check_cudnn_deterministic)"
    low = (torch.float16, torch.bfloat16) if t.major >= 8 else (torch.float16,)
    if c.q.dtype not in low or c.k.dtype != c.q.dtype or c.v.dtype != c.q.dtype:
        return "dtype %s (check_dtypes_low_precision)" % str(c.q.dtype).replace("torch.", "")
    ok, why = _mask_shape_ok(c)
    if not ok:
        return why
    if not ((8, 0) <= (t.major, t.minor) <= (12, 1)):
        return "compute capability %d.%d outside [8.0, 12.1]" % (t.major, t.minor)
    if c.dropout * 16.0 != math.floor(c.dropout * 16.0) and t.torch >= (2, 12):
        # Not in torch 2.11: GPT-2's attention dropout 0.1 and the probes'
        # ran cuDNN there (validation/h200_2026-12-04).
        return "dropout %g is not a multiple of 1/16 (check_cudnn_dropout)" % c.dropout
    if not _stride_ok(c, True):
        return "a last dimension's stride is not 1"
    ok, why = _heads_ok(c, False)
    if not ok:
        return why
    # check_cudnn_tensor_shapes
    B, H = c.q.shape[0], c.q.shape[1]
    sq, sk, dqk, dv = c.q.shape[2], c.k.shape[2], c.q.shape[3], c.v.shape[3]
    if B > 65535 or H > 65535:
        return "batch or heads > 65535"
    sm90_10x = (t.major == 9 and t.minor == 0) or t.major == 10
    old107 = t.major == 10 and t.minor == 7 and t.cudnn <= 92500
    limit = 128
    if t.torch < (2, 12) and sm90_10x:
        # Measured on torch 2.11 (cuDNN 9.19, H200): head dims 192 and 256
        # ran cuDNN, forward and backward; 512 did not.
        limit = 256
    elif sm90_10x and not old107 and t.cudnn > 92200:
        limit = 256  # kCuDNNFrontendSupportsD256 (cudnn-frontend >= 1.24 in the wheels)
    elif sm90_10x and t.cudnn >= 91100 and dqk == 192 and dv == 128:
        limit = 192
    if dqk > limit or dv > limit:
        return "head dim %d/%d > %d" % (dqk, dv, limit)
    if dqk % 8 or dv % 8:
        return "head dim not a multiple of 8"
    if sk == 1:
        return "key/value sequence length 1"
    if c.dropout != 0.0 and sq == 1:
        return "query sequence length 1 with dropout"
    if c.requires_grad and limit == 256 and t.torch >= (2, 12):
        if not ((dqk <= 128 and dv <= 128) or (dqk, dv) in ((192, 128), (256, 256))):
            return "no cuDNN backward for head dims %d/%d (check_cudnn_d256_bprop_head_dim)" % (dqk, dv)
    return None


def can_flash(c, t):
    """can_use_flash_attention (dense inputs, no FA3)."""
    why = _common(c)
    if why:
        return why
    if c.mask is not None:
        return "an attn_mask (check_for_attn_mask)"
    dq, dk, dv = c.q.shape[-1], c.k.shape[-1], c.v.shape[-1]
    if not (dq == dk == dv) or dq > 256:
        return "head dims %d/%d/%d not equal and <= 256" % (dq, dk, dv)
    if not ((8, 0) <= (t.major, t.minor) <= (12, 1)):
        return "compute capability %d.%d outside [8.0, 12.1]" % (t.major, t.minor)
    if c.requires_grad and ((8, 6) <= (t.major, t.minor) <= (8, 9) or (12, 0) <= (t.major, t.minor) <= (12, 1)):
        if not (dq <= 192 or (c.dropout == 0 and dq > 224)):
            return "training with head dim %d on sm%d%d" % (dq, t.major, t.minor)
    if c.causal and c.q.shape[-2] != c.k.shape[-2]:
        return "is_causal with seqlen_q != seqlen_k"
    low = (torch.float16, torch.bfloat16) if t.major >= 8 else (torch.float16,)
    if c.q.dtype not in low or c.k.dtype != c.q.dtype or c.v.dtype != c.q.dtype:
        return "dtype %s" % str(c.q.dtype).replace("torch.", "")
    ok, why = _heads_ok(c, True)
    if not ok:
        return why
    if not _stride_ok(c, True):
        return "a last dimension's stride is not 1"
    return None


def _gemm_alignment(c, t):
    """minimum_gemm_alignment."""
    half = c.q.dtype in (torch.float16, torch.bfloat16)
    use_tc = t.major >= 8 or (t.major >= 7 and half)
    mn = 4 if t.major >= 8 else 1
    if use_tc:
        mn = max(mn, 128 // (16 if half else 32))
    return mn


def can_efficient(c, t):
    """can_use_mem_efficient_attention (dense inputs)."""
    if not ((5, 0) <= (t.major, t.minor) <= (12, 1)):
        return "compute capability %d.%d outside [5.0, 12.1]" % (t.major, t.minor)
    why = _common(c)
    if why:
        return why
    align = _gemm_alignment(c, t)
    dq, dk, dv = c.q.shape[-1], c.k.shape[-1], c.v.shape[-1]
    if dq != dk or dq % align or dv % align or dq <= 0 or dv <= 0:
        return "head dims %d/%d not multiples of %d" % (dq, dv, align)
    if t.major >= 8 and not _compiling():
        # (In a compiled region Inductor's SDPA fallback aligns its inputs,
        # lowering.py sdpa_constraint; Dynamo cannot trace storage_offset.)
        nbytes = align * c.q.element_size()
        for x in (c.q, c.k, c.v):
            if x.numel() and (x.storage_offset() * x.element_size()) % nbytes:
                return "a storage offset not aligned to %d bytes" % nbytes
    ok, why = _heads_ok(c, True)
    if not ok:
        return why
    if not _stride_ok(c, False):
        return "a last dimension's stride is not 1"
    if c.mask is not None and c.mask.requires_grad:
        # Measured (torch 2.11, H200: T5's position bias went to the math
        # kernel); not in sdp_utils.cpp at 001f694's can_use_mem_efficient_attention.
        return "the attn_mask requires grad"
    ok_types = (torch.float16, torch.float32, torch.bfloat16) if t.major >= 8 else (torch.float16, torch.float32)
    if c.q.dtype not in ok_types or c.k.dtype != c.q.dtype or c.v.dtype != c.q.dtype:
        return "dtype %s" % str(c.q.dtype).replace("torch.", "")
    return None


CHECKS = {CUDNN: can_cudnn, FLASH: can_flash, EFFICIENT: can_efficient}


def select(c, t, force=None):
    """(backend, why): select_sdp_backend for call `c` on target `t`; `force`
    (a backend code) restricts the enabled set as sdpa_kernel([backend]) does."""
    en = enabled()
    if force is not None:
        en = {b: (b == force) for b in en}
    if not any(en.values()):
        return NONE, "every SDPA backend is disabled"
    reasons = []
    for b in priority(t):
        if b == MATH:
            if en[MATH]:
                return MATH, "no fused kernel applies: " + ("; ".join(reasons) or "math first in the order")
            continue
        if not en.get(b):
            reasons.append("%s disabled" % NAMES[b])
            continue
        why = CHECKS[b](c, t)
        if why is None:
            return b, "first in %s that applies%s" % (",".join(NAMES[x] for x in priority(t)),
                                                      (" (" + "; ".join(reasons) + ")") if reasons else "")
        reasons.append("%s: %s" % (NAMES[b], why))
    return NONE, "no kernel: " + "; ".join(reasons)


def facts(c, per_class, cudnn_version):
    """The op facts of a fused SDPA event (traces/FORMAT.md)."""
    q, k, v = c.q, c.k, c.v
    return [int(q.shape[0]), int(q.shape[1]), int(k.shape[1]), int(q.shape[2]), int(k.shape[2]),
            int(q.shape[3]), int(v.shape[3]), int(q.element_size()), int(c.causal),
            int(round(c.dropout * 1e6)), int(c.requires_grad), int(c.mask is not None)] + \
        [int(x) for x in per_class] + [int(cudnn_version)]


class Dispatcher:
    """Runs F.scaled_dot_product_attention as attention.cpp does on CUDA for
    the recording's target; remembers each fused call's facts (by its
    logsumexp's storage, so the backward op finds them) and the choices."""

    def __init__(self, target, force=None):
        self.target = target
        self.force = force
        self.by_lse = {}     # storage _cdata -> facts
        self.pending = None  # facts of the fused op about to run
        self.counts = {}     # (backend, why) -> calls in the recorded step
        self.rec = None      # the Recorder: counts only inside its window
        if hasattr(torch, "compile"):  # the settings compiled regions use (_SETTINGS)
            enabled()
            priority(target)

    def _per_class(self, c):
        out = []
        for major, minor in CLASSES:
            t = Target(major, minor, self.target.cudnn, None, None)
            t.cuda, t.torch = self.target.cuda, self.target.torch
            out.append(select(c, t, self.force)[0])
        return out

    def __call__(self, orig, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                 enable_gqa=False):
        c = Call(q, k, v, attn_mask, dropout_p, is_causal, enable_gqa)
        backend, why = select(c, self.target, self.force)
        key = (NAMES[backend], why)
        tracing = _compiling()  # inside a compiled region: counted per graph, not per call
        if not tracing and (self.rec is None or self.rec.in_window):
            self.counts[key] = self.counts.get(key, 0) + 1
        if backend == NONE:
            raise RuntimeError("scaled_dot_product_attention: no kernel on the target (%s)" % why)
        kw = {"scale": scale} if scale is not None else {}
        mask = attn_mask
        if mask is not None and mask.dtype == torch.bool:
            mask = _bool_to_additive(mask, q.dtype)
        if backend == MATH:
            return math_attention(q, k, v, mask, dropout_p, is_causal, scale, enable_gqa)[0]
        self.pending = None if tracing else facts(c, self._per_class(c), self.target.cudnn)
        try:
            lse_grad = c.requires_grad
            if backend == CUDNN:
                r = torch.ops.aten._scaled_dot_product_cudnn_attention(
                    q, k, v, mask, lse_grad, dropout_p, is_causal, False, **kw)
                out, lse = r[0], r[1]
            elif backend == FLASH:
                og = q.shape[-1]
                sc = scale if scale is not None else 1.0 / math.sqrt(og)
                pad = (-og) % 8
                qp, kp, vp = q, k, v
                if pad:  # pad_last_dim<8>: a padded copy of each input
                    qp, kp, vp = (torch.nn.functional.pad(x, (0, pad)) for x in (q, k, v))
                r = torch.ops.aten._scaled_dot_product_flash_attention(qp, kp, vp, dropout_p, is_causal, False,
                                                                       scale=sc)
                out, lse = r[0], r[1]
                if pad:
                    out = out[..., :og]
            else:
                if mask is not None:
                    mask = _preprocess_mask(mask, q, k)
                r = torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, mask, lse_grad, dropout_p,
                                                                           is_causal, **kw)
                out, lse = r[0], r[1]
        finally:
            facts_ = self.pending
            self.pending = None
        if lse is not None and lse.numel() and not tracing:
            self.by_lse[lse.untyped_storage()._cdata] = facts_
        return out

    # (q, k, v, mask, dropout, causal) argument positions of each fused op,
    # from its schema (native_functions.yaml).
    _ARGS = {"_scaled_dot_product_flash_attention": (0, 1, 2, None, 3, 4),
             "_scaled_dot_product_efficient_attention": (0, 1, 2, 3, 5, 6),
             "_scaled_dot_product_cudnn_attention": (0, 1, 2, 3, 5, 6),
             "_scaled_dot_product_flash_attention_backward": (1, 2, 3, None, 10, 11),
             "_scaled_dot_product_efficient_attention_backward": (1, 2, 3, 4, 9, 11),
             "_scaled_dot_product_cudnn_attention_backward": (1, 2, 3, 8, 13, 14)}

    def compiled_facts(self, name, args, requires_grad):
        """(op, dims) of a fused SDPA kernel in a compiled graph's plan
        (inductor_plan.py: its arguments as meta tensors and values), whose
        forward and backward are separate graphs: each call's facts come
        from its own arguments. `requires_grad`: the forward belongs to a
        training graph (logsumexp kept for the backward). None: not a fused
        SDPA op, or arguments not readable."""
        pos = self._ARGS.get(name)
        if pos is None:
            return None
        try:
            q, k, v = args[pos[0]], args[pos[1]], args[pos[2]]
            mask = args[pos[3]] if pos[3] is not None and pos[3] < len(args) else None
            dropout = args[pos[4]] if pos[4] < len(args) else 0.0
            causal = args[pos[5]] if pos[5] < len(args) else False
        except IndexError:
            return None
        if not all(isinstance(x, torch.Tensor) and x.dim() == 4 for x in (q, k, v)):
            return None
        c = Call.__new__(Call)
        c.q, c.k, c.v = q, k, v
        c.mask = mask if isinstance(mask, torch.Tensor) else None
        c.dropout = float(dropout or 0.0)
        c.causal = bool(causal)
        c.gqa = False
        c.requires_grad = bool(requires_grad or name.endswith("_backward"))
        return name, facts(c, self._per_class(c), self.target.cudnn)

    def facts_for(self, name, args):
        """The facts of a fused SDPA op's compute event: the forward's from
        `pending`, the backward's from its logsumexp argument."""
        if name.endswith("_backward"):
            lse = args[5] if name != "_scaled_dot_product_efficient_attention_backward" else args[6]
            if isinstance(lse, torch.Tensor):
                return self.by_lse.get(lse.untyped_storage()._cdata)
            return None
        return self.pending


def _bool_to_additive(mask, dtype):
    """convert_boolean_attn_mask(_cudnn) (attention.cpp): where(!mask, -inf,
    0) in the query's dtype, a new tensor of the mask's shape."""
    return torch.where(mask.logical_not(), torch.tensor(-math.inf, dtype=dtype, device=mask.device),
                       torch.tensor(0.0, dtype=dtype, device=mask.device))


def math_attention(q, k, v, mask, dropout_p, is_causal, scale, enable_gqa):
    """attention.cpp _scaled_dot_product_attention_math on a CUDA tensor, op
    for op, so its allocations and saved tensors are the GPU's (measured on
    torch 2.11: validation/h200_2026-12-04/kineto/t5_test.pt.trace.json.gz):
    half/bf16 inputs upcast to fp32 unless
    allow_fp16_bf16_reduction_math_sdp; q and k^T each scaled by
    sqrt(scale); the causal mask built and converted; GQA keys and values
    repeated (pre_process_group_query_attention_input); the mask added in
    place; _safe_softmax; dropout as native_dropout (a bool mask: the
    composite's at::dropout on a CUDA tensor); the output and the
    probabilities cast back. Returns (output, probabilities)."""
    origin = q.dtype
    allowed = getattr(torch.backends.cuda, "fp16_bf16_reduction_math_sdp_allowed", lambda: False)()
    if origin in (torch.float16, torch.bfloat16) and not allowed:
        q, k, v = q.to(torch.float32), k.to(torch.float32), v.to(torch.float32)
    sc = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    factor = math.sqrt(abs(sc))
    qs = q * (-factor if sc < 0 else factor)
    if is_causal:
        L, S = q.shape[-2], k.shape[-2]
        mask = _bool_to_additive(torch.ones(L, S, dtype=torch.bool, device=q.device).tril(), qs.dtype)
    if enable_gqa and k.shape[-3] != q.shape[-3]:
        rep = q.shape[-3] // k.shape[-3]
        k = k.repeat_interleave(rep, dim=-3)
        v = v.repeat_interleave(rep, dim=-3)
    attn = torch.matmul(qs, k.transpose(-2, -1) * factor)
    if mask is not None:
        attn.add_(mask)
    attn = torch.ops.aten._safe_softmax(attn, -1) if hasattr(torch.ops.aten, "_safe_softmax") \
        else torch.softmax(attn, -1)
    if dropout_p > 0.0:
        attn = torch.ops.aten.native_dropout(attn, float(dropout_p), True)[0]
    out = torch.matmul(attn, v)
    if out.dtype != origin:
        return out.to(origin), attn.to(origin)
    return out, attn


def _preprocess_mask(mask, q, k):
    """attention.cpp preprocess_mask: the bias padded to a multiple of 16 in
    its last dim (pad_bias<mem_eff_alignment>), sliced back and expanded to
    (B, H, Sq, Skv)."""
    align = 16
    last = mask.shape[-1]
    if last % align:
        pad = (-last) % align
        mask = torch.nn.functional.pad(mask, (0, pad))[..., :last]
    return mask.expand(q.shape[0], q.shape[1], q.shape[2], k.shape[2]) if mask.dim() == 4 else \
        mask.expand(q.shape[0], q.shape[1], q.shape[2], k.shape[2])


FUSED_OPS = ("_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention",
             "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention_backward",
             "_scaled_dot_product_flash_attention_backward", "_scaled_dot_product_efficient_attention_backward")
# Results that live on the host on CUDA: _efficient_attention_forward's
# philox seed and offset are CPU scalars outside graph capture
# (attention.cpp / attention_backward.cu: at::scalar_tensor(..., kLong) or
# at::empty({}, kLong) without a device); the meta kernel puts them on meta.
HOST_RESULTS = {"_scaled_dot_product_efficient_attention": (2, 3)}


DEFAULT_DEVICE = "h100-sxm-80gb"


def device_file(device):
    """(path, label) of a gpusim device: a name (configs/devices/NAME.yaml
    of the source tree beside this package, or of the installed gpusim
    package beside it, gpusim/data) or a device YAML's path."""
    name = device or DEFAULT_DEVICE
    path = name
    if not os.path.isfile(path):
        here = os.path.dirname(os.path.abspath(__file__))
        for root in (os.path.join(here, "..", "..", "configs", "devices"),
                     os.path.join(here, "..", "gpusim", "data", "configs", "devices"),
                     os.path.join(here, "..", "..", "share", "gpusim", "configs", "devices")):
            cand = os.path.join(root, name + ".yaml")
            if os.path.isfile(cand):
                path = cand
                break
        else:
            raise ValueError("--device %s: no such gpusim device (configs/devices/%s.yaml) or device file"
                             % (name, name))
    return path, os.path.splitext(os.path.basename(path))[0]


def target_for(device, torch_version=None):
    """(name, Target) for `device` (device_file); its compute_capability is
    what select_sdp_backend reads."""
    import re
    path, label = device_file(device)
    with open(path) as f:
        text = f.read()
    m = re.search(r'^compute_capability:\s*"?(\d+)\.(\d+)"?', text, re.M)
    if not m:
        raise ValueError("--device %s: %s has no compute_capability \"MAJOR.MINOR\"" % (label, path))
    return label, Target(int(m.group(1)), int(m.group(2)), torch_version=torch_version)
