"""Shape-only stand-ins for ops the meta device cannot run, allocating what
the CUDA kernel allocates (its results; workspaces are the device model's,
sim side).

- convolution_backward(_overrideable) (no meta kernel in 1.13): grad_input,
  grad_weight, grad_bias as output_mask asks, shaped like input, weight and
  the bias (PyTorch aten/src/ATen/native/Convolution.cpp
  convolution_backward allocates exactly these).
- _foreach_* (no meta kernels in 1.13): in-place forms write their first
  list and allocate nothing; out-of-place forms allocate one result per
  tensor of the first list (_foreach_norm: one scalar each), as
  aten/src/ATen/native/ForeachOpsKernels.cpp's slow path does per tensor.
- _local_scalar_dense (Tensor.item(), on meta there is no value): 0 of the
  tensor's type, counted in the trace's notes; the step must not branch on it.
- nonzero and masked_select (data-dependent shapes): the bound the user
  gives with --bound OP=N (N result rows); without one, a RecordError.
"""

import torch

from gpusim_torch.errors import RecordError

DATA_DEPENDENT = {"nonzero", "masked_select", "unique", "_unique", "_unique2", "unique_dim",
                  "unique_consecutive", "bincount", "repeat_interleave"}


def _err(msg):
    return RecordError(msg)


def _note(rec, msg):
    rec.notes[msg] = rec.notes.get(msg, 0) + 1


def run(rec, func, name, args, kwargs, error):
    """The stand-in result of `func`, which raised `error` on the meta
    device; a RecordError naming the op when there is none."""
    if name == "_local_scalar_dense":
        t = args[0]
        _note(rec, "Tensor.item() on the meta device returned 0 (no values are computed)")
        if t.dtype == torch.bool:
            return False
        return 0.0 if t.is_floating_point() else 0
    if name in ("convolution_backward", "convolution_backward_overrideable"):
        return _conv_backward(name, args)
    if name.startswith("_foreach_"):
        return _foreach(rec, name, args)
    if name in DATA_DEPENDENT:
        bound = rec.bounds.get(name)
        if bound is None:
            raise _err("aten.%s has a data-dependent result shape, unknown without values; "
                       "give its result's row count with --bound %s=N "
                       "(record_step(..., bounds={'%s': N}))" % (name, name, name))
        t = args[0]
        if name == "nonzero":
            return torch.empty((bound, t.dim()), dtype=torch.int64, device=t.device)
        if name == "masked_select":
            return torch.empty((bound,), dtype=t.dtype, device=t.device)
        raise _err("aten.%s: --bound is supported for nonzero and masked_select only" % name)
    first = str(error).splitlines()[0] if str(error) else type(error).__name__
    # No kernel for the meta device is a NotImplementedError from the
    # dispatcher ("Could not run 'aten::x' with arguments from the 'Meta'
    # backend"); anything else is the op's own argument check, which the
    # CUDA kernel makes too: the step is wrong as written, say so.
    if not isinstance(error, NotImplementedError):
        raise _err("aten.%s: %s (the op's argument check: it fails on a GPU too)" % (name, first))
    raise _err("aten.%s has no kernel for the %s device in torch %s and gpusim_torch has no shape "
               "fallback for it: %s" % (name, rec.device_type, torch.__version__, first))


def _conv_backward(name, args):
    grad_output, x, w = args[0], args[1], args[2]
    mask = args[-1]
    transposed = args[7] if name == "convolution_backward" else args[6]
    groups = args[-2]
    gi = torch.empty_like(x) if mask[0] else None
    gw = torch.empty_like(w) if mask[1] else None
    bias_n = int(w.shape[1]) * int(groups) if transposed else int(w.shape[0])
    gb = torch.empty((bias_n,), dtype=grad_output.dtype, device=grad_output.device) if mask[2] else None
    return gi, gw, gb


def _foreach(rec, name, args):
    first = args[0]
    _note(rec, "shape-only fallback for aten.%s (no meta kernel in torch %s)" % (name, torch.__version__))
    if name.endswith("_"):
        return None
    if name == "_foreach_norm":
        return [torch.empty((), dtype=t.dtype, device=t.device) for t in first]
    return [torch.empty_like(t) for t in first]
