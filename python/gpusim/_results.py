"""The package's results: frozen dataclasses of the fields most read, built
from the JSON document the CLI prints with ``--format json``.

Every result keeps that document: ``to_dict()`` returns a copy of it (the
same as ``json.loads`` of the CLI's output), ``to_json()`` its text, and the
results whose document is an object also read as that mapping
(``r["memory"]["peak_bytes"]``, ``r == json.loads(cli_output)``), as the
package's earlier dict results did. The tables (advise's points, compare's
rows, explain's buffers, the devices) have ``to_records()`` (a list of flat
dicts) and ``to_pandas()`` (a DataFrame of those; needs pandas).
"""
from __future__ import annotations

import copy
import html
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from ._config import setting, settings

if TYPE_CHECKING:
    import pandas


def _frame(records: List[Dict[str, Any]], columns: Sequence[str]) -> "pandas.DataFrame":
    try:
        import pandas as pd
    except ImportError as e:
        raise ImportError(f"to_pandas() needs pandas ({e}): pip install pandas, or gpusim[pandas]; "
                          "to_records() gives the same rows without it") from None
    return pd.DataFrame.from_records(records, columns=list(columns))


def _columns(records: List[Dict[str, Any]], first: Sequence[str] = ()) -> List[str]:
    """Every key of `records`, `first` first, then in order of appearance."""
    cols = list(first)
    for r in records:
        for k in r:
            if k not in cols:
                cols.append(k)
    return cols


class _Document:
    """The CLI's JSON document behind a result."""

    data: Any

    def to_dict(self) -> Any:
        """A copy of the JSON document ``gpusim ... --format json`` prints."""
        return copy.deepcopy(self.data)

    def to_json(self, indent: Optional[int] = 2) -> str:
        return json.dumps(self.data, indent=indent)


class _Mapping(_Document, Mapping[str, Any]):
    """A result whose document is a JSON object reads as that mapping."""

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)


def _doc() -> Any:
    return field(repr=False, compare=False)


# --- run ---------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class RunResult(_Mapping):
    """``gpusim run CONFIG --format json``: one simulated training step (for
    a Megatron-LM launch line, its JSON with the peak rank's step)."""

    config_file: str
    device: str
    framework: str
    peak_bytes: int
    capacity_bytes: int
    fits: bool
    step_time_s: float
    tokens_per_s_per_device: float
    allocator: str
    breakdown: Dict[str, int]
    timeline_svg: str = field(repr=False, compare=False)
    data: Dict[str, Any] = _doc()

    @classmethod
    def from_json(cls, data: Dict[str, Any], timeline_svg: str = "") -> "RunResult":
        cfg, mem, t = data.get("config", {}), data.get("memory", {}), data.get("time", {})
        return cls(config_file=cfg.get("file", ""), device=cfg.get("device", ""), framework=cfg.get("framework", ""),
                   peak_bytes=mem.get("peak_bytes", 0), capacity_bytes=mem.get("capacity_bytes", 0),
                   fits=bool(mem.get("fits", False)), step_time_s=t.get("step_time_s", 0.0),
                   tokens_per_s_per_device=t.get("tokens_per_s_per_device", 0.0),
                   allocator=data.get("allocator", {}).get("name", ""),
                   breakdown=dict(data.get("breakdown", {})),
                   timeline_svg=timeline_svg, data=data)

    def plot(self) -> Any:
        """The memory timeline as an IPython SVG (or the SVG text without IPython)."""
        try:
            from IPython.display import SVG
        except ImportError:
            return self.timeline_svg
        return SVG(self.timeline_svg)

    def _repr_html_(self) -> str:
        mem, alloc, t = self.get("memory", {}), self.get("allocator", {}), self.get("time", {})
        rows = [("peak", f"{mem.get('peak_bytes', 0):,} B"), ("capacity", f"{mem.get('capacity_bytes', 0):,} B"),
                ("fits", "yes" if mem.get("fits") else "NO"), ("allocator", alloc.get("name", "")),
                ("step time", f"{t.get('step_time_s', 0):.4f} s")]
        if "jax_arena_fits" in mem:
            rows.append(("JAX arena", "fits" if mem["jax_arena_fits"] else "does NOT fit"))
        table = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
                        for k, v in rows)
        svg = self.timeline_svg[self.timeline_svg.find("<svg"):] if "<svg" in self.timeline_svg else ""
        return f"<div><table>{table}</table><div style='max-width:100%;overflow-x:auto'>{svg}</div></div>"


# Kept for code that named the old dict result.
Result = RunResult


# --- replay ------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class ReplayResult(_Mapping):
    """``gpusim replay TRACE --format json``: a recorded trace replayed
    through an allocator (and, for a native trace, its simulated step)."""

    source: str
    format: str
    allocator: str
    capacity_bytes: int
    peak_allocated_bytes: int
    peak_reserved_bytes: int
    oom: Optional[Dict[str, Any]]
    step_time_s: Optional[float]
    data: Dict[str, Any] = _doc()

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "ReplayResult":
        a = data.get("allocator", {})
        step = data.get("step")
        return cls(source=data.get("source", ""), format=data.get("format", ""), allocator=a.get("name", ""),
                   capacity_bytes=a.get("capacity_bytes", 0), peak_allocated_bytes=a.get("peak_allocated_bytes", 0),
                   peak_reserved_bytes=a.get("peak_reserved_bytes", 0), oom=data.get("oom"),
                   step_time_s=step.get("step_time_s") if isinstance(step, dict) else None, data=data)


# --- advise ------------------------------------------------------------------

@dataclass(frozen=True)
class AdvicePoint:
    """One grid point: its settings as {path: typed value}."""

    index: int
    settings: Dict[str, Any]
    ok: bool
    error: str
    peak_bytes: int
    step_time_s: float
    tokens_per_s_per_device: float
    fits: bool
    on_front: bool
    peak_rank: Optional[str] = None

    @classmethod
    def from_json(cls, p: Dict[str, Any]) -> "AdvicePoint":
        return cls(index=p["index"], settings=settings(p["settings"]), ok=p["ok"], error=p["error"],
                   peak_bytes=p["peak_bytes"], step_time_s=p["step_time_s"],
                   tokens_per_s_per_device=p["tokens_per_s_per_device"], fits=p["fits"], on_front=p["on_front"],
                   peak_rank=p.get("peak_rank"))


@dataclass(frozen=True, eq=False)
class AdviseResult(_Mapping):
    """``gpusim advise CONFIG --format json``: every grid point, the Pareto
    front (``on_front``) and the fastest point that fits (``winner``)."""

    budget_bytes: int
    winner_index: Optional[int]
    points: Tuple[AdvicePoint, ...]
    data: Dict[str, Any] = _doc()

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "AdviseResult":
        return cls(budget_bytes=data["budget_bytes"], winner_index=data["winner_index"],
                   points=tuple(AdvicePoint.from_json(p) for p in data["points"]), data=data)

    @property
    def axes(self) -> List[str]:
        """The grid's setting paths, in axis order."""
        return list(self.points[0].settings) if self.points else []

    @property
    def winner(self) -> Optional[AdvicePoint]:
        return next((p for p in self.points if p.index == self.winner_index), None)

    @property
    def front(self) -> List[AdvicePoint]:
        return [p for p in self.points if p.on_front]

    def to_records(self) -> List[Dict[str, Any]]:
        """One dict per grid point: each axis's path with its typed value,
        then the point's fields and ``winner``."""
        rows = []
        for p in self.points:
            row: Dict[str, Any] = dict(p.settings)
            row.update(index=p.index, ok=p.ok, peak_bytes=p.peak_bytes, step_time_s=p.step_time_s,
                       tokens_per_s_per_device=p.tokens_per_s_per_device, fits=p.fits, on_front=p.on_front,
                       winner=p.index == self.winner_index, error=p.error)
            if p.peak_rank is not None:
                row["peak_rank"] = p.peak_rank
            rows.append(row)
        return rows

    def to_pandas(self) -> "pandas.DataFrame":
        """A DataFrame, one row per grid point (to_records' columns)."""
        rows = self.to_records()
        return _frame(rows, _columns(rows, self.axes))


# --- compare -----------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class CompareResult(_Document):
    """``gpusim compare``: for a config with ``vary``, one row per value
    (``to_dict()`` is the CLI's JSON array); for a trace, one row per
    allocator (its JSON object ``{"allocators": [replay, ...]}``)."""

    kind: str  # "config" or "trace"
    axis: str  # the varied path, or "allocator"
    rows: Tuple[Dict[str, Any], ...]
    data: Any = _doc()

    @classmethod
    def from_json(cls, data: Any) -> "CompareResult":
        rows = []
        if isinstance(data, list):
            axis = setting(data[0]["setting"])[0] if data else ""
            for r in data:
                path, value = setting(r["setting"])
                row = {path: value}
                row.update((k, v) for k, v in r.items() if k != "setting")
                rows.append(row)
            return cls(kind="config", axis=axis, rows=tuple(rows), data=data)
        for r in data["allocators"]:
            a = dict(r["allocator"])
            row = {"allocator": a.pop("name")}
            row.update(a)
            row["oom"] = r.get("oom") is not None
            rows.append(row)
        return cls(kind="trace", axis="allocator", rows=tuple(rows), data=data)

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        return iter(self.rows)

    def to_records(self) -> List[Dict[str, Any]]:
        """One flat dict per row, the varied path (or ``allocator``) first
        with its typed value."""
        return [dict(r) for r in self.rows]

    def to_pandas(self) -> "pandas.DataFrame":
        rows = self.to_records()
        return _frame(rows, _columns(rows, [self.axis]))


# --- explain, diff, validate, viz, devices -----------------------------------

@dataclass(frozen=True, eq=False)
class ExplainResult(_Mapping):
    """``gpusim explain --format json``: the largest buffers live at the
    peak (a config's step, or a trace's)."""

    peak_bytes: int
    buffers: Tuple[Dict[str, Any], ...]
    data: Dict[str, Any] = _doc()

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "ExplainResult":
        if "buffers" in data:  # a run config's step
            return cls(peak_bytes=data["peak_bytes"], buffers=tuple(data["buffers"]), data=data)
        return cls(peak_bytes=data["peak_live_bytes"], buffers=tuple(data["largest"]), data=data)

    def to_records(self) -> List[Dict[str, Any]]:
        return [dict(b) for b in self.buffers]

    def to_pandas(self) -> "pandas.DataFrame":
        rows = self.to_records()
        return _frame(rows, _columns(rows))


@dataclass(frozen=True, eq=False)
class DiffResult(_Mapping):
    """``gpusim diff --format json``: A (the config, base overrides) against
    B (A plus the overrides), memory and step time attributed."""

    a: str
    b: str
    peak_delta_bytes: int
    temp_delta_bytes: int
    step_time_a_s: float
    step_time_b_s: float
    data: Dict[str, Any] = _doc()

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "DiffResult":
        m, t = data["memory"], data["time"]
        return cls(a=data["a"], b=data["b"], peak_delta_bytes=m["peak_delta_bytes"],
                   temp_delta_bytes=m["temp_delta_bytes"], step_time_a_s=t["step_time_a_s"],
                   step_time_b_s=t["step_time_b_s"], data=data)


@dataclass(frozen=True, eq=False)
class ValidateResult(_Mapping):
    """``gpusim validate --format json``: what the input is; it is valid
    (an invalid one raises :class:`gpusim.Error`)."""

    file: str
    kind: str
    data: Dict[str, Any] = _doc()

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "ValidateResult":
        return cls(file=data["file"], kind=data["kind"], data=data)


@dataclass(frozen=True, eq=False)
class VizResult(_Mapping):
    """``gpusim viz --format json``: the files written."""

    out: str
    files: Tuple[str, ...]
    snapshot: Optional[str]
    data: Dict[str, Any] = _doc()

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "VizResult":
        return cls(out=data["out"], files=tuple(data["files"]), snapshot=data.get("snapshot"), data=data)

    @property
    def report(self) -> str:
        """The path of report.html."""
        return next(f for f in self.files if f.endswith("report.html"))


@dataclass(frozen=True)
class Device:
    """One modelled device (``gpusim devices``)."""

    name: str
    description: str
    sms: int
    cuda_total_bytes: int
    context_reserve_bytes: int
    usable_bytes: int
    hbm_bandwidth_bytes_per_s: float
    bf16_flops_per_s: float
    fp8_flops_per_s: float  # 0: no fp8 tensor cores (flops.fp8 absent)
    tf32_flops_per_s: float
    fp32_flops_per_s: float
    nvlink_bytes_per_s: float
    pcie_bytes_per_s: float


@dataclass(frozen=True, eq=False)
class Devices(_Mapping):
    """``gpusim devices --format json``."""

    devices: Tuple[Device, ...]
    data: Dict[str, Any] = _doc()

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "Devices":
        return cls(devices=tuple(Device(**d) for d in data["devices"]), data=data)

    @property
    def names(self) -> List[str]:
        return [d.name for d in self.devices]

    def by_name(self, name: str) -> Device:
        for d in self.devices:
            if d.name == name:
                return d
        raise KeyError(f"no device {name!r}; devices: {', '.join(self.names)}")

    def to_records(self) -> List[Dict[str, Any]]:
        return [dict(d) for d in self.data["devices"]]

    def to_pandas(self) -> "pandas.DataFrame":
        rows = self.to_records()
        return _frame(rows, _columns(rows))


# --- record --------------------------------------------------------------------

@dataclass(frozen=True)
class RecordResult:
    """A step recorded by gpusim_torch to ``out`` (a gpusim native trace)."""

    out: str
    name: str
    events: int
    allocations: int

    def to_dict(self) -> Dict[str, Any]:
        return {"out": self.out, "name": self.name, "events": self.events, "allocations": self.allocations}

    # gpusim.replay, handed over by gpusim.record (_api.py), so that this
    # module imports nothing of _api's (no import cycle).
    _replay: Optional[Callable[..., ReplayResult]] = field(default=None, repr=False, compare=False)

    def replay(self, **kwargs: Any) -> ReplayResult:
        """``gpusim.replay(out, **kwargs)``."""
        if self._replay is None:
            raise TypeError("RecordResult.replay: this result was not made by gpusim.record; "
                            "call gpusim.replay(result.out) instead")
        return self._replay(self.out, **kwargs)
