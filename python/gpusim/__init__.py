"""gpusim from Python: the simulator's commands, each returning a typed
result built from the JSON document ``gpusim ... --format json`` prints
(docs/python.md).

    >>> import gpusim
    >>> r = gpusim.run("llama7b", batch__per_device=2)   # a bundled config, by name
    >>> r.peak_bytes, r.fits, r.step_time_s
    >>> r                      # in a notebook: summary and memory timeline
    >>> gpusim.advise("llama7b", vary={"batch.per_device": [1, 2, 4]}).to_pandas()

Functions: :func:`run`, :func:`explain`, :func:`diff`, :func:`compare`,
:func:`advise`, :func:`replay`, :func:`viz`, :func:`validate`,
:func:`devices`, :func:`configs`, :func:`record` (PyTorch steps, with
gpusim_torch). A config is a path, a bundled config's NAME, or a dict with
the YAML file's keys. Overrides are ``--set path=value``: pass
``sets={"batch.per_device": 2}`` or keywords with ``__`` for ``.``
(``batch__per_device=2``); ``allocator="bfc"`` is ``--set
allocator.impl=bfc``. Errors raise :class:`gpusim.Error` with the CLI's
message and exit code. Each command runs the C++ CLI in this process with
the GIL released.
"""
import os

from . import _gpusim
from ._api import advise, compare, configs, devices, diff, explain, record, replay, run, validate, viz
from ._config import to_yaml
from ._errors import Error, GpusimWarning
from ._results import (AdvicePoint, AdviseResult, CompareResult, Device, Devices, DiffResult, ExplainResult,
                       RecordResult, ReplayResult, Result, RunResult, ValidateResult, VizResult)

__version__ = getattr(_gpusim, "__version__", "unknown")

_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
if os.path.isdir(_DATA):  # an installed package ships the configs
    _gpusim.set_data_dir(_DATA)

__all__ = [
    "AdvicePoint", "AdviseResult", "CompareResult", "Device", "Devices", "DiffResult", "Error", "ExplainResult",
    "GpusimWarning", "RecordResult", "ReplayResult", "Result", "RunResult", "ValidateResult", "VizResult",
    "__version__", "advise", "compare", "configs", "devices", "diff", "explain", "record", "replay", "run",
    "to_yaml", "validate", "viz",
]
