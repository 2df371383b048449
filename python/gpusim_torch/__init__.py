"""gpusim_torch: record a PyTorch training step on the CPU (meta device, or
FakeTensorMode with a fake CUDA device) as a gpusim native trace, for
`gpusim replay` on a modelled GPU. See README "Bring your own PyTorch model".

    gpusim_torch.record_step(setup, "step.gpusim", steps=3)
    with gpusim_torch.record("step.gpusim", model=m, optimizer=o, batch=b):
        ...one training step on meta tensors...
"""

import contextlib

_LAZY = {"Recorder": "gpusim_torch.recorder", "RecordError": "gpusim_torch.recorder",
         "record_step": "gpusim_torch.session"}


def __getattr__(name):
    """Imports torch only when the API is used (the CLI checks its
    arguments first)."""
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError("module 'gpusim_torch' has no attribute '%s'" % name)


@contextlib.contextmanager
def record(out, *, model=None, optimizer=None, batch=None, frames=True, bounds=None,
           name="gpusim_torch-step"):
    """Records the code inside the block (tensors on the meta device) to
    `out`. The start state is what `model`, `optimizer` and `batch` hold when
    the block starts (parameters, buffers, gradients, optimizer state, batch
    tensors); other tensors allocated before the block are not seen."""
    import gc
    from gpusim_torch import autocast_emul
    from gpusim_torch.recorder import Recorder, roles_of
    from gpusim_torch.session import _patched_phases, _tensors_of
    from gpusim_torch.trace_writer import write_trace
    rec = Recorder("meta", frames=frames, bounds=bounds)
    for t in _tensors_of(model, optimizer, batch):
        rec.adopt(t)
    hooks = rec.install_module_hooks(model) if model is not None else []
    try:
        with autocast_emul.cuda_autocast(True, rec), rec, _patched_phases(rec, optimizer):
            gc.collect()
            rec.begin_window()
            rec.classify(roles_of(model, optimizer, batch))
            yield rec
            rec.classify(roles_of(model, optimizer, batch))
            rec.end_window()
    finally:
        for h in hooks:
            h.remove()
    import torch
    recording = rec.finish(name, ["torch %s, meta mode (gpusim_torch.record block)" % torch.__version__])
    rec.release()
    write_trace(out, recording, frames=frames)
