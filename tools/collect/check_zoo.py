#!/usr/bin/env python3
"""Predicted vs measured for the model zoo: records each case of a
collect_zoo.py measurement (zoo.json) on the CPU with the recorder, replays
it with gpusim on the measured device, and prints one row per case --
measured and predicted peak allocated / reserved and the start state, with
the error -- as a Markdown table (docs/validation_torch_zoo.md's, which
tools/gen_validation.py zoo writes from collect_rows and render_table).

    python3 tools/collect/check_zoo.py validation/h200_2026-12-04/zoo.json \
        --gpusim build/gpusim [--cases gpt2_gpu,...] [--json out.json]

The recording models the measured machine's CUDA build: --device is the
measured GPU's gpusim device and --cuda-torch-version the measured torch's
version (zoo.json `versions`), so the SDPA kernel is the one that ran there.
Cases that failed on the GPU are listed as not measured."""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import fork_recorder  # beside this file

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DEVICES = {"NVIDIA H200": "h200-sxm-141gb", "NVIDIA H100 80GB HBM3": "h100-sxm-80gb",
           "NVIDIA A100-SXM4-80GB": "a100-sxm-80gb"}


def replay(gpusim, trace, device):
    r = subprocess.run([gpusim, "replay", trace, "--device", device, "--format", "json"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip() or r.stdout.strip())
    return json.loads(r.stdout)


def find(d, *keys):
    """The first value under any of `keys`, searched depth-first."""
    if isinstance(d, dict):
        for k in keys:
            if k in d and not isinstance(d[k], (dict, list)):
                return d[k]
        for v in d.values():
            x = find(v, *keys)
            if x is not None:
                return x
    elif isinstance(d, list):
        for v in d:
            x = find(v, *keys)
            if x is not None:
                return x
    return None


def measured_device(zoo):
    """The measured GPU's gpusim device and the measured torch's major.minor."""
    ver = zoo["versions"]
    return DEVICES.get(ver.get("gpu"), "h100-sxm-80gb"), re.match(r"(\d+\.\d+)", ver["torch"]).group(1)


def collect_rows(zoo, gpusim, cases=(), keep=None, reuse=False, python=None, log=None):
    """One row per case of `zoo` (a zoo.json object) whose tag is in `cases`
    (all when empty): recorded on the CPU by `python` (default this
    interpreter) into `keep` (or a temporary folder), or with `reuse` the
    trace already there, and replayed on the measured device."""
    device, torch_ver = measured_device(zoo)
    want = set(cases)
    tmp = keep or tempfile.mkdtemp(prefix="gpusim_zoo_")
    os.makedirs(tmp, exist_ok=True)
    rows = []
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    recorder = fork_recorder.Client(python or sys.executable, env, tmp, cwd=ROOT)
    try:
        for c in zoo["cases"]:
            _collect_case(c, want, tmp, reuse, recorder, gpusim, device, torch_ver, log, rows)
    finally:
        recorder.close()
    return rows


def _collect_case(c, want, tmp, reuse, recorder, gpusim, device, torch_ver, log, rows):
    """Appends case `c`'s row to `rows` (collect_rows)."""
    if want and c["tag"] not in want:
        return
    row = {"case": c["tag"]}
    if "max_memory_allocated" not in c:
        row["error"] = "not measured: " + c.get("error", c.get("skipped", "?"))[:120]
        rows.append(row)
        return
    trace = os.path.join(tmp, c["tag"] + ".trace")
    row["trace"] = trace
    argv = ["record", os.path.join(ROOT, c["step_file"]),
            "--arg", "size=" + c["size"], "--arg", "grad_ckpt=" + str(c["grad_ckpt"]).lower(),
            "--device", device, "--cuda-torch-version", torch_ver, "--out", trace]
    t0 = time.time()
    if reuse and os.path.isfile(trace):
        r = subprocess.CompletedProcess(argv, 0, "", "")
        if log:
            log("%s: reusing %s" % (c["tag"], trace))
    else:
        r = recorder.run(argv)
        row["record_s"] = round(time.time() - t0, 1)
        if log:
            log("%s: recorded in %.1f s" % (c["tag"], row["record_s"]))
    if r.returncode != 0:
        row["error"] = "record failed: " + (r.stderr.strip().splitlines() or ["?"])[-1][:200]
        rows.append(row)
        return
    try:
        rep = replay(gpusim, trace, device)
    except RuntimeError as e:
        row["error"] = "replay failed: " + str(e)[:200]
        rows.append(row)
        return
    peak = find(rep, "peak_allocated_bytes")
    reserved = find(rep, "peak_reserved_bytes")
    start = find(rep, "step_start_live_bytes")
    row.update(measured_alloc=c["max_memory_allocated"], predicted_alloc=peak,
               measured_reserved=c["max_memory_reserved"], predicted_reserved=reserved,
               measured_start=c.get("allocated_before"), predicted_start=start,
               measured_step_s=c.get("median_step_s"), predicted_step_s=find(rep, "step_time_s"),
               sdpa=", ".join(sorted(k.split("::")[1].replace("_scaled_dot_product_", "")
                                     for k in c.get("sdpa_ops", {})
                                     if "attention" in k and "backward" not in k
                                     and k != "aten::scaled_dot_product_attention")) or "-")
    rows.append(row)


def err(a, b):
    return "%+.2f%%" % (100.0 * (b - a) / a) if a and b is not None else "?"


def secs(x):
    return "%.4f s" % x if x is not None else "?"


def render_table(rows):
    """The Markdown table of docs/validation_torch_zoo.md."""
    out = ["| case | SDPA (measured) | peak allocated measured | predicted | error | peak reserved measured "
           "| predicted | error | median step measured | predicted | error |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "error" in r:
            out.append("| %s | %s | | | | | | | | | |" % (r["case"], r["error"]))
            continue
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["case"], r["sdpa"], format(r["measured_alloc"], ","), format(r["predicted_alloc"] or 0, ","),
            err(r["measured_alloc"], r["predicted_alloc"]), format(r["measured_reserved"], ","),
            format(r["predicted_reserved"] or 0, ","), err(r["measured_reserved"], r["predicted_reserved"]),
            secs(r["measured_step_s"]), secs(r["predicted_step_s"]),
            err(r["measured_step_s"], r["predicted_step_s"])))
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("zoo_json")
    ap.add_argument("--gpusim", default=os.path.join(ROOT, "build", "gpusim"))
    ap.add_argument("--cases", default="")
    ap.add_argument("--json", help="write the rows here too")
    ap.add_argument("--keep", help="keep the traces in this folder")
    ap.add_argument("--reuse", action="store_true",
                    help="replay the traces already in --keep instead of recording them again "
                         "(after a gpusim change; record again after a recorder change)")
    args = ap.parse_args()
    if args.reuse and not args.keep:
        ap.error("--reuse needs --keep DIR")
    with open(args.zoo_json) as f:
        zoo = json.load(f)
    rows = collect_rows(zoo, args.gpusim, [c for c in args.cases.split(",") if c], args.keep, args.reuse)
    print(render_table(rows))
    if args.json:
        device, torch_ver = measured_device(zoo)
        with open(args.json, "w") as f:
            json.dump({"device": device, "torch": torch_ver, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
