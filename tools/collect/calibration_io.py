"""Shared helpers for the collection scripts: writing gpusim calibration and
run-config files (plain YAML emitted by hand, so no PyYAML is needed), timing,
and mapping a GPU's name to a gpusim device file (configs/devices/NAME.yaml).

The calibration file format is documented in sim/config/calibration_spec.h.
"""

import json
import os
import platform
import statistics
import time

# GPU names as CUDA / JAX report them -> configs/devices/NAME.yaml.
_DEVICE_PATTERNS = [
    ("H200", "h200-sxm-141gb"),
    ("H100 PCIe", "h100-pcie-80gb"),
    ("H100", "h100-sxm-80gb"),
    ("A100-SXM4-40GB", "a100-sxm-40gb"),
    ("A100-SXM-40GB", "a100-sxm-40gb"),
    ("A100", "a100-sxm-80gb"),
]
# Used when no GPU is present (CPU fallback): the numbers are then not
# comparable with any device and every case is written with fit: false.
FALLBACK_DEVICE = "h100-sxm-80gb"


def gpusim_device_name(gpu_name):
    """The gpusim device file for a GPU name, or None when unknown."""
    if not gpu_name:
        return None
    for pattern, name in _DEVICE_PATTERNS:
        if pattern.lower() in gpu_name.lower():
            return name
    return None


def median_step_time(step, warmup=3, iters=10, sync=None):
    """Median wall time of `step()` over `iters` warm calls (after `warmup`).
    `sync` is called after each step to wait for the device."""
    for _ in range(warmup):
        step()
        if sync:
            sync()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        step()
        if sync:
            sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times


def _scalar(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    s = str(v)
    return json.dumps(s)  # a JSON string is a valid YAML double-quoted scalar


def to_yaml(value, indent=0):
    """Block YAML for dicts/lists of scalars (enough for gpusim's files)."""
    pad = "  " * indent
    lines = []
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, (dict, list)) and v:
                lines.append(f"{pad}{k}:")
                lines.append(to_yaml(v, indent + 1))
            elif isinstance(v, list):
                lines.append(f"{pad}{k}: []")
            else:
                lines.append(f"{pad}{k}: {_scalar(v)}")
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict):
                body = to_yaml(item, indent + 1).lstrip()
                lines.append(f"{pad}- {body}")
            elif isinstance(item, list):
                lines.append(f"{pad}- [{', '.join(_scalar(x) for x in item)}]")
            else:
                lines.append(f"{pad}- {_scalar(item)}")
    return "\n".join(lines)


def write_yaml(path, header, value):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        for line in header.strip().splitlines():
            f.write(f"# {line}\n" if line else "#\n")
        f.write(to_yaml(value) + "\n")


def host_description():
    return f"{platform.node()} ({platform.machine()}, {platform.system()} {platform.release()})"


def calibration_case(name, config, overrides, step_time_s, peak_bytes, metric, hardware,
                     software, source, fit):
    """One entry of a calibration file's `cases:`."""
    measured = {}
    if step_time_s is not None:
        measured["step_time_s"] = float(step_time_s)
    if peak_bytes is not None and metric is not None:
        measured["peak_bytes"] = int(peak_bytes)
        measured["metric"] = metric
    case = {"name": name, "config": config, "set": list(overrides), "measured": measured,
            "hardware": hardware, "software": software, "source": source,
            "fit": bool(fit and step_time_s is not None)}
    if not case["set"]:
        del case["set"]
    return case
