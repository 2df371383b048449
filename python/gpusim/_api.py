"""The package's functions: each runs one gpusim command in this process
(the C++ CLI, python/_gpusim.cc) with ``--format json`` and returns its
document as a typed result (_results.py)."""
from __future__ import annotations

import argparse
import json
import os
import warnings
from typing import Any, Callable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _gpusim
from ._config import Config, Input, SetValue, command_input, set_args, set_value, vary_args
from ._errors import Error, GpusimWarning
from ._results import (AdviseResult, CompareResult, Devices, DiffResult, ExplainResult, RecordResult, ReplayResult,
                       RunResult, ValidateResult, VizResult)

PathLike = Union[str, "os.PathLike[str]"]

_ERROR = "gpusim: error: "
_WARNING = "gpusim: warning: "


def _message(err: str) -> str:
    """The CLI's error text without its "gpusim: error: " prefix."""
    at = err.find(_ERROR)
    text = err[at + len(_ERROR):] if at >= 0 else err
    return text.strip()


def _call(args: List[str], inp: Optional[Input] = None, timeline_svg: bool = False) -> Tuple[Any, str]:
    """`gpusim ARGS --format json` in process: (its JSON, timeline SVG)."""
    label, text = (inp.arg, inp.text) if inp is not None and inp.text is not None else ("", None)
    rc, out, err, svg = _gpusim.cli(list(args) + ["--format", "json"], label, text, timeline_svg)
    if rc != 0:
        raise Error(_message(err), rc)
    for line in err.splitlines():
        if line.strip():
            warnings.warn(line[len(_WARNING):] if line.startswith(_WARNING) else line, GpusimWarning, stacklevel=3)
    return json.loads(out), svg


def _path(p: PathLike, what: str) -> str:
    if isinstance(p, os.PathLike):
        return os.fspath(p)
    if not isinstance(p, str):
        raise TypeError(f"{what} must be a path (str or os.PathLike), not {type(p).__name__}")
    return p


def _device(inp: Input, device: Optional[str]) -> Tuple[List[str], List[str]]:
    """`device` for a run config is ``--set device=NAME``; for a trace or an
    HLO module the CLI's ``--device NAME``: (--device words, --set words)."""
    if device is None:
        return [], []
    if inp.is_config:
        return [], ["--set", f"device={device}"]
    return ["--device", device], []


def run(config: Config, sets: Optional[Mapping[str, SetValue]] = None, *, device: Optional[str] = None,
        **overrides: SetValue) -> Union[RunResult, ReplayResult]:
    """Simulates one training step: ``gpusim run CONFIG --format json``.

    ``config`` is a path, a bundled config's NAME (``"llama7b"``) or a dict
    of the YAML file's keys. Overrides are ``sets={"batch.per_device": 2}``
    or keywords with ``__`` for ``.`` (``batch__per_device=2``);
    ``allocator="bfc"`` is ``--set allocator.impl=bfc``; ``device`` is
    ``--set device=NAME`` (``--device`` for an HLO module). A recorded step
    (a native trace) gives what ``replay`` gives, a :class:`ReplayResult`.
    In a notebook a :class:`RunResult` shows its summary and memory
    timeline (``.plot()``).
    """
    inp = command_input(config)
    dev_args, dev_sets = _device(inp, device)
    doc, svg = _call(["run", inp.arg, *dev_args, *set_args(sets, overrides), *dev_sets], inp, timeline_svg=True)
    if "replay" in doc and "memory" not in doc:
        return ReplayResult.from_json(doc)
    return RunResult.from_json(doc, svg)


def explain(config: Config, sets: Optional[Mapping[str, SetValue]] = None, *, top: int = 15,
            device: Optional[str] = None, **overrides: SetValue) -> ExplainResult:
    """The buffers live at the peak, largest first: ``gpusim explain``.

    ``config``: a run config (path, NAME, dict), an HLO module or a trace;
    ``top``: how many buffers; ``device``: as in :func:`run` (for a PyTorch
    trace, the device whose CUDA libraries' allocations are added).
    """
    inp = command_input(config)
    dev_args, dev_sets = _device(inp, device)
    doc, _ = _call(["explain", inp.arg, "--top", str(top), *dev_args, *set_args(sets, overrides), *dev_sets], inp)
    return ExplainResult.from_json(doc)


def diff(config: Config, sets: Optional[Mapping[str, SetValue]] = None, *,
         base_sets: Optional[Mapping[str, SetValue]] = None, **overrides: SetValue) -> DiffResult:
    """Attributes the memory and step-time difference between A = ``config``
    with ``base_sets`` and B = A with ``sets`` and the keyword overrides:
    ``gpusim diff CONFIG --base-set ... --set ...``. B needs at least one
    override."""
    inp = command_input(config)
    base: List[str] = []
    for word in set_args(base_sets, {}):
        base.append("--base-set" if word == "--set" else word)
    doc, _ = _call(["diff", inp.arg, *base, *set_args(sets, overrides)], inp)
    return DiffResult.from_json(doc)


def compare(config: Config, vary: Union[str, Mapping[str, Sequence[SetValue]], None] = None,
            sets: Optional[Mapping[str, SetValue]] = None, *, allocators: Optional[Sequence[str]] = None,
            device: Optional[str] = None, device_index: Optional[int] = None,
            **overrides: SetValue) -> CompareResult:
    """One row per value of one setting (a run config with ``vary``:
    ``"remat.policy=full,minimal"`` or ``{"remat.policy": ["full",
    "minimal"]}``), or one row per allocator (a trace; ``allocators``, default
    every registered one): ``gpusim compare``. ``to_pandas()``: one row per
    value, the setting a typed column."""
    inp = command_input(config)
    args = ["compare", inp.arg]
    if vary is not None:
        if isinstance(vary, Mapping) and len(vary) != 1:
            raise ValueError(f"compare: vary one setting (got {len(vary)}); advise() varies several")
        words = vary_args(vary)
        if len(words) != 2:
            raise ValueError("compare: vary one setting; advise() varies several")
        args += words
    if allocators is not None:
        args += ["--allocators", ",".join(allocators)]
    dev_args, dev_sets = _device(inp, device)
    if device_index is not None:
        dev_args += ["--device-index", str(device_index)]
    doc, _ = _call([*args, *dev_args, *set_args(sets, overrides), *dev_sets], inp)
    return CompareResult.from_json(doc)


def advise(config: Config, budget: Union[str, int, None] = None,
           vary: Union[str, Sequence[str], Mapping[str, Sequence[SetValue]], None] = None,
           sets: Optional[Mapping[str, SetValue]] = None, jobs: Optional[int] = None,
           **overrides: SetValue) -> AdviseResult:
    """Evaluates a grid of settings: ``gpusim advise CONFIG [--budget B]
    [--vary path=v1,v2]...``: every point, the Pareto front and the fastest
    point that fits ``budget`` (bytes, or a size such as ``"80GiB"``;
    default the device's usable memory). ``vary``: ``{path: [values]}``,
    ``"path=v1,v2"`` strings, or None for the default grid (remat policy x
    loop mode x batch). ``jobs``: worker threads (default all cores).
    ``to_pandas()``: one row per point, each varied setting a typed column.
    """
    inp = command_input(config)
    args = ["advise", inp.arg, *vary_args(vary)]
    if budget is not None and budget != "":
        args += ["--budget", str(budget)]
    if jobs:  # 0 or None: all cores
        args += ["--jobs", str(jobs)]
    doc, _ = _call([*args, *set_args(sets, overrides)], inp)
    return AdviseResult.from_json(doc)


def replay(trace: PathLike, allocator: str = "pytorch_caching", device: str = "", device_index: int = -1,
           check_addresses: bool = False, cold_start: bool = False, **options: SetValue) -> ReplayResult:
    """Replays a recorded trace through an allocator: ``gpusim replay TRACE
    --allocator A --set allocator.K=V ...``. ``device``, ``device_index``,
    ``check_addresses`` and ``cold_start`` are the CLI's ``--device``,
    ``--device-index``, ``--check-addresses`` and ``--cold-start``; other
    keywords are allocator options (``expandable_segments=True``)."""
    args = ["replay", _path(trace, "trace"), "--allocator", allocator]
    for k, v in options.items():
        args += ["--set", f"allocator.{k}={set_value(v)}"]
    if device:
        args += ["--device", device]
    if device_index >= 0:
        args += ["--device-index", str(device_index)]
    if check_addresses:
        args.append("--check-addresses")
    if cold_start:
        args.append("--cold-start")
    doc, _ = _call(args)
    return ReplayResult.from_json(doc)


def viz(config: Config, out: PathLike, sets: Optional[Mapping[str, SetValue]] = None, *,
        device: Optional[str] = None, allocator: Optional[str] = None, snapshot: Optional[PathLike] = None,
        **overrides: SetValue) -> VizResult:
    """Writes the charts, timeline.json and report.html of a config's step or
    a trace's replay into the directory ``out``: ``gpusim viz``.
    ``snapshot``: also a PyTorch memory snapshot (FILE.pickle)."""
    inp = command_input(config)
    args = ["viz", inp.arg, "--out", _path(out, "out")]
    if allocator is not None:
        args += ["--allocator", allocator]
    if snapshot is not None:
        args += ["--snapshot", _path(snapshot, "snapshot")]
    dev_args, dev_sets = _device(inp, device)
    doc, _ = _call([*args, *dev_args, *set_args(sets, overrides), *dev_sets], inp)
    return VizResult.from_json(doc)


def validate(config: Config, sets: Optional[Mapping[str, SetValue]] = None,
             **overrides: SetValue) -> ValidateResult:
    """Checks any input (a run config, a native or recorded trace, an HLO
    module): ``gpusim validate``; an invalid one raises :class:`Error`."""
    inp = command_input(config)
    doc, _ = _call(["validate", inp.arg, *set_args(sets, overrides)], inp)
    return ValidateResult.from_json(doc)


def devices() -> Devices:
    """The modelled devices: ``gpusim devices``."""
    doc, _ = _call(["devices"])
    return Devices.from_json(doc)


def configs() -> List[str]:
    """The NAMEs of the bundled run configs (``gpusim.run(NAME)``)."""
    return list(_gpusim.bundled_configs())


def record(step: Union[PathLike, Callable[..., Mapping[str, Any]]], out: PathLike, *,
           batch_size: Optional[int] = None, setup_args: Optional[Mapping[str, Any]] = None, steps: int = 3,
           mode: str = "auto", autocast: Optional[str] = None, device: Optional[str] = None,
           sdpa_backend: Optional[str] = None, cuda_torch_version: Optional[str] = None,
           world_size: Optional[int] = None, rank: int = 0, bounds: Optional[Mapping[str, int]] = None,
           frames: bool = True, name: Optional[str] = None, timeout: float = 600.0) -> RecordResult:
    """Records a PyTorch training step on the CPU as a gpusim native trace at
    ``out`` (python/gpusim_torch; needs torch: ``pip install gpusim[torch]``).

    ``step``: a STEP.py file, as ``python -m gpusim_torch record STEP.py``
    (its ``setup(device, ...)`` returns model, batch, optimizer and loss_fn
    or step), or such a ``setup`` callable. ``batch_size`` calls
    ``setup(device, batch_size=N)``; ``setup_args`` are setup's other
    keywords (``--arg``); ``device``: the gpusim device whose CUDA build is
    modelled (default h100-sxm-80gb); the rest are the recorder's options
    (``gpusim_torch record --help``). Errors raise :class:`Error` with the
    recorder's message. ``.replay(device=...)`` on the result replays it.
    """
    out = _path(out, "out")
    try:
        import torch  # noqa: F401
    except ImportError as e:
        raise Error(f"record needs PyTorch ({e}): pip install torch (the CPU build is enough), or gpusim[torch]",
                    1) from None
    from gpusim_torch.cli import _load_setup, _record
    from gpusim_torch.recorder import STACK_ROOTS, RecordError
    STACK_ROOTS.add(record.__code__)  # the caller's frames are not the step's
    from gpusim_torch.session import time_limit
    if callable(step):  # named in messages and the trace's meta as module.qualname
        setup = step
        step_file = f"{getattr(step, '__module__', None) or '?'}.{getattr(step, '__qualname__', 'setup')}"
        name = name or getattr(step, "__name__", "setup")
    else:
        setup, step_file = None, _path(step, "step")
    args = argparse.Namespace(
        step_file=step_file, steps=steps, autocast=autocast, device_type="cuda", mode=mode, no_frames=not frames,
        bound=[f"{k}={v}" for k, v in (bounds or {}).items()], name=name, world_size=world_size, rank=rank,
        arg=[], arg_values=dict(setup_args or {}), arg_name="setup_args", target_device=device,
        cuda_torch_version=cuda_torch_version, sdpa_backend=sdpa_backend, timeout=timeout)
    if mode not in ("auto", "meta", "fake"):
        raise Error(f"record: mode {mode!r}: expected auto, meta or fake", 1)
    if timeout < 0 or timeout != timeout:
        raise Error(f"record: timeout: expected seconds >= 0 (0: no limit), got {timeout}", 1)
    try:
        if setup is None:
            with time_limit(timeout, f"loading {step_file}"):
                setup = _load_setup(step_file)
        rec = _record(args, setup, out, batch_size)
    except RecordError as e:
        raise Error(f"{step_file}: {e}", 1) from None
    except ValueError as e:
        raise Error(str(e), 1) from None
    allocations = sum(1 for e in rec.events if e["type"] == "alloc")
    return RecordResult(out=out, name=rec.name,
                        events=len(rec.events), allocations=allocations, _replay=replay)
