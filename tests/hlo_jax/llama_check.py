#!/usr/bin/env python3
"""A Llama-style train step at Llama2-7B shapes (tests/hlo_jax/llama_step.py),
lowered by real JAX with ShapeDtypeStructs, imported by `gpusim run STEP.hlo`,
against the built-in `llama` family with the same settings and JAX's own
memory_analysis() on the CPU.

    llama_check.py GPUSIM SOURCE_DIR [--regenerate]

For param_scan_axis 0 and 1 it checks
  * the module's argument, output and alias bytes equal memory_analysis();
  * argument, output and alias bytes equal the built-in family's exactly
    (both with the entry result's tuple index table, 8 B per output: Note
    [Entry result tuple]);
  * both sides' memory lines equal tests/hlo_jax/llama_expected.txt, whose
    notes explain the temp difference buffer by buffer.
"""

import os
import sys
import tempfile

from scan_carry_check import finish, memory, memory_analysis_bytes, parse_args

DEVICE = "h100-sxm-80gb"


def main(argv):
    args = parse_args(argv, __doc__)
    if args is None:
        return 2
    gpusim, src, regenerate = args
    import export_hlo
    import llama_step

    rows, failures = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for axis in (0, 1):
            path = os.path.join(tmp, f"llama_axis{axis}.hlo")
            fn, args = llama_step.make_step(str(axis))
            side = export_hlo.export(fn, args, {}, path, memory_analysis=True)
            n_outputs = side["outputs"]
            hlo = memory(gpusim, path, "--device", DEVICE)
            fam = memory(gpusim, os.path.join(src, "configs", "llama7b.yaml"), "--set", f"device={DEVICE}",
                         "--set", "parallelism.fsdp=1", "--set", "model.attention=explicit", "--set",
                         "remat.policy=full", "--set", f"model.param_scan_axis={axis}", "--set",
                         f"batch.seq_len={llama_step.LLAMA2_7B['seq_len']}")
            jax_bytes = memory_analysis_bytes(side)
            if hlo[:3] != jax_bytes:
                failures.append(f"axis {axis}: module argument/output/alias {hlo[:3]} != memory_analysis() {jax_bytes}")
            if hlo[0] != fam[0] or hlo[2] != fam[2]:
                failures.append(f"axis {axis}: argument/alias {hlo[0]}/{hlo[2]} != the llama family's {fam[0]}/{fam[2]}")
            if hlo[1] != fam[1]:
                failures.append(f"axis {axis}: output {hlo[1]} != the family's {fam[1]} ({n_outputs} outputs)")
            rows.append(f"param_scan_axis={axis} hlo {' '.join(map(str, hlo))} llama {' '.join(map(str, fam))}")
    return finish(rows, failures, os.path.join(src, "tests", "hlo_jax", "llama_expected.txt"), regenerate)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main(sys.argv))
