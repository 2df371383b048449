"""CUDA autocast on the meta device.

Meta tensors have no Autocast dispatch key of their own, so
torch.autocast("cuda") cannot touch them (and on a machine without a CUDA
driver PyTorch disables it with a warning). While recording in meta mode,
torch.autocast / torch.amp.autocast / torch.cuda.amp.autocast for device
type "cuda" are replaced by AutocastCuda, which applies CUDA autocast's op
policies above autograd (a TorchFunctionMode), so the casts are recorded by
autograd exactly as the real ones are (ToCopyBackward nodes, the cast copies
saved for backward).

Op lists: PyTorch aten/src/ATen/autocast_mode.cpp, TORCH_LIBRARY_IMPL(aten,
AutocastCUDA, m): lower_precision_fp (cast floating inputs to the autocast
dtype), fp32 (cast to float32), fp32_set_opt_dtype (reductions run with
dtype=float32 when an input is lower precision and no dtype is given),
promote (cast to the widest floating input). cross_entropy has no autocast
kernel: its C++ decomposition runs under autocast op by op
(_cross_entropy_under_autocast).

Cast cache (autocast_mode.cpp cached_cast): a leaf tensor that requires
grad (a parameter) is cast once per outermost autocast region and the cast
is kept until that region exits (clear_cache), so each parameter's
low-precision copy stays allocated through the region.
"""

import contextlib
import types

import torch
from torch.overrides import TorchFunctionMode

LOWER = {"conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d", "conv_transpose2d",
         "conv_transpose3d", "convolution", "_convolution", "prelu", "addmm", "addmv", "addr",
         "matmul", "__matmul__", "__rmatmul__", "einsum", "mm", "mv", "linalg_vecdot", "linear",
         "addbmm", "baddbmm", "bmm", "chain_matmul", "linalg_multi_dot", "lstm_cell", "gru_cell",
         "rnn_tanh_cell", "rnn_relu_cell", "scaled_dot_product_attention"}
FP32 = {"acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
        "reciprocal", "rsqrt", "sinh", "tan", "pow", "__pow__", "__rpow__", "softplus",
        "layer_norm", "group_norm", "frobenius_norm", "nuclear_norm", "cosine_similarity",
        "poisson_nll_loss", "cosine_embedding_loss", "nll_loss", "nll_loss2d",
        "hinge_embedding_loss", "kl_div", "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss",
        "margin_ranking_loss", "multilabel_margin_loss", "soft_margin_loss",
        "triplet_margin_loss", "multi_margin_loss", "binary_cross_entropy_with_logits", "dist",
        "pdist", "cdist", "renorm", "logsumexp"}
FP32_OPT_DTYPE = {"prod", "softmax", "log_softmax", "cumprod", "cumsum", "linalg_vector_norm",
                  "linalg_matrix_norm", "sum"}
PROMOTE = {"addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "grid_sampler",
           "index_put", "scatter_add", "tensordot", "cat", "stack"}

_LOW = (torch.float16, torch.bfloat16)
_FLOAT = (torch.float16, torch.bfloat16, torch.float32)


class _State:
    def __init__(self):
        self.stack = []   # (enabled, dtype) per open AutocastCuda
        self.cache = {}   # id(leaf) -> (leaf, cast)
        self.mode = None
        self.sdpa = None  # sdpa.Dispatcher while recording on meta
        self.active = False  # inside cuda_autocast (recording on meta)


def _mode_on_stack():
    try:
        from torch.overrides import _get_current_function_mode_stack
    except ImportError:  # torch 1.13: one mode slot, no stack to look at
        return True
    return any(isinstance(m, _Mode) for m in _get_current_function_mode_stack())


def enabled_dtype():
    """(enabled, dtype) of the innermost emulated CUDA autocast region."""
    if _STATE.stack:
        return _STATE.stack[-1]
    return False, torch.float16


_STATE = _State()


def _fname(func):
    return getattr(func, "__name__", "")


class _Mode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = _fname(func)
        if not _STATE.stack or not _STATE.stack[-1][0]:
            return _call(func, name, args, kwargs)
        dtype = _STATE.stack[-1][1]
        if name == "cross_entropy":
            out = _cross_entropy_under_autocast(args, kwargs)
            if out is not None:
                return out
        if name in LOWER:
            args, kwargs = _cast_all(args, kwargs, dtype)
        elif name in FP32:
            args, kwargs = _cast_all(args, kwargs, torch.float32)
        elif name in FP32_OPT_DTYPE:
            if kwargs.get("dtype") is None and any(_is_low(a) for a in _flat(args)):
                kwargs = dict(kwargs, dtype=torch.float32)
        elif name in PROMOTE:
            floats = [a.dtype for a in _flat((args, kwargs)) if _is_float(a)]
            if floats and len(set(floats)) > 1:
                widest = torch.float32 if torch.float32 in floats else floats[0]
                args, kwargs = _cast_all(args, kwargs, widest)
        return _call(func, name, args, kwargs)


def _cross_entropy_under_autocast(args, kwargs):
    """aten/src/ATen/native/LossNLL.cpp cross_entropy_loss (CompositeImplicit,
    no AutocastCUDA kernel) as CUDA autocast runs its decomposition: a
    log_softmax over the class dim in the input's own dtype (it passes
    self.scalar_type(), so fp32_set_opt_dtype does not apply: the log
    probabilities stay bf16), then nll_loss, an fp32-policy op, on an fp32
    copy of them; with label_smoothing > 0
    (cross_entropy_loss_label_smoothing) also the class-dim sum, whose
    fp32_set_opt_dtype policy sums the low-precision log probabilities in
    fp32. Measured: BERT's masked-LM loss on an H200 (torch 2.11,
    validation/h200_2026-12-04/kineto/bert_gpu.pt.trace.json.gz: log_softmax
    on BFloat16 with dtype 15, then nll_loss's _to_copy to float). None:
    not a low-precision input, or class probabilities as the target (the
    composite's other branch): the caller's default."""
    import torch.nn.functional as F
    names = ("input", "target", "weight", "size_average", "ignore_index", "reduce", "reduction",
             "label_smoothing")
    vals = dict(zip(names, args))
    vals.update(kwargs)
    x, target = vals.get("input"), vals.get("target")
    if not (isinstance(x, torch.Tensor) and _is_low(x) and isinstance(target, torch.Tensor)) or \
            target.is_floating_point() or vals.get("size_average") is not None or vals.get("reduce") is not None:
        return None
    dim = 1 if x.dim() >= 2 else 0
    ignore = vals.get("ignore_index", -100)
    reduction = vals.get("reduction", "mean")
    weight = vals.get("weight")
    if weight is not None:
        weight = weight.float() if weight.dtype != torch.float32 else weight
    smoothing = float(vals.get("label_smoothing", 0.0) or 0.0)
    logp = torch.log_softmax(x, dim, dtype=x.dtype)
    nll = F.nll_loss(logp.float(), target, weight, ignore_index=ignore, reduction=reduction)
    if smoothing <= 0.0:
        return nll
    smooth = -(logp.sum(dim, dtype=torch.float32) if weight is None else
               (logp.float() * weight.view([-1] + [1] * (x.dim() - 2))).sum(dim))
    smooth = smooth.masked_fill(target == ignore, 0.0)
    if reduction == "mean":
        denom = (target != ignore).sum() if weight is None else None
        smooth = smooth.sum() / denom if denom is not None else smooth.mean()
    elif reduction == "sum":
        smooth = smooth.sum()
    n = x.shape[dim]
    return (1 - smoothing) * nll + smooth * (smoothing / n)


def _call(func, name, args, kwargs):
    """func(*args, **kwargs), with F.scaled_dot_product_attention run as the
    CUDA build dispatches it when a dispatcher is installed (sdpa.py; the
    autocast casts above it, as AutocastCUDA wraps the composite), and
    dropout as on CUDA (_dropout_as_on_cuda)."""
    if name == "scaled_dot_product_attention" and _STATE.sdpa is not None:
        return _STATE.sdpa(func, *args, **kwargs)
    if name == "dropout" and _STATE.sdpa is not None:
        out = _dropout_as_on_cuda(args, kwargs)
        if out is not None:
            return out
    if _STATE.active and isinstance(func, types.FunctionType) and \
            getattr(func, "__module__", "") == "torch.nn.functional" and not _compiling():
        # (Dynamo, tracing a compiled region through this mode, inlines the
        # functional's body itself: Note [torch.compile on the CPU].)
        with _functional_body():
            return func(*args, **kwargs)
    return func(*args, **kwargs)


def _compiling():
    f = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    return bool(f()) if f is not None else False


@contextlib.contextmanager
def _functional_body():
    """Note [Calls inside a Python functional]
    A TorchFunctionMode is popped while its handler runs, so the torch calls
    inside a Python function of torch.nn.functional that dispatched to it
    (F.multi_head_attention_forward: its linear projections, softmax and
    scaled_dot_product_attention) would run unseen -- uncast, and SDPA by the
    meta stub -- where CUDA autocast, which works per aten op, casts each.
    So the body runs with the mode pushed again and torch.nn.functional's
    has_torch_function checks off (the function already dispatched once):
    its C calls reach the mode, its nested Python functionals run their
    bodies, whose C calls reach it too."""
    import torch.nn.functional as F
    names = ("has_torch_function", "has_torch_function_unary", "has_torch_function_variadic")
    saved = {n: getattr(F, n) for n in names if hasattr(F, n)}
    for n in saved:
        setattr(F, n, lambda *a, **k: False)
    mode = _Mode()
    mode.__enter__()
    try:
        yield
    finally:
        mode.__exit__(None, None, None)
        for n, f in saved.items():
            setattr(F, n, f)


def _dropout_as_on_cuda(args, kwargs):
    """aten/src/ATen/native/Dropout.cpp dropout(): on a CUDA tensor with
    training on and 0 < p < 1 (is_fused_kernel_acceptable) the
    out-of-place dropout is native_dropout, whose saved mask is bool
    (cuda/Dropout.cu); elsewhere _dropout_impl draws a noise tensor of the
    input's dtype (4 bytes an element in fp32) and keeps it for backward.
    The meta device takes the second path, so F.dropout / nn.Dropout /
    torch.dropout call native_dropout here, as on CUDA. In-place dropout
    (dropout_) takes _dropout_impl on CUDA too: unchanged. None: not this case."""
    names = ("input", "p", "training", "inplace")
    vals = dict(zip(names, args))
    vals.update({k: v for k, v in kwargs.items() if k in names or k == "train"})
    x = vals.get("input")
    p = vals.get("p", 0.5)
    train = vals.get("training", vals.get("train", True))
    if vals.get("inplace", False) or not isinstance(x, torch.Tensor) or x.device.type != "meta":
        return None
    if not (train and 0.0 < float(p) < 1.0 and x.numel() > 0):
        return None
    try:
        return torch.ops.aten.native_dropout(x, float(p), True)[0]
    except (NotImplementedError, RuntimeError):
        return None  # no meta kernel for native_dropout in this torch: the composite's path


def _flat(x):
    from torch.utils._pytree import tree_flatten
    return tree_flatten(x)[0]


def _is_float(a):
    return isinstance(a, torch.Tensor) and a.dtype in _FLOAT and a.device.type == "meta"


def _is_low(a):
    return isinstance(a, torch.Tensor) and a.dtype in _LOW


def _cast(a, dtype):
    if not _is_float(a) or a.dtype == dtype:
        return a
    if a.is_leaf and a.requires_grad:
        hit = _STATE.cache.get(id(a))
        if hit is not None and hit[0] is a:
            return hit[1]
        c = a.to(dtype)
        _STATE.cache[id(a)] = (a, c)
        return c
    return a.to(dtype)


def _cast_all(args, kwargs, dtype):
    """Casts every floating argument, the last first: autocast's
    WrapFunction_ casts them in one call's argument list
    (`Redispatch(cached_cast(to_type, args, device_type)...)`,
    aten/src/ATen/autocast_mode.h), which GCC, PyTorch's Linux compiler,
    evaluates right to left. Checked against CUDA autocast itself under
    FakeTensorMode (tests/python/test_gpusim_torch.py FakeModeTest)."""
    from torch.utils._pytree import tree_flatten, tree_unflatten
    leaves, spec = tree_flatten((args, kwargs))
    for i in reversed(range(len(leaves))):
        leaves[i] = _cast(leaves[i], dtype)
    return tree_unflatten(leaves, spec)


class AutocastCuda:
    """What torch.autocast("cuda", dtype, enabled, cache_enabled) does, for
    meta tensors. cache_enabled=False is refused (not modelled)."""

    def __init__(self, dtype=None, enabled=True, cache_enabled=None):
        if dtype is None:
            dtype = torch.float16  # torch.get_autocast_gpu_dtype()'s default
        if dtype not in _LOW:
            raise RuntimeError("gpusim_torch autocast emulation: dtype %s (expected torch.float16 "
                               "or torch.bfloat16, as CUDA autocast)" % dtype)
        if cache_enabled is False:
            raise RuntimeError("gpusim_torch autocast emulation: cache_enabled=False is not modelled")
        self.dtype = dtype
        self.enabled = bool(enabled)

    def __enter__(self):
        _STATE.stack.append((self.enabled, self.dtype))
        # A region opened where the recording's _Mode is not on the torch
        # function mode stack -- the autograd engine runs backward, and so a
        # checkpointed block's recompute, without the caller's torch function
        # modes -- brings it back for its duration, so the recompute is cast
        # (and dispatched) as its forward was.
        self._pushed = None
        if _STATE.active and not _mode_on_stack():
            self._pushed = _Mode()
            self._pushed.__enter__()
        return self

    def __exit__(self, *exc):
        if self._pushed is not None:
            self._pushed.__exit__(*exc)
            self._pushed = None
        _STATE.stack.pop()
        if not any(e for e, _ in _STATE.stack):
            _STATE.cache.clear()  # clear_cache() on leaving the outermost region
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def inner(*a, **k):
            with AutocastCuda(self.dtype, self.enabled):
                return fn(*a, **k)
        return inner


# Note [The autocast state the emulation reports]
# Code that saves and restores autocast reads the state through torch's
# functions, not through the context manager: torch.utils.checkpoint
# (_get_autocast_kwargs at forward, `torch.amp.autocast(device_type=...,
# **kwargs)` around the recompute, for the device type of the inputs,
# _infer_device_type: "meta" here), transformers' maybe_autocast, user code.
# While recording on meta the emulated region is the CUDA autocast state, so
# torch.is_autocast_enabled / get_autocast_dtype / get_autocast_gpu_dtype /
# amp.is_autocast_available answer from it for device types "cuda" and
# "meta", and torch.autocast("meta", ...) opens an emulated region: a
# checkpointed block is recomputed under the autocast its forward ran in, as
# on a GPU. Other device types go to torch's own functions.
_EMULATED = ("cuda", "meta")


def _state_patches(orig):
    def is_available(device_type):
        return True if device_type in _EMULATED else orig["is_autocast_available"](device_type)

    def is_enabled(device_type=None):
        if device_type is None or device_type in _EMULATED:
            return enabled_dtype()[0]
        return orig["is_autocast_enabled"](device_type)

    def get_dtype(device_type):
        if device_type in _EMULATED:
            return enabled_dtype()[1] if _STATE.stack else torch.float16
        return orig["get_autocast_dtype"](device_type)

    def get_gpu_dtype():
        return get_dtype("cuda")

    # Code that saves the state through the readers above and restores it
    # through the setters (Dynamo's OutputGraph.save_global_state around a
    # traced frame, then its GlobalStateGuard check) writes back the
    # emulated state: a write equal to it leaves torch's own state alone.
    def set_enabled(*a):
        device_type, value = (a[0], a[1]) if len(a) == 2 else ("cuda", a[0])
        if device_type in _EMULATED and bool(value) == enabled_dtype()[0]:
            return None
        return orig["set_autocast_enabled"](*a)

    def set_dtype(device_type, dtype):
        if device_type in _EMULATED and dtype == get_dtype(device_type):
            return None
        return orig["set_autocast_dtype"](device_type, dtype)
    return {"is_autocast_available": is_available, "is_autocast_enabled": is_enabled,
            "get_autocast_dtype": get_dtype, "get_autocast_gpu_dtype": get_gpu_dtype,
            "set_autocast_enabled": set_enabled, "set_autocast_dtype": set_dtype}


@contextlib.contextmanager
def cuda_autocast(enabled, rec=None, sdpa=None):
    """While active (and `enabled`), CUDA autocast requests use AutocastCuda,
    the autocast state reads answer from it, and (with `sdpa`, an
    sdpa.Dispatcher) F.scaled_dot_product_attention runs the fused kernel
    the CUDA build would."""
    if not enabled:
        yield
        return
    import torch.amp
    orig = torch.autocast
    orig_amp = getattr(torch.amp, "autocast", None)
    orig_cuda = torch.cuda.amp.autocast

    def autocast(device_type, dtype=None, enabled=True, cache_enabled=None):
        if device_type not in _EMULATED:
            return orig(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
        return AutocastCuda(dtype, enabled, cache_enabled)

    def cuda_amp_autocast(enabled=True, dtype=torch.float16, cache_enabled=True):
        return AutocastCuda(dtype, enabled, cache_enabled)

    saved = {}
    for name in ("is_autocast_enabled", "get_autocast_dtype", "get_autocast_gpu_dtype", "set_autocast_enabled",
                 "set_autocast_dtype"):
        if hasattr(torch, name):
            saved[("torch", name)] = getattr(torch, name)
    if hasattr(torch.amp, "is_autocast_available"):
        saved[("amp", "is_autocast_available")] = torch.amp.is_autocast_available
    patches = _state_patches({n: f for (_, n), f in saved.items()})
    for (where, name) in saved:
        setattr(torch if where == "torch" else torch.amp, name, patches[name])
    torch.autocast = autocast
    if orig_amp is not None:
        torch.amp.autocast = autocast
    torch.cuda.amp.autocast = cuda_amp_autocast
    _STATE.sdpa = sdpa
    _STATE.active = True
    mode = _Mode()
    try:
        with mode:
            yield
    finally:
        _STATE.sdpa = None
        _STATE.active = False
        for (where, name), f in saved.items():
            setattr(torch if where == "torch" else torch.amp, name, f)
        torch.autocast = orig
        if orig_amp is not None:
            torch.amp.autocast = orig_amp
        torch.cuda.amp.autocast = orig_cuda
