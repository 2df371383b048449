#!/usr/bin/env python3
"""Write a jitted JAX step's HLO module for `gpusim run STEP.hlo`.

    python3 tools/collect/export_hlo.py mymodule:make_step --out step.hlo

`make_step` (any callable in an importable module; the working directory is
on the path) returns `(jitted_fn, args)` or `(jitted_fn, args, kwargs)`:
the `jax.jit(...)`-wrapped step, with `donate_argnums` as it runs, and its
arguments as arrays or `jax.ShapeDtypeStruct`s (nothing is allocated:
lowering needs no device memory). Extra `--arg VALUE` strings are passed to
`make_step` as positional arguments.

Writes:
  step.hlo       the unoptimised module, `lowered.as_text(dialect="hlo")`
  step.hlo.json  a sidecar: jax version, platform, devices, the donated
                 argument indices, and with --memory-analysis the
                 `compiled.memory_analysis()` of this machine's backend
                 (argument/output/alias bytes do not depend on the backend)

Without this script, the same module is three lines of JAX:

    lowered = jax.jit(step, donate_argnums=(0,)).lower(*args)
    with open("step.hlo", "w") as f:
        f.write(lowered.as_text(dialect="hlo"))
"""

import argparse
import importlib
import json
import os
import sys


def export(fn, args, kwargs, out, memory_analysis=False):
    """Lowers fn(*args, **kwargs) and writes OUT and OUT.json; returns the sidecar dict."""
    import jax

    lowered = fn.lower(*args, **kwargs)
    text = lowered.as_text(dialect="hlo")
    with open(out, "w") as f:
        f.write(text)
    flat, _ = jax.tree_util.tree_flatten(lowered.args_info)
    sidecar = {
        "module": os.path.basename(out),
        "jax_version": jax.__version__,
        "platform": jax.default_backend(),
        "devices": jax.device_count(),
        "donated_arguments": [i for i, a in enumerate(flat) if getattr(a, "donated", False)],
        "arguments": [{"shape": list(a.shape), "dtype": str(a.dtype)} for a in flat],
        "outputs": len(jax.tree_util.tree_leaves(lowered.out_info)),
    }
    if memory_analysis:
        m = lowered.compile().memory_analysis()
        sidecar["memory_analysis"] = {
            "backend": jax.default_backend(),
            "argument_size_in_bytes": int(m.argument_size_in_bytes),
            "output_size_in_bytes": int(m.output_size_in_bytes),
            "alias_size_in_bytes": int(m.alias_size_in_bytes),
            "temp_size_in_bytes": int(m.temp_size_in_bytes),
        }
    with open(out + ".json", "w") as f:
        json.dump(sidecar, f, indent=2, sort_keys=True)
        f.write("\n")
    return sidecar


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", help="MODULE:FUNCTION returning (jitted_fn, args[, kwargs])")
    p.add_argument("--out", required=True, help="the .hlo file to write (and OUT.json beside it)")
    p.add_argument("--arg", action="append", default=[], help="a string argument for FUNCTION (repeatable)")
    p.add_argument("--memory-analysis", action="store_true",
                   help="also compile on this machine's backend and record memory_analysis() in the sidecar")
    a = p.parse_args(argv)
    if ":" not in a.target:
        p.error(f"target {a.target!r}: expected MODULE:FUNCTION, e.g. mymodule:make_step")
    module_name, func_name = a.target.split(":", 1)
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        print(f"export_hlo: cannot import {module_name!r}: {e}", file=sys.stderr)
        return 1
    make = getattr(module, func_name, None)
    if make is None or not callable(make):
        print(f"export_hlo: {module_name} has no callable {func_name!r}", file=sys.stderr)
        return 1
    made = make(*a.arg)
    if not isinstance(made, tuple) or len(made) not in (2, 3):
        print(f"export_hlo: {a.target} must return (jitted_fn, args) or (jitted_fn, args, kwargs)", file=sys.stderr)
        return 1
    fn, args = made[0], tuple(made[1])
    kwargs = made[2] if len(made) == 3 else {}
    if not hasattr(fn, "lower"):
        print(f"export_hlo: {a.target} returned {type(fn).__name__}, not a jax.jit-wrapped function", file=sys.stderr)
        return 1
    sidecar = export(fn, args, kwargs, a.out, a.memory_analysis)
    print(f"wrote {a.out} ({os.path.getsize(a.out)} bytes) and {a.out}.json; donated arguments "
          f"{sidecar['donated_arguments']}; run: gpusim run {a.out} --device NAME")
    return 0


if __name__ == "__main__":
    sys.exit(main())
