#!/usr/bin/env python3
"""Writes docs/pytorch.md's eager-vs-torch.compile table and the CS336 LM's
by-buffer explanation from `python3 -m gpusim_torch compare-compile`'s JSON
output (no hand-copied figures): each case is recorded eager and compiled,
replayed and explained with gpusim, and the blocks between the markers
`<!-- compile-table:begin -->` / `<!-- compile-table:end -->` and
`<!-- compile-explain:begin -->` / `<!-- compile-explain:end -->` are
replaced.

    tools/compile_table.py --gpusim build/gpusim [--python PY] [--doc docs/pytorch.md] [--check]

--check: exit 1 when the document's blocks differ from a fresh run."""

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

# (label, step file, --arg values, device, extra options)
CASES = [
    ("CS336 LM (tests/python/cs336_step.py: 128.6 M parameters, f32, batch 32 x 256; forward + backward, "
     "no optimizer)", "tests/python/cs336_step.py", [], "a100-sxm-80gb", []),
    ("transformers GPT2LMHeadModel (examples/torch/gpt2.py size gpu: 124 M, batch 8 x 1,024, bf16 autocast, "
     "SDPA, AdamW, clipping)", "examples/torch/gpt2.py", ["size=gpu"], "h100-sxm-80gb", []),
]
HEADER = ("| model | device | peak allocated, eager B | compiled B (change) | peak reserved, eager B | "
          "compiled B (change) | step time eager / compiled | compiled graphs |\n"
          "|---|---|---|---|---|---|---|---|")


def run_case(py, gpusim, step, args, device, extra):
    cmd = [py, "-W", "ignore", "-m", "gpusim_torch", "compare-compile", os.path.join(ROOT, step), "--gpusim", gpusim,
           "--device", device, "--format", "json"] + extra
    for a in args:
        cmd += ["--arg", a]
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if r.returncode != 0:
        raise SystemExit("%s: %s" % (" ".join(cmd), r.stderr.strip()[-2000:]))
    return json.loads(r.stdout)


def replace_block(text, name, body):
    begin, end = "<!-- %s:begin -->" % name, "<!-- %s:end -->" % name
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < i:
        raise SystemExit("the document has no %s ... %s block" % (begin, end))
    return text[:i + len(begin)] + "\n" + body + "\n" + text[j:]


def main():
    from gpusim_torch import compare_compile
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gpusim", required=True)
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--doc", default=os.path.join(ROOT, "docs", "pytorch.md"))
    p.add_argument("--check", action="store_true")
    a = p.parse_args()
    rows, explain = [], ""
    for label, step, args, device, extra in CASES:
        r = run_case(a.python, a.gpusim, step, args, device, extra)
        rows.append(compare_compile.render_markdown_row(label, device, r))
        if not explain:
            explain = compare_compile.render_text(step, device, r, top=6)
    with open(a.doc) as f:
        old = f.read()
    new = replace_block(old, "compile-table", HEADER + "\n" + "\n".join(rows))
    new = replace_block(new, "compile-explain", "```\n" + explain + "\n```")
    if a.check:
        if new != old:
            print("%s: the eager-vs-compiled blocks differ from a fresh run" % a.doc, file=sys.stderr)
            return 1
        return 0
    with open(a.doc, "w") as f:
        f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
