"""How the package's arguments become the CLI's: configs (a path, a bundled
NAME, or a dict written as YAML text), ``--set`` overrides, and the typed
values of ``path=value`` settings."""
from __future__ import annotations

import json
import math
import numbers
import os
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _gpusim
from ._errors import Error

#: A run config: a path, the NAME of a bundled config (``"llama7b"``), or a
#: dict with the YAML file's keys. Where a trace is accepted, its path.
Config = Union[str, "os.PathLike[str]", Mapping[str, Any]]
#: A ``--set`` value: written as the CLI would read it (``True`` is ``true``,
#: a list ``[a,b]``).
SetValue = Union[str, int, float, bool, None, Sequence[Any]]

#: The name a dict config has in error messages ("<dict>:3:14: batch...").
DICT_LABEL = "<dict>"


@dataclass(frozen=True)
class Input:
    """One command's input as the CLI takes it."""

    arg: str  # the command-line argument: a file, or DICT_LABEL
    text: Optional[str]  # a dict config's YAML
    is_config: bool  # a run config (YAML or dict), not a trace or an HLO module


def command_input(config: Config, what: str = "config") -> Input:
    """A config or trace argument: a dict becomes YAML text; a path or NAME
    is resolved by the CLI's rule (Note [Run config names] in
    sim/config/loader.h), so an unknown NAME raises :class:`Error` listing the
    bundled configs."""
    if isinstance(config, Mapping):
        return Input(DICT_LABEL, to_yaml(config), True)
    if isinstance(config, os.PathLike):
        config = os.fspath(config)
    if not isinstance(config, str):
        raise TypeError(f"{what} must be a path (str or os.PathLike), a bundled config name or a dict, "
                        f"not {type(config).__name__}")
    try:
        resolved = _gpusim.resolve_config(config)
    except ValueError as e:
        raise Error(str(e), 1) from None
    return Input(resolved, None, resolved.endswith((".yaml", ".yml")))


# --- dict configs as YAML ---------------------------------------------------

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")


def _key(k: Any, path: str) -> str:
    if not isinstance(k, str):
        where = f" in {path}" if path else ""
        raise TypeError(f"config key {k!r}{where}: keys must be strings")
    return k if _PLAIN_KEY.match(k) else json.dumps(k)


def _flow(v: Any, path: str) -> str:
    """`v` as a YAML flow node (JSON's forms, which YAML reads)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, numbers.Integral):
        return str(int(v))
    if isinstance(v, numbers.Real):
        f = float(v)
        if math.isnan(f):
            return ".nan"
        if math.isinf(f):
            return ".inf" if f > 0 else "-.inf"
        text = repr(f)
        # 1e-07 is a string to YAML 1.1 readers; 1.0e-07 a float to all.
        return text.replace("e", ".0e") if "e" in text and "." not in text else text
    if isinstance(v, os.PathLike):
        v = os.fspath(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, Mapping):
        items = (f"{_key(k, path)}: {_flow(x, _join(path, k))}" for k, x in v.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_flow(x, f"{path}[{i}]") for i, x in enumerate(v)) + "]"
    raise TypeError(f"config {path}: cannot write a {type(v).__name__} as YAML "
                    "(expected a dict, list, str, number, bool or None)")


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _block(m: Mapping[Any, Any], indent: int, path: str, lines: List[str]) -> None:
    pad = "  " * indent
    for k, v in m.items():
        key = _key(k, path)
        if isinstance(v, Mapping) and v:
            lines.append(f"{pad}{key}:")
            _block(v, indent + 1, _join(path, k), lines)
        else:
            lines.append(f"{pad}{key}: {_flow(v, _join(path, k))}")


def to_yaml(config: Mapping[str, Any]) -> str:
    """A dict config as the YAML file it stands for: mappings in block
    style, one key a line (so an error's line:column points at its key),
    sequences and scalars in flow style; strings double-quoted. A key that
    is not a string, or a value of another type, is a TypeError naming its
    key path."""
    lines: List[str] = []
    _block(config, 0, "", lines)
    return "\n".join(lines) + "\n"


# --- --set overrides ---------------------------------------------------------

def set_value(v: SetValue) -> str:
    """A value as ``--set path=VALUE`` writes it (parsed as YAML there)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(set_value(x) for x in v) + "]"
    return str(v)


def set_args(sets: Optional[Mapping[str, SetValue]], overrides: Mapping[str, SetValue]) -> List[str]:
    """``--set`` words: `sets` ({"batch.per_device": 2}) then keywords with
    ``__`` for ``.`` (``batch__per_device=2``); ``allocator=NAME`` is
    ``allocator.impl=NAME``."""
    out: List[str] = []
    for k, v in (sets or {}).items():
        out += ["--set", f"{k}={set_value(v)}"]
    for k, v in overrides.items():
        path = "allocator.impl" if k == "allocator" else k.replace("__", ".")
        out += ["--set", f"{path}={set_value(v)}"]
    return out


def vary_args(vary: Union[str, Sequence[str], Mapping[str, Sequence[SetValue]], None]) -> List[str]:
    """``--vary`` words from "path=v1,v2", a list of those, or
    {path: [v1, v2]}."""
    if vary is None:
        return []
    if isinstance(vary, str):
        vary = [vary]
    if isinstance(vary, Mapping):
        items = []
        for k, values in vary.items():
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
                raise TypeError(f"vary[{k!r}]: expected a list of values, got {type(values).__name__}")
            items.append(f"{k}={','.join(set_value(x) for x in values)}")
        vary = items
    out: List[str] = []
    for v in vary:
        out += ["--vary", v]
    return out


# --- typed settings ----------------------------------------------------------

_INT = re.compile(r"[-+]?[0-9]+\Z")
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?\Z")


def typed(text: str) -> Any:
    """A setting's value as YAML's core schema reads a plain scalar: int,
    float, bool, None, else the string."""
    if _INT.match(text):
        return int(text)
    if _FLOAT.match(text):
        return float(text)
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "~"):
        return None
    return text


def setting(text: str) -> Tuple[str, Any]:
    """ "path=value" → (path, typed value)."""
    path, eq, value = text.partition("=")
    if not eq:
        raise ValueError(f"setting {text!r}: expected path=value")
    return path, typed(value)


def settings(texts: Sequence[str]) -> Dict[str, Any]:
    return dict(setting(t) for t in texts)
