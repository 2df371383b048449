#!/usr/bin/env python3
"""What XLA-GPU builds for tests/hlo_jax/llama_step.py: the validation data
of gpusim's HLO front-end (issue: temps within 2% of XLA-GPU).

For each variant (layers, param_scan_axis, remat policy, rolled/unrolled),
on this machine's backend (run it where JAX sees the GPU):
  - jax.jit(step).lower(*ShapeDtypeStructs): the unoptimised module
    (as_text(dialect="hlo")), gzip'd -- what `gpusim run STEP.hlo` imports;
  - lowered.compile(): compiled.memory_analysis() (argument, output, alias,
    temp, generated code bytes) and compiled.as_text() (the module after
    XLA-GPU's passes: fusions, copies, loops, schedule), gzip'd;
  - with --run, the variants named there are run on zero-filled arrays:
    the median of 3 step times after one warm-up, and the device's
    peak_bytes_in_use (jax.Device.memory_stats()).
Writes OUT/xla_gpu.json and OUT/hlo/*.hlo.gz. A time budget stops starting
new variants. XLA_PYTHON_CLIENT_PREALLOCATE=false is set so that the
device's memory stats show what the step used."""

import argparse
import gzip
import json
import os
import statistics
import sys
import time
import traceback

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "hlo_jax"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import llama_step  # noqa: E402

# (layers, axis, remat, mode); seq 2048, batch 1, Llama2-7B widths.
PLAN = [(16, 0, "full", "rolled"), (16, 1, "full", "rolled"), (32, 1, "full", "rolled"),
        (16, 0, "dots", "rolled"), (16, 0, "dots_no_batch", "rolled"), (16, 0, "none", "rolled"),
        (4, 0, "full", "unrolled"), (4, 0, "full", "rolled"), (32, 0, "dots", "rolled")]


def write_gz(path, text):
    with gzip.open(path, "wt", compresslevel=6) as f:
        f.write(text)


def variant(layers, axis, remat, mode, out, run, seq_len):
    tag = "llama7b_L%d_axis%d_%s_%s" % (layers, axis, remat, mode)
    rec = {"tag": tag, "n_layers": layers, "param_scan_axis": axis, "remat": remat, "mode": mode,
           "seq_len": seq_len}
    t = time.time()
    fn, args = llama_step.make_step(str(axis), mode, n_layers=layers, seq_len=seq_len, remat=remat)
    lowered = fn.lower(*args)
    write_gz(os.path.join(out, "hlo", tag + ".hlo.gz"), lowered.as_text(dialect="hlo"))
    compiled = lowered.compile()
    rec["compile_s"] = round(time.time() - t, 2)
    ma = compiled.memory_analysis()
    rec["memory_analysis"] = {k: int(getattr(ma, k)) for k in dir(ma)
                              if k.endswith("_in_bytes") and isinstance(getattr(ma, k), int)}
    write_gz(os.path.join(out, "hlo", tag + ".opt.hlo.gz"), compiled.as_text())
    if run:
        dev = jax.devices()[0]
        state, batch = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), args)
        batch = dict(batch)
        batch["targets_segmentation"] = jnp.ones_like(batch["targets_segmentation"])
        batch["inputs_segmentation"] = jnp.ones_like(batch["inputs_segmentation"])
        state, m = compiled(state, batch)
        jax.block_until_ready(m)
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            state, m = compiled(state, batch)
            jax.block_until_ready((state, m))
            times.append(time.perf_counter() - t0)
        rec["step_times_s"] = [round(x, 6) for x in times]
        rec["median_step_s"] = round(statistics.median(times), 6)
        stats = dev.memory_stats() or {}
        rec["device_memory_stats"] = {k: int(v) for k, v in stats.items() if isinstance(v, int)}
        del state, batch, m
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget", type=float, default=120.0)
    ap.add_argument("--run", default="llama7b_L16_axis0_full_rolled",
                    help="comma-separated tags also run for step time (zero-filled arrays)")
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--layers-scale", type=int, default=1, help="divide the layer counts (CPU dry run)")
    args = ap.parse_args()
    start = time.time()
    out = os.path.abspath(args.out)
    os.makedirs(os.path.join(out, "hlo"), exist_ok=True)
    info = {"jax": jax.__version__, "backend": jax.default_backend(),
            "devices": [str(d) for d in jax.devices()], "device_kind": jax.devices()[0].device_kind,
            "how": __doc__, "command": " ".join(sys.argv), "variants": []}
    print("collect_xla_gpu:", info["jax"], info["backend"], info["device_kind"], flush=True)
    runs = set(args.run.split(","))
    for layers, axis, remat, mode in PLAN:
        layers = max(1, layers // args.layers_scale)
        tag = "llama7b_L%d_axis%d_%s_%s" % (layers, axis, remat, mode)
        if time.time() - start > args.budget:
            info["variants"].append({"tag": tag, "skipped": "time budget"})
            continue
        t = time.time()
        try:
            rec = variant(layers, axis, remat, mode, out, tag in runs, args.seq_len)
        except Exception as e:  # noqa: BLE001 - recorded
            rec = {"tag": tag, "error": ("%s: %s" % (type(e).__name__, e))[:2000],
                   "traceback": traceback.format_exc()[-2000:]}
        rec["wall_s"] = round(time.time() - t, 2)
        info["variants"].append(rec)
        print("%-40s %s" % (tag, rec.get("error", "")[:200] or "%s step %s (%.1f s)" % (
            rec.get("memory_analysis", {}).get("temp_size_in_bytes"), rec.get("median_step_s"), rec["wall_s"])),
            flush=True)
        with open(os.path.join(out, "xla_gpu.json"), "w") as f:
            json.dump(info, f, indent=1)
    with open(os.path.join(out, "xla_gpu.json"), "w") as f:
        json.dump(info, f, indent=1)
    print("collect_xla_gpu: done in %.1f s" % (time.time() - start), flush=True)


if __name__ == "__main__":
    main()
