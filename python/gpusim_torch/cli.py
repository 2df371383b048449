"""The collector's command line."""

import argparse
import os
import runpy
import sys


def _parser():
    p = argparse.ArgumentParser(prog="python3 -m gpusim_torch",
                                description="Record a PyTorch training step on the CPU as a gpusim trace.")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("record", help="run STEP.py's setup(device) and record its last step")
    r.add_argument("step_file", metavar="STEP.py")
    r.add_argument("--out", required=True, help="the trace to write (gpusim native format)")
    r.add_argument("--steps", type=int, default=3, help="steps to run; the last is recorded (default 3)")
    r.add_argument("--autocast", choices=["bf16", "fp16"], help="run loss_fn under CUDA autocast")
    r.add_argument("--device-type", default="cuda", help="the device type modelled (cuda)")
    r.add_argument("--mode", default="auto", choices=["auto", "meta", "fake"],
                   help="meta device, or FakeTensorMode with a fake CUDA device (auto: fake when it works)")
    r.add_argument("--no-frames", action="store_true",
                   help="write no Python frames (format version 1 instead of 1.1)")
    r.add_argument("--bound", action="append", default=[], metavar="OP=N",
                   help="result rows for a data-dependent op, e.g. nonzero=4096")
    r.add_argument("--name", help="the trace's name (default: STEP.py's base name)")
    return p


def main(argv):
    args = _parser().parse_args(argv)
    bounds = {}
    for b in args.bound:
        op, eq, n = b.partition("=")
        if not eq or not n.isdigit():
            print("gpusim_torch: --bound %s: expected OP=N with N a non-negative integer" % b,
                  file=sys.stderr)
            return 1
        bounds[op] = int(n)
    if not os.path.isfile(args.step_file):
        print("gpusim_torch: %s: no such file" % args.step_file, file=sys.stderr)
        return 1
    ns = runpy.run_path(args.step_file, run_name="__gpusim_step__")
    setup = ns.get("setup")
    if not callable(setup):
        print("gpusim_torch: %s: defines no setup(device) function" % args.step_file, file=sys.stderr)
        return 1
    from gpusim_torch.recorder import RecordError  # imports torch
    from gpusim_torch.session import record_step
    name = args.name or os.path.splitext(os.path.basename(args.step_file))[0]
    try:
        rec = record_step(setup, args.out, steps=args.steps, autocast=args.autocast,
                          device_type=args.device_type, mode=args.mode, frames=not args.no_frames,
                          bounds=bounds, name=name)
    except RecordError as e:
        print("gpusim_torch: %s: %s" % (args.step_file, e), file=sys.stderr)
        return 1
    allocs = sum(1 for e in rec.events if e["type"] == "alloc")
    print("gpusim_torch: wrote %s (%d events, %d allocations)" % (args.out, len(rec.events), allocs))
    return 0
