#!/usr/bin/env python3
"""The seed program (../shared/seeds/scan_vs_unroll.txt) lowered by real JAX,
imported by `gpusim run STEP.hlo`, against examples/scan_carry.yaml and
JAX's own compiled.memory_analysis() on the CPU.

    scan_carry_check.py GPUSIM SOURCE_DIR [--regenerate]

For T = 1..4, rolled and unrolled: lowers the program with
tools/collect/export_hlo.py, runs gpusim on the module and on the YAML
program, and checks
  * the module's argument, output and alias bytes equal memory_analysis()
    (those do not depend on the backend), exactly;
  * both sides' memory lines equal tests/hlo_jax/scan_carry_expected.txt,
    where every difference between the two sides is explained buffer by
    buffer (--regenerate rewrites the figures, keeping the notes).
Exits 1 on any mismatch, printing both tables.
"""

import json
import os
import subprocess
import sys
import tempfile

DEVICE = "a100-sxm-80gb"
KEYS = ("argument_bytes", "output_bytes", "alias_bytes", "temp_bytes")


def memory(gpusim, *args):
    out = subprocess.run([gpusim, "run", *args, "--format", "json"], check=True, capture_output=True, text=True)
    m = json.loads(out.stdout)["memory"]
    return [m[k] for k in KEYS]


def memory_analysis_bytes(sidecar):
    """argument, output, alias bytes of export_hlo's --memory-analysis sidecar."""
    ma = sidecar["memory_analysis"]
    return [ma["argument_size_in_bytes"], ma["output_size_in_bytes"], ma["alias_size_in_bytes"]]


def finish(rows, failures, expected_path, regenerate):
    """Compares `rows` with the expected file's non-comment lines (or rewrites
    them, keeping the notes), prints them and the failures; the exit code."""
    with open(expected_path) as f:
        lines = f.read().splitlines()
    notes = [l for l in lines if l.startswith("#") or not l.strip()]
    expected = [l for l in lines if l.strip() and not l.startswith("#")]
    if regenerate:
        with open(expected_path, "w") as f:
            f.write("\n".join(notes + rows) + "\n")
        print(f"wrote {expected_path}")
    elif rows != expected:
        failures.append(f"memory lines differ from {os.path.basename(expected_path)}:\n  got:\n    " +
                        "\n    ".join(rows) + "\n  expected:\n    " + "\n    ".join(expected))
    print("\n".join(rows))
    for f in failures:
        print("FAIL: " + f, file=sys.stderr)
    return 1 if failures else 0


def parse_args(argv, doc):
    """(gpusim, source dir, --regenerate) from `CHECK GPUSIM SOURCE_DIR
    [--regenerate]`, with tools/collect and tests/hlo_jax importable; None
    (after printing `doc`) when they are missing."""
    if len(argv) < 3:
        print(doc, file=sys.stderr)
        return None
    src = argv[2]
    sys.path.insert(0, os.path.join(src, "tools", "collect"))
    sys.path.insert(0, os.path.join(src, "tests", "hlo_jax"))
    return argv[1], src, "--regenerate" in argv


def main(argv):
    args = parse_args(argv, __doc__)
    if args is None:
        return 2
    gpusim, src, regenerate = args
    import export_hlo
    import seed_scan

    rows, failures = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("rolled", "unrolled"):
            for t in (1, 2, 3, 4):
                path = os.path.join(tmp, f"scan_{mode}_{t}.hlo")
                fn, args = seed_scan.make_step(str(t), mode)
                side = export_hlo.export(fn, args, {}, path, memory_analysis=True)
                hlo = memory(gpusim, path, "--device", DEVICE)
                yaml = memory(gpusim, os.path.join(src, "examples", "scan_carry.yaml"), "--set",
                              f"loop.trip_count={t}", "--set", f"loop.mode={mode}")
                jax_bytes = memory_analysis_bytes(side)
                if hlo[:3] != jax_bytes:
                    failures.append(f"T={t} {mode}: module argument/output/alias {hlo[:3]} != memory_analysis() {jax_bytes}")
                rows.append(f"{mode} T={t} hlo {' '.join(map(str, hlo))} yaml {' '.join(map(str, yaml))}")
    return finish(rows, failures, os.path.join(src, "tests", "hlo_jax", "scan_carry_expected.txt"), regenerate)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
