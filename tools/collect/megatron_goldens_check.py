#!/usr/bin/env python3
"""A held-out check of gpusim against every GPT and MoE functional test of
Megatron-LM's CI at one commit that validation/megatron_functional.json does
not hold: its golden values (DGX A100 and DGX H100) through gpusim, read from a
local git mirror (nothing is fetched; nothing is written).

    tools/collect/megatron_goldens_check.py --mirror DIR [--gpusim BUILD/gpusim]

DIR: a git directory holding megatron_functional.COMMIT (`fetch
github:NVIDIA/Megatron-LM`). Each case is read as megatron_functional.py reads
a curated one (collect_case: the launch line, the world size, the median
steady iteration time, the logged rank's max allocated); cases it cannot read
(inference tests, no steady steps, no recipe) are counted as skipped, cases
gpusim refuses as refused (by the first setting named). Prints one line per
case and the summary: max allocated and iteration time, median |error| and
the counts within 3% / 40%. The host prices these rows meet
(host.megatron_module, Note [Megatron host costs]) were fitted on the curated
rows only, so these are held out."""

import argparse
import collections
import json
import os
import subprocess
import sys
from statistics import median

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_functional as mf  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mirror", required=True)
    ap.add_argument("--gpusim", default=os.path.join(ROOT, "build", "gpusim"))
    a = ap.parse_args()
    names = subprocess.run(["git", "-C", a.mirror, "ls-tree", "-r", "--name-only", mf.COMMIT, mf.TESTS],
                           capture_output=True, text=True, check=True).stdout.split()
    with open(os.path.join(ROOT, "validation", "megatron_functional.json")) as f:
        curated = {(c["case"], c["platform"]) for c in json.load(f)["cases"]}
    mem, tim, refused, skipped = [], [], collections.Counter(), 0
    for path in sorted(names):
        base = os.path.basename(path)
        if not (base.startswith("golden_values_") and base.endswith((".json",))):
            continue
        model, case = path.split("/")[-3], path.split("/")[-2]
        env_platform = base[len("golden_values_"):-len(".json")]
        if model not in ("gpt", "moe") or not env_platform.endswith(("dgx_a100", "dgx_h100")):
            continue
        try:
            row = mf.collect_case(a.mirror, model, case, env_platform, "")
        except (SystemExit, KeyError, StopIteration, TypeError, ValueError, AttributeError):
            skipped += 1
            continue
        if (case, row["platform"]) in curated or "mem_max_allocated_bytes" not in row:
            continue
        r = subprocess.run([a.gpusim, "run", "--world-size", str(row["world_size"]), "--device", row["device"],
                            "--megatron-args", row["args"], "--format", "json"], capture_output=True, text=True)
        if r.returncode != 0:
            refused[r.stderr.strip().splitlines()[-1].split("megatron.args: ", 1)[-1].split(":")[0]] += 1
            continue
        j = json.loads(r.stdout)
        logged = [x for x in j["ranks"] if x.get("logged_by_megatron")]
        m = (logged[0]["peak_allocated_bytes"] - row["mem_max_allocated_bytes"]) / row["mem_max_allocated_bytes"]
        t = (j["megatron"]["step_time_s"] - row["iteration_time_s_median"]) / row["iteration_time_s_median"]
        mem.append(m)
        tim.append(t)
        print("%-72s %-9s %-4s max allocated %+6.1f%%  iteration %+5.0f%%" % (
            case[:72], row["platform"], env_platform.split("_")[0], 100 * m, 100 * t))
    am, at = sorted(abs(x) for x in mem), sorted(abs(x) for x in tim)
    print("held-out golden files run: %d; refused: %d; unreadable: %d" % (len(mem), sum(refused.values()), skipped))
    if am:
        print("max allocated: median |error| %.1f%%, within 3%%: %d of %d" % (
            100 * median(am), sum(x <= 0.03 for x in am), len(am)))
        print("iteration time: median |error| %.1f%%, within 15%%: %d, within 40%%: %d of %d" % (
            100 * median(at), sum(x <= 0.15 for x in at), sum(x <= 0.40 for x in at), len(at)))
    print("refused by: %s" % ", ".join("%s (%d)" % kv for kv in refused.most_common()))


if __name__ == "__main__":
    main()
