#!/usr/bin/env python3
"""Collect gpusim calibration data from a small PyTorch GPT training step.

A GPT of the kind gpusim's `family: gpt` builder describes (pre-LayerNorm,
fused QKV, causal softmax attention with dropout, GeLU MLP of 4h, untied
head; models/gpt.h), trained with AdamW and gradient clipping under bf16
autocast, with and without activation checkpointing
(torch.utils.checkpoint per layer = gpusim remat.policy full; none = none).

For each variant: torch.cuda.max_memory_allocated(), max_memory_reserved()
and memory_stats() of a warm step (peaks reset before it), the median of warm
step times, a torch.profiler trace with memory events (profile_memory=True,
Chrome JSON) and a CUDA caching-allocator memory snapshot
(torch.cuda.memory._record_memory_history / _dump_snapshot, a pickle that
pytorch.org/memory_viz and gpusim's importers read). Writes a calibration
file gpusim reads directly: `gpusim calibrate OUT/torch_calibration.yaml`.

Without a GPU the step runs on the CPU: every code path except the CUDA
memory counters and snapshot runs, cases are written with fit: false and no
peak bytes. See README.md.
"""

import argparse
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import calibration_io as cio  # noqa: E402

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint
except ImportError as e:  # pragma: no cover - depends on the machine
    sys.stderr.write(
        "collect_torch.py needs PyTorch (%s).\n"
        "Install it, e.g. `pip install torch` (CUDA wheels from https://pytorch.org), then rerun.\n" % e)
    sys.exit(2)

SOURCE = "tools/collect/collect_torch.py (small GPT step, activation checkpointing on/off)"


class Block(nn.Module):
    def __init__(self, d, heads, dropout):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        B, S, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
        shape = (B, S, self.heads, D // self.heads)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        # Explicit attention (scores, softmax, dropout) as the GPT builder's
        # attention: explicit; Megatron without flash attention.
        s = (q @ k.transpose(-2, -1)) / math.sqrt(shape[-1])
        mask = torch.ones(S, S, dtype=torch.bool, device=x.device).tril()
        p = self.drop(torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1))
        a = (p @ v).transpose(1, 2).reshape(B, S, D)
        x = x + self.drop(self.proj(a))
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)))))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.tok = nn.Embedding(c["vocab"], c["d_model"])
        self.pos = nn.Embedding(c["seq_len"], c["d_model"])
        self.blocks = nn.ModuleList(Block(c["d_model"], c["n_heads"], c["dropout"])
                                    for _ in range(c["n_layers"]))
        self.ln = nn.LayerNorm(c["d_model"])
        self.head = nn.Linear(c["d_model"], c["vocab"], bias=False)
        self.checkpointing = False

    def forward(self, tokens):
        x = self.tok(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for b in self.blocks:
            x = checkpoint(b, x, use_reentrant=False) if self.checkpointing else b(x)
        return self.head(self.ln(x)).float()


def run_variant(c, ckpt, dev, args, out):
    torch.manual_seed(0)
    model = GPT(c).to(dev)
    model.checkpointing = ckpt
    cuda = dev.type == "cuda"
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1,
                            **({"fused": True} if cuda else {}))
    tokens = torch.randint(0, c["vocab"], (c["batch"], c["seq_len"]), device=dev)
    targets = torch.randint(0, c["vocab"], (c["batch"], c["seq_len"]), device=dev)
    amp = torch.autocast(device_type=dev.type, dtype=torch.bfloat16)

    def step():
        with amp:
            loss = F.cross_entropy(model(tokens).view(-1, c["vocab"]), targets.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    sync = torch.cuda.synchronize if cuda else None
    median, times = cio.median_step_time(step, args.warmup, args.iters, sync=sync)
    tag = f"gpt_small_{'checkpointed' if ckpt else 'no_checkpointing'}"
    rec = {"tag": tag, "checkpointing": ckpt, "step_time_s": median, "times": times}
    prof_dir = os.path.join(out, "profiles")
    os.makedirs(prof_dir, exist_ok=True)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
        snapshot_ok = True
        try:
            torch.cuda.memory._record_memory_history(max_entries=200000)
        except Exception as e:
            snapshot_ok = False
            print(f"  memory history unavailable: {e}")
        step()
        torch.cuda.synchronize()
        rec["max_memory_allocated"] = int(torch.cuda.max_memory_allocated())
        rec["max_memory_reserved"] = int(torch.cuda.max_memory_reserved())
        rec["memory_stats"] = {k: int(v) for k, v in torch.cuda.memory_stats().items()
                               if isinstance(v, int)}
        if snapshot_ok:
            torch.cuda.memory._dump_snapshot(os.path.join(prof_dir, f"{tag}.snapshot.pickle"))
            torch.cuda.memory._record_memory_history(enabled=None)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities, profile_memory=True, record_shapes=True) as p:
        step()
        if sync:
            sync()
    p.export_chrome_trace(os.path.join(prof_dir, f"{tag}.trace.json"))
    print(f"  {tag}: step {median * 1e3:.3f} ms, max allocated {rec.get('max_memory_allocated')}, "
          f"max reserved {rec.get('max_memory_reserved')}")
    return rec


def gpt_config(device, c):
    return {
        "framework": "pytorch", "device": device,
        "model": {"from": "gpt-22b", "name": "gpt-small-collect", "d_model": c["d_model"],
                  "n_layers": c["n_layers"], "n_heads": c["n_heads"],
                  "head_dim": c["d_model"] // c["n_heads"], "mlp_dim": 4 * c["d_model"],
                  "vocab": c["vocab"], "weight_dtype": "f32", "compute_dtype": "bf16",
                  "logits_dtype": "f32", "attention": "explicit", "scan_layers": False},
        "optimizer": {"kind": "adamw", "moment_dtype": "f32", "clip_grad_norm": True},
        "remat": {"policy": "none"},
        "batch": {"per_device": c["batch"], "seq_len": c["seq_len"]},
        "allocator": {"impl": "pytorch_caching"},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="collected_torch", help="output folder")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()

    cuda = torch.cuda.is_available()
    dev = torch.device("cuda" if cuda else "cpu")
    gpu_name = torch.cuda.get_device_name(0) if cuda else None
    device = cio.gpusim_device_name(gpu_name) or cio.FALLBACK_DEVICE
    hardware = (gpu_name if cuda else
                f"CPU fallback ({cio.host_description()}); times not comparable with a GPU")
    software = f"torch {torch.__version__}, CUDA {torch.version.cuda}"
    print(f"collect_torch: {hardware}; gpusim device {device}")
    c = ({"d_model": 1024, "n_layers": 8, "n_heads": 16, "vocab": 32000, "batch": 4, "seq_len": 1024,
          "dropout": 0.1} if cuda else
         {"d_model": 128, "n_layers": 2, "n_heads": 4, "vocab": 512, "batch": 2, "seq_len": 128,
          "dropout": 0.1})
    out = os.path.abspath(args.out)
    os.makedirs(os.path.join(out, "configs"), exist_ok=True)
    cio.write_yaml(os.path.join(out, "configs", "gpt_small.yaml"),
                   "Small GPT step of collect_torch.py", gpt_config(device, c))
    raw = {"hardware": hardware, "software": software, "device": device, "model": c, "runs": []}
    cases = []
    for ckpt in (False, True):
        r = run_variant(c, ckpt, dev, args, out)
        raw["runs"].append(r)
        overrides = [f"remat.policy={'full' if ckpt else 'none'}"]
        for metric, fit in (("max_memory_allocated", cuda), ("max_memory_reserved", False)):
            cases.append(cio.calibration_case(
                f"{r['tag']}_{metric}", "configs/gpt_small.yaml", overrides, r["step_time_s"],
                r.get(metric), metric if metric in r else None, hardware, software, SOURCE, fit=fit))
    with open(os.path.join(out, "raw_torch.json"), "w") as f:
        json.dump(raw, f, indent=2)
    path = os.path.join(out, "torch_calibration.yaml")
    cio.write_yaml(path, f"Measured by tools/collect/collect_torch.py on {hardware}.\n{software}\n"
                   f"Run: gpusim calibrate {path}", {"name": "collect-torch", "cases": cases})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
