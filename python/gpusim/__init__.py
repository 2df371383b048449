"""gpusim from Python: the simulator's run, replay and advise, returning the
same dicts as ``gpusim ... --format json`` (README "JSON output").

    >>> import gpusim
    >>> r = gpusim.run("configs/llama7b.yaml", batch__per_device=2)
    >>> r["memory"]["peak_bytes"]
    >>> r                      # in a notebook: summary and memory timeline

Overrides are ``--set path=value``: pass ``sets={"batch.per_device": 2}`` or
keywords with ``__`` for ``.`` (``batch__per_device=2``); ``allocator="bfc"``
is ``--set allocator.impl=bfc``. Errors raise :class:`gpusim.Error` with the
CLI's message. The simulation runs without the GIL.
"""
import html
import json
import os

from . import _gpusim

Error = _gpusim.Error
__version__ = getattr(_gpusim, "__version__", "unknown")

_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
if os.path.isdir(_DATA):  # an installed package ships configs and the snapshot converter
    _gpusim.set_data_dir(_DATA)


def _value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_value(x) for x in v) + "]"
    return str(v)


def _sets(sets, kw):
    out = []
    for k, v in (sets or {}).items():
        out.append(f"{k}={_value(v)}")
    for k, v in kw.items():
        if k == "allocator":
            out.append(f"allocator.impl={_value(v)}")
        else:
            out.append(f"{k.replace('__', '.')}={_value(v)}")
    return out


def _path(config):
    if isinstance(config, os.PathLike):
        return os.fspath(config)
    if isinstance(config, str):
        return config
    raise TypeError(f"config must be a path (str or os.PathLike), not {type(config).__name__}")


class Result(dict):
    """A run's JSON dict; shows its summary and memory timeline in a notebook."""

    def __init__(self, data, timeline_svg):
        super().__init__(data)
        self.timeline_svg = timeline_svg

    def plot(self):
        """The memory timeline as an IPython SVG (or the SVG text without IPython)."""
        try:
            from IPython.display import SVG
        except ImportError:
            return self.timeline_svg
        return SVG(self.timeline_svg)

    def _repr_html_(self):
        mem, alloc, t = self.get("memory", {}), self.get("allocator", {}), self.get("time", {})
        rows = [("peak", f"{mem.get('peak_bytes', 0):,} B"), ("capacity", f"{mem.get('capacity_bytes', 0):,} B"),
                ("fits", "yes" if mem.get("fits") else "NO"), ("allocator", alloc.get("name", "")),
                ("step time", f"{t.get('step_time_s', 0):.4f} s")]
        if "jax_arena_fits" in mem:
            rows.append(("JAX arena", "fits" if mem["jax_arena_fits"] else "does NOT fit"))
        table = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
                        for k, v in rows)
        svg = self.timeline_svg[self.timeline_svg.find("<svg"):]
        return f"<div><table>{table}</table><div style='max-width:100%;overflow-x:auto'>{svg}</div></div>"


def run(config_or_path, sets=None, **kw):
    """``gpusim run CONFIG --set ... --format json`` as a dict (a :class:`Result`)."""
    doc, svg = _gpusim.run(_path(config_or_path), _sets(sets, kw))
    return Result(json.loads(doc), svg)


def replay(trace, allocator="pytorch_caching", device="", device_index=-1, check_addresses=False, cold_start=False,
           **options):
    """``gpusim replay TRACE --allocator A --set allocator.K=V ... --format json`` as a dict.

    ``device``, ``device_index``, ``check_addresses`` and ``cold_start`` are the CLI's
    ``--device``, ``--device-index``, ``--check-addresses`` and ``--cold-start``; other
    keywords are allocator options (``expandable_segments=True``).
    """
    sets = [f"allocator.impl={allocator}"] + [f"allocator.{k}={_value(v)}" for k, v in options.items()]
    return json.loads(_gpusim.replay(_path(trace), sets, device or "", device_index, check_addresses, cold_start))


def advise(config_or_path, budget="", vary=(), sets=None, jobs=0, **kw):
    """``gpusim advise CONFIG [--budget B] [--vary path=v1,v2]... --format json`` as a dict.

    ``vary`` is a list of ``"path=v1,v2"`` strings or a dict ``{path: [v1, v2]}``.
    """
    if isinstance(vary, dict):
        vary = [f"{k}={','.join(_value(x) for x in v)}" for k, v in vary.items()]
    return json.loads(_gpusim.advise(_path(config_or_path), _sets(sets, kw), list(vary), str(budget or ""), jobs))


__all__ = ["Error", "Result", "advise", "replay", "run", "__version__"]
