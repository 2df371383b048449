"""The recorder's exception, in a module of its own that imports nothing, so
that recorder.py and the modules it imports (fallbacks.py) can all raise it
without importing each other (issue 28: no Python import cycle).
gpusim_torch.recorder.RecordError and gpusim_torch.RecordError are this
class."""


class RecordError(Exception):
    """A step the recorder cannot record as written (data-dependent shape
    without a bound, an op without a meta kernel or fallback, ...)."""
