"""A timed run of the recorder (not a unit test): record one training step
of a ~110M-parameter GPT (vocabulary 32,000 tied, d_model 768, 12 layers,
12 heads, d_ff 3,072, batch 8 x 512, AdamW) on one CPU thread and report the
CPU seconds and the process's memory.

    PYTHONPATH=python python3 -m gpusim_torch.bench [--steps N] [--out FILE]

Prints one JSON object: parameters, steps, events, allocations, record_cpu_s
and record_wall_s (setup + the steps + writing the trace), rss_after_import_mib
(the interpreter with torch imported), peak_rss_mib (the whole run).

    PYTHONPATH=python python3 -m gpusim_torch.bench --against-mem-tracker [--runs N] [--steps N]

The yardstick of issue 35: the same setup and step under torch's own
memory tracker (torch.distributed._tools.mem_tracker.MemTracker, the model
built under FakeTensorMode, its documented use), each in a fresh
interpreter, alternated N times (default 5); prints the medians of both CPU
times (from after `import torch`: setup, the steps and, for the recorder,
writing the trace) and their ratio.
"""

import argparse
import json
import os
import resource
import sys
import tempfile
import time


def _rss_mib():
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def gpt_setup(device, vocab=32000, d=768, layers=12, heads=12, d_ff=3072, batch=8, seq=512):
    import torch
    from torch import nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(d, device=device)
            self.qkv = nn.Linear(d, 3 * d, device=device)
            self.proj = nn.Linear(d, d, device=device)
            self.ln2 = nn.LayerNorm(d, device=device)
            self.fc = nn.Linear(d, d_ff, device=device)
            self.out = nn.Linear(d_ff, d, device=device)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            s = (q @ k.transpose(-1, -2)) / (d // heads) ** 0.5
            s = s.masked_fill(torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
            a = (s.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
            x = x + self.proj(a)
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, d, device=device)
            self.pos = nn.Embedding(seq, d, device=device)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln = nn.LayerNorm(d, device=device)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            for blk in self.blocks:
                x = blk(x)
            return self.ln(x) @ self.tok.weight.t()

    model = GPT()
    x = torch.randint(0, vocab, (batch, seq), device=device)
    y = torch.randint(0, vocab, (batch, seq), device=device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    return dict(model=model, batch=(x, y), optimizer=opt,
                loss_fn=lambda m, b: F.cross_entropy(m(b[0]).view(-1, vocab), b[1].view(-1)))


def mem_tracker_step(steps):
    """gpt_setup's step `steps` times under MemTracker, the model built under
    FakeTensorMode (as torch/distributed/_tools/mem_tracker.py's docstring
    runs it: stats reset after the first iteration). Returns (CPU s, peak
    bytes it reports)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker
    c0 = time.process_time()
    with FakeTensorMode():
        spec = gpt_setup("cpu")
        model, opt = spec["model"], spec["optimizer"]
        mt = MemTracker()
        mt.track_external(model, opt)
        with mt:
            for i in range(steps):
                loss = spec["loss_fn"](model, spec["batch"])
                loss.backward()
                opt.step()
                opt.zero_grad()
                if i == 0:
                    mt.reset_mod_stats()
        peak = mt.get_tracker_snapshot("peak")
    cpu = time.process_time() - c0
    return cpu, sum(v.get("Total", 0) for v in peak.values())


def _child(kind, steps):
    """One measurement in this (fresh) interpreter; prints its CPU seconds."""
    import torch
    torch.set_num_threads(1)
    if kind == "mem_tracker":
        cpu, _ = mem_tracker_step(steps)
    else:
        from gpusim_torch.session import record_step
        with tempfile.TemporaryDirectory() as d:
            c0 = time.process_time()
            record_step(gpt_setup, os.path.join(d, "gpt.gpusim"), steps=steps, mode="meta")
            cpu = time.process_time() - c0
    print(json.dumps({"cpu_s": cpu}))


def against_mem_tracker(runs, steps):
    import statistics
    import subprocess
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))] +
        [q for q in os.environ.get("PYTHONPATH", "").split(os.pathsep) if q]))
    times = {"gpusim_torch": [], "mem_tracker": []}
    for _ in range(runs):
        for kind in times:
            r = subprocess.run([sys.executable, "-W", "ignore", "-m", "gpusim_torch.bench", "--child", kind,
                                "--steps", str(steps)], capture_output=True, text=True, env=env)
            if r.returncode != 0:
                sys.stderr.write(r.stderr)
                return 1
            times[kind].append(json.loads(r.stdout.strip().splitlines()[-1])["cpu_s"])
    med = {k: statistics.median(v) for k, v in times.items()}
    import torch
    print(json.dumps(dict(torch=torch.__version__, steps=steps, runs=runs,
                          recorder_cpu_s=round(med["gpusim_torch"], 2),
                          mem_tracker_cpu_s=round(med["mem_tracker"], 2),
                          ratio=round(med["gpusim_torch"] / med["mem_tracker"], 2),
                          recorder_runs=[round(t, 2) for t in times["gpusim_torch"]],
                          mem_tracker_runs=[round(t, 2) for t in times["mem_tracker"]]), indent=1))
    return 0


def main(argv):
    p = argparse.ArgumentParser(prog="python3 -m gpusim_torch.bench")
    p.add_argument("--steps", type=int, default=1, help="steps run; the last recorded (default 1)")
    p.add_argument("--out", help="where to write the trace (default: a temporary file)")
    p.add_argument("--mode", default="meta", choices=["meta", "auto", "fake"])
    p.add_argument("--against-mem-tracker", action="store_true",
                   help="time the recorder against torch's MemTracker on the same step")
    p.add_argument("--runs", type=int, default=5, help="with --against-mem-tracker: runs of each (default 5)")
    p.add_argument("--child", choices=["gpusim_torch", "mem_tracker"], help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.steps < 1 or args.runs < 1:
        p.error("--steps and --runs: expected at least 1")
    if args.child:
        _child(args.child, args.steps)
        return 0
    if args.against_mem_tracker:
        return against_mem_tracker(args.runs, args.steps)
    import torch
    torch.set_num_threads(1)
    rss_import = _rss_mib()
    from gpusim_torch.session import record_step
    params = {}

    def setup(device):
        spec = gpt_setup(device)
        params["n"] = sum(q.numel() for q in spec["model"].parameters())
        return spec

    with tempfile.TemporaryDirectory() as d:
        out = args.out or os.path.join(d, "gpt.gpusim")
        c0, w0 = time.process_time(), time.perf_counter()
        rec = record_step(setup, out, steps=args.steps, mode=args.mode)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(dict(torch=torch.__version__, parameters=params["n"], steps=args.steps,
                          events=len(rec.events),
                          allocations=sum(1 for e in rec.events if e["type"] == "alloc"),
                          record_cpu_s=round(cpu, 2), record_wall_s=round(wall, 2),
                          rss_after_import_mib=round(rss_import), peak_rss_mib=round(peak)), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
