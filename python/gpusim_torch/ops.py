"""What one aten op costs on the device: its kind (traces/FORMAT.md `kind`),
FLOPs, bytes read and written, and matmul shape, from the shapes of its
arguments and results only (the recorder never sees values).

Views and metadata-only ops launch no kernel and get no compute event; see
is_view. Matmul-shaped ops report m, n, k (and batch) as gpusim's kernel
model reads them (sim/trace/trace.h TraceEvent).
"""

import math

DTYPE_NAMES = {}  # torch.dtype -> format dtype name, filled by init_dtypes


def init_dtypes(torch):
    names = {
        "float32": "f32", "bfloat16": "bf16", "float16": "f16", "int32": "i32",
        "int64": "i64", "uint8": "u8", "bool": "pred",
        "float8_e4m3fn": "f8", "float8_e5m2": "f8", "float8_e4m3fnuz": "f8",
        "float8_e5m2fnuz": "f8",
    }
    for attr, n in names.items():
        dt = getattr(torch, attr, None)
        if dt is not None:
            DTYPE_NAMES[dt] = n


# Ops that allocate without launching a kernel (PyTorch's empty* factories
# only reserve memory) or only change metadata.
_NO_KERNEL = {
    "empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided",
    "lift_fresh", "lift", "lift_fresh_copy_", "detach", "alias", "_local_scalar_dense",
    "resize_", "set_", "_has_compatible_shallow_copy_type", "is_same_size",
    # metadata queries (FakeTensorMode dispatches prim.device and friends)
    "device", "dim", "size", "stride", "numel", "sym_size", "sym_stride", "sym_numel",
    "sym_storage_offset", "storage_offset", "is_contiguous", "layout",
    # Views whose schema carries no alias annotation, so is_view() cannot
    # tell: they alias their input and launch nothing (aten/src/ATen/native/
    # TensorShape.cpp _unsafe_view: "self.view(size)" without autograd's view
    # tracking, the reshape at the end of every matmul of a 3-D input;
    # unsafe_split / unsafe_chunk: split's views, used by the RNN cells).
    "_unsafe_view", "unsafe_split", "unsafe_split_with_sizes", "unsafe_chunk",
}

_MATMUL = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "_scaled_mm", "addmv", "mv", "dot",
           "addr", "matmul", "linear"}
_CONV = {"convolution", "_convolution", "cudnn_convolution", "convolution_overrideable",
         "mkldnn_convolution"}
_CONV_BACKWARD = {"convolution_backward", "convolution_backward_overrideable",
                  "cudnn_convolution_backward"}
_ATTENTION = {"_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
              "_scaled_dot_product_cudnn_attention", "_efficient_attention_forward",
              "_flash_attention_forward", "_scaled_dot_product_flash_attention_backward",
              "_scaled_dot_product_efficient_attention_backward",
              "_scaled_dot_product_cudnn_attention_backward", "_efficient_attention_backward",
              "_flash_attention_backward", "_scaled_dot_product_attention_math"}
_REDUCE = {"sum", "mean", "amax", "amin", "max", "min", "var", "var_mean", "std", "std_mean",
           "_softmax", "_log_softmax", "_softmax_backward_data", "_log_softmax_backward_data",
           "native_layer_norm", "native_layer_norm_backward", "native_batch_norm",
           "native_batch_norm_backward", "_native_batch_norm_legit",
           "_native_batch_norm_legit_functional", "cudnn_batch_norm",
           "cudnn_batch_norm_backward", "nll_loss_forward", "nll_loss2d_forward", "norm",
           "linalg_vector_norm", "argmax", "argmin", "logsumexp", "cumsum", "prod",
           "_fused_rms_norm", "_fused_rms_norm_backward", "native_group_norm",
           "native_group_norm_backward", "_foreach_norm", "all", "any", "mse_loss",
           "avg_pool2d", "max_pool2d_with_indices", "adaptive_avg_pool2d",
           "_adaptive_avg_pool2d", "avg_pool2d_backward", "max_pool2d_with_indices_backward",
           "_adaptive_avg_pool2d_backward"}
_GATHER = {"embedding", "index_select", "gather", "index", "take", "_unsafe_index"}
_SCATTER = {"embedding_dense_backward", "scatter", "scatter_add", "scatter_add_", "scatter_",
            "index_add", "index_add_", "index_put", "index_put_", "_index_put_impl_",
            "nll_loss_backward", "nll_loss2d_backward", "scatter_reduce", "index_copy",
            "index_copy_", "masked_scatter", "_unsafe_index_put"}
_COPY = {"clone", "copy_", "_to_copy", "copy", "contiguous", "_copy_from", "cat", "stack",
         "constant_pad_nd", "repeat", "flip", "roll", "tril", "triu"}


def op_name(func):
    """'mm', 'add_', ... for an OpOverload."""
    return func.overloadpacket.__name__


def is_view(func):
    """The op returns an alias of an input without writing it (a view)."""
    rets = func._schema.returns
    if not rets:
        return False
    ai = rets[0].alias_info
    return ai is not None and not ai.is_write


def mutated_args(func):
    """Indices of positional arguments the op writes (in-place and out=)."""
    out = []
    for i, a in enumerate(func._schema.arguments):
        ai = a.alias_info
        if ai is not None and ai.is_write:
            out.append(i)
    return out


def _numel(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _tbytes(t):
    return _numel(t.shape) * t.element_size()


def cost(func, name, args, kwargs, out_tensors, in_tensors):
    """(kind, flops, read, write, m, n, k, batch) for one op, or None when it
    launches no kernel."""
    if name in _NO_KERNEL or is_view(func):
        return None
    read = sum(_tbytes(t) for t in in_tensors)
    write = sum(_tbytes(t) for t in out_tensors)
    if not out_tensors:
        # An op that returns nothing writes the arguments its schema marks
        # mutable (Tensor(a!) / Tensor(a!)[]): the in-place foreach ops and
        # the fused optimizers (_foreach_mul_, _fused_adamw_), whose kernels
        # (ATen multi_tensor_apply, FusedAdamWKernel) store every list they
        # update. Their bytes were read-only before (issue 29: the optimizer
        # class ran at half its traffic against the H200 Kineto traces).
        write = _mutated_bytes(func, args)
    m = n = k = 0
    batch = 1
    flops = 0.0
    if name in ("nll_loss_forward", "nll_loss_backward") and len(args) >= 3:
        # NLL reads one logit (forward) or none (backward) of each row: the
        # target's (aten/src/ATen/native/cuda/Loss.cu
        # nll_loss_forward_reduce_cuda_kernel_2d reads input[i][target[i]];
        # nll_loss_backward_reduce_cuda_kernel_2d only writes grad_input at
        # the targets, after zeroing it). Counting the whole [N, C] input as
        # read priced a 50k-vocabulary loss at a full pass over the logits.
        # forward (self, target, weight, ...); backward (grad_output, self,
        # target, weight, ...).
        x, tgt = (args[0], args[1]) if name == "nll_loss_forward" else (args[1], args[2])
        if hasattr(x, "shape") and hasattr(tgt, "shape"):
            rows = _numel(tgt.shape)
            read = read - _tbytes(x) + (rows * x.element_size() if name == "nll_loss_forward" else 0)
    if name in _MATMUL:
        kind = "matmul"
        m, n, k, batch = _matmul_shape(name, args)
        flops = 2.0 * m * n * k * batch
    elif name in _CONV:
        kind = "matmul"
        m, n, k = _conv_gemm(args)
        flops = 2.0 * m * n * k
    elif name in _CONV_BACKWARD:
        kind = "matmul"
        # (grad_output, input, weight, ...): grad_input and grad_weight are
        # each one implicit GEMM of the forward's size.
        x, w = args[1], args[2]
        go = args[0]
        m = _numel(go.shape) // int(go.shape[1])
        n = int(w.shape[0])
        k = _numel(w.shape) // int(w.shape[0])
        mask = args[-1] if isinstance(args[-1], (list, tuple)) else (True, True, True)
        flops = 2.0 * m * n * k * (int(bool(mask[0])) + int(bool(mask[1])))
    elif name in _ATTENTION:
        kind = "attention"
        q, kk = in_tensors[0], in_tensors[1]
        if len(q.shape) >= 4:
            b, h, s, d = (int(x) for x in q.shape[-4:])
            sk = int(kk.shape[-2])
            flops = 4.0 * b * h * s * sk * d * (2.5 if name.endswith("backward") else 1.0)
    elif name in _REDUCE:
        kind = "reduce"
        flops = float(sum(_numel(t.shape) for t in in_tensors[:1]))
    elif name in _GATHER:
        kind = "gather"
    elif name in _SCATTER:
        kind = "scatter"
    elif name in _COPY:
        kind = "copy"
        if out_tensors and in_tensors and out_tensors[0].dtype != in_tensors[-1].dtype:
            kind = "convert"
        if name in _STRIDED_COPY and any(not _contiguous(t) for t in list(in_tensors) + list(out_tensors)):
            # ATen's copy of a non-contiguous tensor runs the legacy
            # strided loop (aten/src/ATen/native/cuda/CUDALoops.cuh
            # launch_legacy_kernel, elementwise_kernel<128, 4>: offsets per
            # element, no vectorised loads), a transpose in effect; gpusim
            # times kind transpose at that kernel's rate (Note [ATen copy
            # kernels], sim/device/impl/tiled.h).
            kind = "transpose"
    else:
        kind = "elementwise"
        flops = float(sum(_numel(t.shape) for t in out_tensors))
    return kind, flops, read, write, m, n, k, batch


# The ATen copies that go through copy_ (TensorIterator, Copy.cu).
_STRIDED_COPY = {"clone", "copy_", "_to_copy", "copy", "contiguous", "_copy_from"}


def _contiguous(t):
    try:
        return bool(t.is_contiguous()) or _numel(t.shape) <= 1
    except (RuntimeError, NotImplementedError, AttributeError):  # no strides (a subclass): contiguous
        return True


def _mutated_bytes(func, args):
    total = 0
    for i in mutated_args(func):
        if i >= len(args):
            continue
        a = args[i]
        for t in (a if isinstance(a, (list, tuple)) else [a]):
            if hasattr(t, "shape") and hasattr(t, "element_size"):
                total += _tbytes(t)
    return total


def _matmul_shape(name, args):
    def dims(t):
        return [int(d) for d in t.shape]
    if name in ("mm", "matmul", "_scaled_mm"):
        a, b = dims(args[0]), dims(args[1])
    elif name in ("addmm", "baddbmm", "addbmm"):
        a, b = dims(args[1]), dims(args[2])
    elif name == "bmm":
        a, b = dims(args[0]), dims(args[1])
    elif name == "linear":
        a, w = dims(args[0]), dims(args[1])
        return _numel(a[:-1]), w[0], a[-1], 1
    elif name in ("mv", "addmv"):
        a = dims(args[0] if name == "mv" else args[1])
        return a[0], 1, a[1], 1
    else:  # dot, addr
        t = dims(args[0] if name == "dot" else args[1])
        return 1, 1, t[0] if t else 1, 1
    if len(a) == 3 and len(b) == 3:
        return a[1], b[2], a[2], a[0]
    if len(a) == 2 and len(b) == 2:
        return a[0], b[1], a[1], 1
    return _numel(a[:-1]), b[-1], a[-1], max(1, _numel(b[:-2]))


def _conv_gemm(args):
    """Implicit GEMM of a forward convolution: m = N * output pixels,
    n = output channels, k = input channels per group * kernel size."""
    x, w = args[0], args[1]
    stride = list(args[3]) if len(args) > 3 else [1]
    padding = list(args[4]) if len(args) > 4 else [0]
    dilation = list(args[5]) if len(args) > 5 else [1]
    spatial = len(x.shape) - 2
    def at(seq, i):
        return int(seq[i] if len(seq) > i else seq[0])
    out_pixels = 1
    for i in range(spatial):
        size = int(x.shape[2 + i])
        ker = int(w.shape[2 + i])
        o = (size + 2 * at(padding, i) - at(dilation, i) * (ker - 1) - 1) // at(stride, i) + 1
        out_pixels *= max(o, 0)
    m = int(x.shape[0]) * out_pixels
    n = int(w.shape[0])
    k = _numel(w.shape[1:])
    return m, n, k


# Note [Op facts for the device model]
# What the CUDA backend allocates beside an op's results (cuBLAS workspaces,
# reduction staging, cuDNN workspaces, sort temporaries) is sized by gpusim
# (sim/lower/eager/device_memory.h) from facts the recorder writes on the
# op's compute event: `op=` (the aten op) and `dims=` (integers, op by op as
# traces/FORMAT.md *Op facts* lists). The facts are what PyTorch's kernels
# read from their arguments (shapes, strides, dtypes); the device's part (SM
# count, threads per SM, compute capability) is gpusim's.

# Ops that run through a cuBLAS handle (aten/src/ATen/native/cuda/Blas.cpp).
CUBLAS_OPS = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "addmv", "mv", "dot", "addr",
              "_scaled_mm", "vdot"}
# Reductions through aten/src/ATen/native/cuda/Reduce.cuh gpu_reduce_kernel
# whose accumulator (arg_t) is the input's accumulate type.
REDUCE_OPS = {"sum", "mean", "prod", "amax", "amin", "nansum", "linalg_vector_norm", "norm",
              "any", "all"}


def _acc_bytes(t):
    """sizeof(acc_type<scalar_t, /*is_cuda=*/true>) (ATen/AccumulateType.h)
    for tensor t's dtype: float for half, bfloat16 and float, double for
    double, int64 for integers, bool for bool."""
    if t.dtype.is_floating_point:
        return 8 if t.element_size() == 8 else 4
    if str(t.dtype) == "torch.bool":
        return 1
    return 8


def _reduce_dims(name, args, kwargs):
    """The reduced dimensions of a reduction call, or None for all."""
    x = args[0]
    nd = x.dim()
    dim = kwargs.get("dim")
    if dim is None and len(args) > 1:
        dim = args[1]
        if name in ("linalg_vector_norm", "norm"):  # (self, ord, dim, ...)
            dim = args[2] if len(args) > 2 else kwargs.get("dim")
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return set(range(nd))
    if isinstance(dim, int):
        dim = [dim]
    if not all(isinstance(d, int) for d in dim):
        return set(range(nd))  # e.g. a dtype in the dim position: a full reduction
    return {d % nd for d in dim} if nd else set()


def reduce_facts(name, args, kwargs, outs):
    """TensorIterator's view of a reduction (aten/src/ATen/TensorIterator.cpp
    reorder_dimensions puts reduced dimensions first, then coalesces):
    [num_outputs, inputs_per_output, reduction on the fastest-striding
    dimension (0/1), reduced dims after coalescing, dims after coalescing,
    fastest moving stride == element size (0/1), output vector size (1, 2,
    4: Reduce.cuh get_output_vec_size), sizeof(arg_t), element size]."""
    x = args[0]
    if not isinstance(x, __import__("torch").Tensor) or x.numel() == 0 or not outs:
        return None
    reduced = _reduce_dims(name, args, kwargs)
    dims = [(int(s), int(st), d in reduced) for d, (s, st) in enumerate(zip(x.shape, x.stride()))
            if int(s) != 1]
    # Reduced dims first, each group by ascending input stride.
    dims.sort(key=lambda t: (not t[2], t[1]))
    merged = []
    for size, stride, red in dims:
        if merged and merged[-1][2] == red and merged[-1][1] * merged[-1][0] == stride:
            merged[-1] = (merged[-1][0] * size, merged[-1][1], red)
        else:
            merged.append((size, stride, red))
    n_red = sum(1 for m in merged if m[2])
    num_outputs = 1
    for size, _, red in merged:
        if not red:
            num_outputs *= size
    inputs_per_output = x.numel() // num_outputs
    ndim = len(merged)
    if ndim == 0:
        fastest, unit = True, True
    else:
        fastest = n_red == ndim or merged[0][1] < merged[n_red][1]
        moving = merged[0][1] if fastest else merged[n_red][1]
        unit = moving == 1
    vec = 1
    if unit and not fastest:
        vec = 4
        for n in [merged[n_red][0]] + [m[1] for i, m in enumerate(merged) if i != n_red]:
            while vec > 1 and n % vec:
                vec //= 2
    elem = x.element_size()
    return [num_outputs, inputs_per_output, int(fastest), n_red, ndim, int(unit), vec,
            _acc_bytes(x), elem]


def conv_facts(name, args):
    """2-D convolution geometry: [N, C, H, W, K, C/groups, R, S, stride h, w,
    padding h, w, dilation h, w, groups, transposed, element size, memory
    format (0 contiguous, 1 channels-last; trace format 1.7)] and, for
    convolution_backward, the output mask (grad input, weight, bias)."""
    if name == "convolution_backward":
        go, x, w = args[0], args[1], args[2]
        stride, padding, dilation, transposed, groups = args[4], args[5], args[6], args[7], args[9]
        mask = list(args[10])
    elif name in ("convolution", "_convolution"):
        x, w = args[0], args[1]
        stride, padding, dilation, transposed, groups = args[3], args[4], args[5], args[6], args[8]
        mask = []
    else:
        return None
    if x.dim() != 4 or w.dim() != 4:
        return None
    n, c, h, wd = (int(v) for v in x.shape)
    k, cg, r, s = (int(v) for v in w.shape)
    return [n, c, h, wd, k, cg, r, s, int(stride[0]), int(stride[-1]), int(padding[0]),
            int(padding[-1]), int(dilation[0]), int(dilation[-1]), int(groups), int(bool(transposed)),
            x.element_size(), int(_channels_last(x) or _channels_last(w))] + [int(bool(b)) for b in mask]


def _channels_last(t):
    """Whether a 4-D tensor is laid out channels-last, as c10's
    suggest_memory_format decides for the strides a convolution sees
    (cudnn_conv_suggest_memory_format, aten/src/ATen/native/ConvUtils.h:
    the input or the weight channels-last makes cuDNN run NHWC; Note
    [cuDNN layout transforms], sim/device/impl/conv.h). A tensor that is
    both (one channel, or 1x1 pixels) counts as contiguous, as c10's
    stride heuristic ranks it."""
    import torch  # the recorder's torch, loaded by now
    try:
        return (t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last)
                and not t.is_contiguous())
    except RuntimeError:
        return False


def index_put_facts(args, kwargs):
    """What index_put_with_sort_kernel (aten/src/ATen/native/cuda/Indexing.cu)
    allocates depends on: [num_indices (the broadcast index shape's numel),
    index tensors, of them int32 (converted to int64 by makeLinearIndex),
    slice size (elements after the indexed dims), elements before them,
    largestIndex(self) / slice size (the radix sort's key range), unsafe
    (0/1: no range check), accumulate (0/1), bytes of the contiguous copy of
    self (0 when contiguous), bytes of the value's expanded contiguous copy (0
    when the value already has the indexed shape and is contiguous), indices
    adjacent (0/1; else self is permuted), mask indices (bool/uint8: expanded
    through nonzero)]. CUDA takes that kernel when accumulate is set or
    deterministic algorithms are on (TensorAdvancedIndexing.cpp
    _index_put_impl_); gpusim decides from `accumulate` and the meta line."""
    torch = __import__("torch")
    self_ = args[0]
    given = args[1] if len(args) > 1 else kwargs.get("indices", [])
    value = args[2] if len(args) > 2 else kwargs.get("values")
    accumulate = bool(args[3]) if len(args) > 3 else bool(kwargs.get("accumulate", False))
    unsafe = bool(args[4]) if len(args) > 4 else bool(kwargs.get("unsafe", False))
    det = getattr(torch, "are_deterministic_algorithms_enabled", lambda: False)()
    if not (accumulate or det) or not isinstance(value, torch.Tensor):
        return None
    given = list(given)
    idx = [t for t in given if t is not None]
    if not idx:
        return None
    masks = sum(1 for t in idx if t.dtype in (torch.bool, torch.uint8))
    ints = sum(1 for t in idx if t.dtype == torch.int32)
    shape = torch.broadcast_shapes(*[tuple(t.shape) for t in idx]) if not masks else tuple(idx[0].shape)
    n = _numel(shape)
    pos = [i for i, t in enumerate(given) if t is not None]
    adjacent = pos == list(range(pos[0], pos[0] + len(pos)))
    before = _numel(self_.shape[:pos[0]])
    after = _numel(self_.shape[pos[-1] + 1:]) if len(given) <= self_.dim() else 1
    largest = sum((int(s) - 1) * int(st) for s, st in zip(self_.shape, self_.stride()))
    elem = self_.element_size()
    self_copy = 0 if self_.is_contiguous() else self_.numel() * elem
    vals = tuple(self_.shape[:pos[0]]) + tuple(shape) + tuple(self_.shape[pos[-1] + 1:])
    value_copy = 0
    if tuple(value.shape) != vals or not value.is_contiguous():
        value_copy = _numel(vals) * value.element_size()
    return [n, len(idx), ints, after, before, largest // max(after, 1), int(unsafe),
            int(accumulate), self_copy, value_copy, int(adjacent), masks]


def addmm_lt_facts(args, kwargs, outs):
    """[cuBLASLt path on CUDA >= 12.1 (0/1), on CUDA 11.4-12.0 (0/1)] for
    addmm(bias, mat1, mat2): addmm_out_cuda_impl (aten/src/ATen/native/cuda/
    Blas.cpp) calls gemm_and_bias through cublasLt when beta is 1, the bias is
    a contiguous 1-D tensor of mat2's columns, the result is 2-D and
    contiguous, the dtype is double, float, half or bfloat16 and mat2 has more
    than one row and column; before CUDA 12.1 also every size under 65535*32
    and mat1 dense (row- or column-major) with more than one row and column."""
    torch = __import__("torch")
    if len(args) < 3 or not outs:
        return [0, 0]
    bias, m1, m2 = args[0], args[1], args[2]
    beta = kwargs.get("beta", 1)
    res = outs[0]
    if not all(isinstance(t, torch.Tensor) for t in (bias, m1, m2)) or m1.dim() != 2 or m2.dim() != 2:
        return [0, 0]
    ok = (beta == 1 and bias.dim() == 1 and res.dim() == 2 and int(bias.shape[0]) == int(m2.shape[1])
          and bias.is_contiguous() and res.is_contiguous()
          and res.dtype in (torch.float64, torch.float32, torch.float16, torch.bfloat16)
          and int(m2.shape[0]) > 1 and int(m2.shape[1]) > 1)
    lim = 65535 * 32
    s0, s1 = (int(v) for v in m1.shape)
    st0, st1 = (int(v) for v in m1.stride())
    dense = (st0 == 1 and st1 == s0) or (st1 == 1 and st0 == s1)
    old = ok and all(int(v) < lim for v in list(m1.shape) + list(m2.shape)) and dense and s0 > 1 and s1 > 1
    return [int(ok), int(old)]


# Note [ATen elementwise loops]
# An ATen pointwise op on CUDA runs TensorIterator's gpu_kernel
# (aten/src/ATen/native/cuda/CUDALoops.cuh gpu_kernel_impl, PyTorch 2.x),
# which picks one of three loops, as the copies do (Note [ATen copy
# kernels], sim/device/impl/tiled.h):
#   0 vectorised: iter.is_contiguous() and no operand needs a cast to the
#     functor's types (needs_dynamic_casting false): launch_vectorized_kernel;
#   1 unrolled: contiguous, with a cast (bf16 + fp32 under autocast):
#     launch_unrolled_kernel with LoadWithCast / StoreWithCast;
#   2 legacy: an operand is not contiguous in the iterator's order (a
#     broadcast operand has stride 0; operands whose strides differ):
#     launch_legacy_kernel, elementwise_kernel<128, 2 or 4> with an
#     OffsetCalculator per element;
#   3 legacy with casts.
# The H200 Kineto traces show them on one model (vit_b16_gpu, bytes of
# the launching op's Input Dims over kernel time): add_ bf16 contiguous
# vectorized_elementwise_kernel 4.27 TB/s; add fp32 + bf16
# unrolled_elementwise_kernel 2.47 TB/s; add_ of a [2304] bias broadcast
# over [197, 64, 2304] elementwise_kernel<128, 4> 1.38 TB/s; and the
# slow loops run at one rate in elements, whatever the dtypes (Note
# [Elementwise loop rates], tools/collect/kineto_classes.py). The recorder
# decides the loop from the meta tensors: "contiguous" as every tensor
# operand having the output's shape and strides with the output
# non-overlapping and dense (TensorIterator reorders dimensions, so two
# operands transposed alike still count); "a cast" as the non-bool tensor
# operands not sharing one dtype (a comparison's bool output, where's and
# masked_fill's bool mask are the functor's own types). Python scalars are
# kernel arguments, not operands (gpu_kernel_with_scalars). Ops with kernels
# of their own (dropout, the distributions, arange's indexed loop) are not
# TensorIterator's gpu_kernel and carry no loop.
_OWN_KERNELS = {"native_dropout", "bernoulli_", "bernoulli", "normal_", "uniform_", "random_", "exponential_",
                "geometric_", "log_normal_", "cauchy_", "arange", "linspace", "logspace", "range",
                "randperm", "multinomial", "index", "_unsafe_index", "masked_select", "nonzero",
                "embedding", "tril", "triu", "repeat_interleave"}


def _dense(shape, strides):
    """Non-overlapping and dense: some order of the dimensions (size 1 aside)
    lays the elements out contiguously (c10 TensorImpl
    compute_non_overlapping_and_dense)."""
    expect = 1
    for st, sz in sorted((int(st), int(sz)) for sz, st in zip(shape, strides) if sz != 1):
        if st != expect:
            return False
        expect *= sz
    return True


def elementwise_loop(name, in_tensors, out_tensors):
    """TensorIterator's loop for a pointwise op (Note [ATen elementwise
    loops]): 0 vectorised, 1 unrolled with casts, 2 legacy strided, 3 legacy
    with casts; None where the op is not one or the tensors say nothing."""
    if name in _OWN_KERNELS or not out_tensors:
        return None
    out = out_tensors[0]
    try:
        shape, strides = tuple(out.shape), tuple(out.stride())
        if _numel(shape) <= 1:
            return 0
        # A pointwise op's inputs broadcast to its output; one whose do not
        # (select_backward, slice_backward: zeros and a copy into a view)
        # is no TensorIterator op of its own.
        import torch  # the recorder's torch, loaded by now
        if in_tensors and tuple(torch.broadcast_shapes(*[tuple(t.shape) for t in in_tensors])) != shape:
            return None
        dense = _dense(shape, strides)
        operands = list(out_tensors) + [t for t in in_tensors if t is not out]
        contiguous = dense and all(tuple(t.shape) == shape and tuple(t.stride()) == strides for t in operands)
    except (RuntimeError, NotImplementedError, AttributeError, TypeError):
        return None
    dtypes = {t.dtype for t in operands if str(t.dtype) != "torch.bool"}
    cast = len(dtypes) > 1
    if not contiguous:
        return 3 if cast else 2
    return 1 if cast else 0


def device_facts(name, args, kwargs, outs):
    """(op, dims) for the compute event of an op whose kernel library adds
    device memory (Note [Op facts for the device model]), else None."""
    if name == "addmm":
        return name, addmm_lt_facts(args, kwargs, outs)
    if name in CUBLAS_OPS:
        return name, []
    if name in REDUCE_OPS:
        d = reduce_facts(name, args, kwargs, outs)
        return (name, d) if d is not None else None
    if name in ("convolution", "_convolution", "convolution_backward"):
        # A convolution that is not 2-D is still named (no facts), so that
        # gpusim counts it among the cuDNN workspaces it does not size.
        d = conv_facts(name, args)
        return name, d if d is not None else []
    if name in ("index_put", "index_put_", "_index_put_impl", "_index_put_impl_"):
        d = index_put_facts(args, kwargs)
        return (name, d) if d is not None else None
    if name == "embedding_dense_backward":
        # [indices, num_weights, embedding dim, index element size, grad
        # element size, scale_grad_by_freq, bytes of grad's contiguous copy,
        # bytes of the indices' contiguous copy] (Embedding.cu
        # embedding_dense_backward_cuda: grad_.contiguous(), indices_.contiguous()).
        grad, idx, num_weights = args[0], args[1], args[2]
        scale = bool(args[4]) if len(args) > 4 else False
        grad_copy = 0 if grad.is_contiguous() else grad.numel() * grad.element_size()
        idx_copy = 0 if idx.is_contiguous() else idx.numel() * idx.element_size()
        return name, [int(idx.numel()), int(num_weights), int(grad.shape[-1]), idx.element_size(),
                      grad.element_size(), int(scale), grad_copy, idx_copy]
    return None
