"""The collector's command line: `record` one step, `sweep` a batch-size
axis by re-recording the step at each size and replaying it with gpusim, or
`compare-compile` the step eager and torch.compile'd (compare_compile.py).

The batch dimension is the user's to name: STEP.py's setup takes it as a
keyword, `setup(device, batch_size=N)`, and builds its batch (and anything
else shaped by it) from N. `record --batch-size N` passes it and writes
`meta batch_size N` and `meta step_file STEP.py`; `sweep` re-records at
each size. A setup without a batch_size parameter cannot be swept: refused
by name.
"""

import argparse
import inspect
import json
import os
import runpy
import subprocess
import sys
import tempfile
import time


def _record_options(r):
    r.add_argument("step_file", metavar="STEP.py")
    r.add_argument("--steps", type=int, default=3, help="steps to run; the last is recorded (default 3)")
    r.add_argument("--autocast", choices=["bf16", "fp16"], help="run loss_fn under CUDA autocast")
    r.add_argument("--device-type", default="cuda", help="the device type modelled (cuda)")
    r.add_argument("--mode", default="auto", choices=["auto", "meta", "fake"],
                   help="meta device, or FakeTensorMode with a fake CUDA device (auto: fake when it works)")
    r.add_argument("--no-frames", action="store_true",
                   help="write no Python frames (format version 1.2 without frame lines)")
    r.add_argument("--bound", action="append", default=[], metavar="OP=N",
                   help="result rows for a data-dependent op, e.g. nonzero=4096")
    r.add_argument("--name", help="the trace's name (default: STEP.py's base name)")
    r.add_argument("--world-size", type=int, metavar="N",
                   help="run the step as one rank of N under a fake process group (DDP, FSDP): its "
                        "collectives are recorded (PyTorch 2.x)")
    r.add_argument("--rank", type=int, default=0, metavar="R", help="the rank recorded (default 0)")
    r.add_argument("--arg", action="append", default=[], metavar="KEY=VALUE",
                   help="a keyword argument for STEP.py's setup(device, ...), e.g. size=gpu, grad_ckpt=true")
    r.add_argument("--device", dest="target_device", metavar="NAME",
                   help="the gpusim device whose CUDA build is modelled where the kernel depends on it "
                        "(the SDPA backend; default h100-sxm-80gb)")
    r.add_argument("--cuda-torch-version", metavar="X.Y",
                   help="the torch version of the CUDA build the step runs on, whose kernel dispatch "
                        "rules apply (default: this torch's)")
    r.add_argument("--sdpa-backend", choices=["flash", "efficient", "cudnn", "math"],
                   help="force this SDPA kernel, as torch.nn.attention.sdpa_kernel([...]) does")
    r.add_argument("--progress", choices=["auto", "always", "never"], default="auto",
                   help="a line on stderr after setup() and after each step, with the seconds since "
                        "recording began (auto: when stderr is a terminal)")
    r.add_argument("--timeout", type=float, default=600.0, metavar="S",
                   help="give up, naming the line it was running, when loading STEP.py, setup() and the "
                        "steps take longer than S seconds per recording (default 600; 0: no limit)")


def _parser():
    p = argparse.ArgumentParser(prog="python3 -m gpusim_torch",
                                description="Record a PyTorch training step on the CPU as a gpusim trace.")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("record", help="run STEP.py's setup(device) and record its last step")
    _record_options(r)
    r.add_argument("--out", required=True, help="the trace to write (gpusim native format)")
    r.add_argument("--batch-size", type=int, metavar="N",
                   help="call setup(device, batch_size=N) (STEP.py names its batch dimension so)")
    s = sub.add_parser("sweep", help="re-record STEP.py at each batch size and replay each with gpusim")
    _record_options(s)
    s.add_argument("--batch-sizes", required=True, metavar="N,N,...", help="the batch sizes, e.g. 8,16,32")
    s.add_argument("--gpusim", default="gpusim", help="the gpusim binary (default: gpusim on PATH)")
    s.add_argument("--allocator", default="pytorch_caching", help="the allocator model for gpusim replay")
    s.add_argument("--keep", metavar="DIR", help="keep the recorded traces in DIR")
    s.add_argument("--format", default="text", choices=["text", "json"])
    c = sub.add_parser("compare-compile", help="record STEP.py eager and torch.compile'd "
                       "(setup(device, ..., compile=False|True)), replay both, explain the difference by buffer")
    _record_options(c)
    c.add_argument("--gpusim", default="gpusim", help="the gpusim binary (default: gpusim on PATH)")
    c.add_argument("--allocator", default="pytorch_caching", help="the allocator model for gpusim replay")
    c.add_argument("--keep", metavar="DIR", help="keep the two traces in DIR (eager.gpusim, compiled.gpusim)")
    c.add_argument("--format", default="text", choices=["text", "json", "markdown"])
    c.add_argument("--label", help="the model's name in the markdown row (default: STEP.py's base name)")
    c.add_argument("--batch-size", type=int, metavar="N", help="call setup(device, batch_size=N)")
    return p


def _fail(msg):
    print("gpusim_torch: " + msg, file=sys.stderr)
    return 1


def _load_setup(step_file):
    from gpusim_torch.recorder import RecordError
    from gpusim_torch.session import _user_site
    if not os.path.isfile(step_file):
        raise ValueError("%s: no such file" % step_file)
    try:
        # (torch.compile at the top level only wraps; what it compiles is
        # compiled when the step first calls it, inside the recording.)
        ns = runpy.run_path(step_file, run_name="__gpusim_step__")
    except SyntaxError as e:
        raise ValueError("%s:%s: %s: %s" % (e.filename or step_file, e.lineno, type(e).__name__, e.msg))
    except RecordError as e:
        raise ValueError("%s: %s" % (step_file, e))
    except Exception as e:  # the user's file: any exception is reported, with where
        site = _user_site(e.__traceback__)
        first = (str(e).splitlines() or [""])[0]
        raise ValueError("%s: loading it raised %s%s%s" % (step_file, type(e).__name__, ": " + first if first else "",
                                                         " at " + site if site else ""))
    setup = ns.get("setup")
    if not callable(setup):
        raise ValueError("%s: defines no setup(device) function" % step_file)
    return setup


def _takes_batch_size(setup):
    try:
        params = inspect.signature(setup).parameters
    except (TypeError, ValueError):
        return False
    return "batch_size" in params or any(p.kind == p.VAR_KEYWORD for p in params.values())


def _setup_value(text):
    """--arg's VALUE: an int, a float, true/false/none, else the string."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "none":
        return None
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def setup_kwargs(args, setup):
    """--arg KEY=VALUE pairs as setup's keyword arguments, and `arg_values`
    (gpusim.record's setup_args: Python values, named `arg_name` in
    messages); a key setup() does not take is refused by name (never
    silently ignored)."""
    kw = {}
    for a in getattr(args, "arg", None) or []:
        key, eq, value = a.partition("=")
        if not eq or not key.isidentifier():
            raise ValueError("--arg %s: expected KEY=VALUE with KEY a Python identifier" % a)
        if key == "batch_size":
            raise ValueError("--arg batch_size=...: use --batch-size")
        kw[key] = _setup_value(value)
    how = getattr(args, "arg_name", "--arg")
    for key, value in (getattr(args, "arg_values", None) or {}).items():
        if key == "batch_size":
            raise ValueError("%s: batch_size is its own argument (record(..., batch_size=N))" % how)
        kw[key] = value
    if kw:
        try:
            params = inspect.signature(setup).parameters
        except (TypeError, ValueError):
            params = {}
        takes_any = any(p.kind == p.VAR_KEYWORD for p in params.values())
        unknown = sorted(k for k in kw if k not in params and not takes_any)
        if unknown:
            raise ValueError("%s: setup(device, ...) takes no parameter %s (%s)" % (
                args.step_file, ", ".join(unknown), how))
    return kw


def _record(args, setup, out, batch_size, setup_kw=None):
    """Records STEP.py once; the Recording, or raises RecordError."""
    from gpusim_torch.session import record_step as _record_step, time_limit
    if setup_kw is None:
        setup_kw = setup_kwargs(args, setup)
    bounds = {}
    for b in args.bound:
        op, eq, n = b.partition("=")
        if not eq or not n.isdigit():
            raise ValueError("--bound %s: expected OP=N with N a non-negative integer" % b)
        bounds[op] = int(n)
    if batch_size is not None:
        if batch_size < 1:
            raise ValueError("--batch-size: expected a positive integer, got %d" % batch_size)
        if not _takes_batch_size(setup):
            raise ValueError("%s: setup(device) takes no batch_size parameter, so the batch size cannot "
                             "be set; name the batch dimension as setup(device, batch_size=...)" % args.step_file)
        call = lambda device: setup(device, batch_size=batch_size, **setup_kw)  # noqa: E731
    else:
        call = lambda device: setup(device, **setup_kw)  # noqa: E731
    call.__wrapped__ = setup  # where setup is defined, for messages
    name = args.name or os.path.splitext(os.path.basename(args.step_file))[0]
    extra = [("step_file", args.step_file)]
    if batch_size is not None:
        extra.append(("batch_size", str(batch_size)))
    with time_limit(args.timeout, "recording %s" % args.step_file):
        return _record_step(call, out, steps=args.steps, autocast=args.autocast, device_type=args.device_type,
                       mode=args.mode, frames=not args.no_frames, bounds=bounds, name=name,
                       extra_meta=extra, world_size=args.world_size, rank=args.rank,
                       device=args.target_device, sdpa_backend=args.sdpa_backend,
                       cuda_torch_version=args.cuda_torch_version, progress=_progress(args, name))


def _progress(args, name):
    """The progress callback of --progress (None: no lines)."""
    progress = getattr(args, "progress", "never")  # the Python API (gpusim.record) prints none
    if progress == "never" or (progress == "auto" and not sys.stderr.isatty()):
        return None
    t0 = time.perf_counter()

    def say(what):
        print("gpusim_torch: %s: %s (%.1f s)" % (name, what, time.perf_counter() - t0), file=sys.stderr, flush=True)
    return say


def _sweep(args, setup):
    sizes = []
    for tok in args.batch_sizes.split(","):
        if not tok.isdigit() or int(tok) < 1:
            raise ValueError("--batch-sizes %s: expected positive integers separated by commas" % args.batch_sizes)
        sizes.append(int(tok))
    if not _takes_batch_size(setup):
        raise ValueError("%s: setup(device) takes no batch_size parameter, so a recorded step cannot be "
                         "re-recorded at another batch size; name the batch dimension as "
                         "setup(device, batch_size=...)" % args.step_file)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        where = args.keep or tmp
        os.makedirs(where, exist_ok=True)
        for n in sizes:
            out = os.path.join(where, "batch%d.gpusim" % n)
            _record(args, setup, out, n)
            r = subprocess.run([args.gpusim, "replay", out, "--device", args.target_device or "h100-sxm-80gb", "--allocator",
                                args.allocator, "--format", "json"], capture_output=True, text=True)
            if r.returncode != 0:
                raise ValueError("gpusim replay %s: %s" % (out, r.stderr.strip()))
            j = json.loads(r.stdout)
            oom = j["step"]["oom"]
            rows.append(dict(batch_size=n, trace=out if args.keep else None,
                             peak_allocated_bytes=j["allocator"]["peak_allocated_bytes"],
                             peak_reserved_bytes=j["allocator"]["peak_reserved_bytes"],
                             oom=oom is not None, step_time_s=j["step"]["step_time_s"]))
    if args.format == "json":
        print(json.dumps(dict(device=args.target_device or "h100-sxm-80gb", allocator=args.allocator, rows=rows), indent=2))
    else:
        print("%s on %s (%s), re-recorded per batch size:" % (args.step_file, args.target_device or "h100-sxm-80gb", args.allocator))
        print("  %10s  %22s  %22s  %5s  %10s" % ("batch", "peak allocated B", "peak reserved B", "OOM",
                                                 "step s"))
        for r in rows:
            print("  %10d  %22s  %22s  %5s  %10.4f" % (r["batch_size"], "{:,}".format(r["peak_allocated_bytes"]),
                                                       "{:,}".format(r["peak_reserved_bytes"]),
                                                       "yes" if r["oom"] else "no", r["step_time_s"]))
    return 0


def main(argv):
    args = _parser().parse_args(argv)
    if args.timeout < 0 or args.timeout != args.timeout:
        return _fail("--timeout: expected seconds >= 0 (0: no limit), got %s" % args.timeout)
    try:
        import torch  # noqa: F401
    except ImportError as e:
        return _fail("PyTorch is not importable by %s (%s): install torch into this Python "
                     "(pip install torch; the CPU build is enough), or run gpusim_torch with the "
                     "Python that has it" % (sys.executable, e))
    from gpusim_torch.recorder import RecordError
    from gpusim_torch.session import time_limit
    try:
        with time_limit(args.timeout, "loading %s" % args.step_file):
            setup = _load_setup(args.step_file)
    except (RecordError, ValueError) as e:
        return _fail(str(e))
    try:
        if args.command == "sweep":
            return _sweep(args, setup)
        if args.command == "compare-compile":
            return _compare_compile(args, setup)
        rec = _record(args, setup, args.out, args.batch_size)
    except (RecordError, ValueError) as e:
        return _fail("%s: %s" % (args.step_file, e) if isinstance(e, RecordError) else str(e))
    allocs = sum(1 for e in rec.events if e["type"] == "alloc")
    print("gpusim_torch: wrote %s (%d events, %d allocations)" % (args.out, len(rec.events), allocs))
    for line in getattr(rec, "compiled_report", []):
        print("  " + line)
    return 0


def _compare_compile(args, setup):
    from gpusim_torch import compare_compile
    try:
        params = inspect.signature(setup).parameters
    except (TypeError, ValueError):
        params = {}
    if "compile" not in params and not any(p.kind == p.VAR_KEYWORD for p in params.values()):
        raise ValueError("%s: setup(device) takes no compile parameter, so the step cannot be recorded both "
                         "ways; name it as setup(device, ..., compile=False) and torch.compile the model "
                         "when it is true" % args.step_file)
    kw = setup_kwargs(args, setup)
    if "compile" in kw:
        raise ValueError("--arg compile=...: compare-compile sets compile itself")
    device = args.target_device or "h100-sxm-80gb"
    r = compare_compile.compare(lambda out, skw: _record(args, setup, out, args.batch_size, skw), args, kw,
                                args.gpusim, device, args.allocator, keep=args.keep)
    if args.format == "json":
        print(json.dumps(dict(step_file=args.step_file, device=device, **r), indent=2, sort_keys=True))
    elif args.format == "markdown":
        label = args.label or os.path.splitext(os.path.basename(args.step_file))[0]
        print(compare_compile.render_markdown_row(label, device, r))
    else:
        print(compare_compile.render_text(args.step_file, device, r))
    return 0
