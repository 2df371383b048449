"""The model zoo (examples/torch/*.py) recorded on the CPU with the torch,
transformers, torchvision and timm the suite installs
(tools/requirements-test.txt), each at its `test` size under bf16 autocast
(Qwen2: bf16 parameters), with and without gradient checkpointing; each
replayed with gpusim on h100-sxm-80gb and a100-sxm-80gb. Pinned:

- the SDPA kernel the recording's rules choose (sdpa.py; the torch the
  suite installs is newer than 2.11, so cuDNN's 1/16 dropout resolution
  applies: GPT-2's and BERT's attention dropout 0.1 leave cuDNN, and their
  padding/causal masks leave flash: memory-efficient attention), and on the
  A100 the re-targeted kernel the report names (no cuDNN preference on 8.x:
  flash without a mask, memory-efficient attention with one);
- per layer, the bytes the fused kernel keeps for backward, against the
  closed form of its saved results: output 2*B*Hq*Sq*Dv (bf16), logsumexp
  4*B*Hq*Sq (flash and cuDNN; memory-efficient attention pads Sq to a
  multiple of 32), and the RNG state (cuDNN: two int64 scalars, 8 + 8 B;
  flash: a uint64[2] and a uint64 scalar, 16 + 8 B; efficient: host
  scalars, nothing on the device) -- under checkpointing none of it is
  kept (recomputed in backward);
- checkpointing keeps fewer of the first layer's activation bytes than not.
ctest: python.gpusim_torch.zoo (PyTorch 2.x, the venv's pytest)."""

import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tools", "collect"))
import fork_recorder  # noqa: E402  (torch imported once; a forked process per recording)
ZOO = os.path.join(ROOT, "examples", "torch")
GPUSIM = os.environ.get("GPUSIM_BINARY", os.path.join(ROOT, "build", "gpusim"))

# model -> (layer name pattern (None: no layers to check), whether it has
# attention, B, Hq, Sq, Dv of its attention calls at size "test").
CASES = {
    "gpt2": (r"transformer\.h\.(\d+)\.", True, 2, 4, 128, 32),
    "llama": (r"model\.layers\.(\d+)\.", True, 2, 8, 128, 32),
    "mistral": (r"model\.layers\.(\d+)\.", True, 2, 8, 128, 32),
    "qwen2": (r"model\.layers\.(\d+)\.", True, 2, 7, 128, 32),
    "bert": (r"bert\.encoder\.layer\.(\d+)\.", True, 2, 4, 128, 32),
    "vit_hf": (r"vit\.layers\.(\d+)\.", True, 2, 4, 17, 32),
    "vit_b16": (r"encoder\.layers\.encoder_layer_(\d+)\.", True, 2, 4, 17, 32),
    "t5": (None, True, 0, 0, 0, 0),
    "resnet50": (None, False, 0, 0, 0, 0),
    "convnext_timm": (None, False, 0, 0, 0, 0),
}


def expected(dims, capability):
    """select_sdp_backend for these calls (bf16, head dim 32, no grad on the
    mask, torch >= 2.12): on 9.0 cuDNN first unless the dropout is not a
    multiple of 1/16; flash unless a mask is given; else memory-efficient.
    On 8.0 no cuDNN preference: flash without a mask, else efficient.
    Transformers passes the causal mask as None in some steps and as a
    tensor in others (with gradient checkpointing), so the mask fact decides."""
    dropout_ppm, mask = dims[9], dims[11]
    if capability == "9.0" and dropout_ppm % 62500 == 0:
        return "cudnn"
    return "efficient" if mask else "flash"




def parse(path):
    """(activation allocations live at the first backward marker: id ->
    (bytes, name)), the compute events' (name, op, dims)."""
    live, ops = {}, []
    in_fwd = True
    with open(path) as f:
        for line in f:
            w = line.split()
            if not w:
                continue
            if w[0] == "marker" and w[1] == "backward":
                in_fwd = False
            if w[0] == "alloc" and in_fwd:
                role = re.search(r"role=(\S+)", line)
                name = re.search(r"name=(\S+)", line)
                if role and role.group(1) in ("activation", "temporary", "residual"):
                    live[w[1]] = (int(w[2]), name.group(1) if name else "")
            elif w[0] == "free" and in_fwd:
                live.pop(w[1], None)
            elif w[0] == "compute":
                op = re.search(r" op=(\S+)", line)
                dims = re.search(r" dims=(\S+)", line)
                ops.append((w[1], op.group(1) if op else "", dims.group(1) if dims else ""))
    return live, ops


class Zoo(unittest.TestCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="gpusim_zoo_")
        cls.traces = {}
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), PYTHONWARNINGS="ignore")
        cls.recorder = fork_recorder.Client(sys.executable, env, cls.tmp, cwd=ROOT)

    @classmethod
    def tearDownClass(cls):
        cls.recorder.close()

    def record(self, model, ckpt):
        key = (model, ckpt)
        if key not in self.traces:
            out = os.path.join(self.tmp, "%s%s.trace" % (model, "_ckpt" if ckpt else ""))
            r = self.recorder.run(["record", os.path.join(ZOO, model + ".py"), "--arg",
                                   "grad_ckpt=%s" % str(ckpt).lower(), "--device", "h100-sxm-80gb", "--out", out])
            self.assertEqual(r.returncode, 0, "%s: %s" % (model, r.stderr[-3000:]))
            self.traces[key] = out
        return self.traces[key]

    def replay(self, trace, device):
        r = subprocess.run([GPUSIM, "replay", trace, "--device", device, "--format", "json"],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def check_model(self, model):
        pattern, has_attention, B, H, S, Dv = CASES[model]
        kept = {}
        formula = ""
        targets = set()
        for ckpt in (False, True):
            trace = self.record(model, ckpt)
            live, ops = parse(trace)
            fused = [o for o in ops if o[1].startswith("_scaled_dot_product_") and not o[1].endswith("_backward")]
            backends = set()
            if not has_attention:
                self.assertEqual(fused, [], model)
            elif model != "t5" or not ckpt:
                self.assertTrue(fused, "%s: no fused SDPA op recorded" % model)
                for _, op, dims in fused:
                    d = [int(x) for x in dims.split(",")]
                    self.assertEqual(len(d), 17, (model, dims))
                    want = expected(d, "9.0")
                    self.assertEqual(op, "_scaled_dot_product_%s_attention" % want, (model, ckpt, dims))
                    backends.add((want, expected(d, "8.0")))
            if model == "t5":
                # The encoder's self-attention adds a position bias that
                # requires grad: no fused kernel takes it (the math kernel).
                self.assertTrue(any(o[0].startswith("encoder.") and "_safe_softmax" in o[0] for o in ops), model)
            if pattern is not None:
                per = {}
                for size, name in live.values():
                    m = re.match(pattern, name)
                    if m:
                        per.setdefault(int(m.group(1)), []).append((size, name))
                kept[ckpt] = sum(s for s, _ in per.get(0, []))
                (op,) = {b[0] for b in backends}
                attn = sorted(s for s, n in per.get(0, []) if n.endswith(":_scaled_dot_product_%s_attention" % op))
                if ckpt:
                    self.assertEqual(attn, [], "%s: checkpointing kept the kernel's results" % model)
                else:
                    lse_rows = -(-S // 32) * 32 if op == "efficient" else S
                    rng = {"cudnn": [8, 8], "flash": [16, 8], "efficient": []}[op]
                    want = sorted([2 * B * H * S * Dv, 4 * B * H * lse_rows] + rng)
                    self.assertEqual(attn, want, model)
                    formula = "%s B = out 2*%d*%d*%d*%d + lse 4*%d*%d*%d%s" % (
                        "{:,}".format(sum(want)), B, H, S, Dv, B, H, lse_rows,
                        "".join(" + %d" % r for r in rng))
            for device in ("h100-sxm-80gb", "a100-sxm-80gb"):
                rep = self.replay(trace, device)
                self.assertGreater(rep["allocator"]["peak_allocated_bytes"], 0)
                if backends:
                    sd = rep["step"]["device_memory"].get("sdpa") or []
                    fwd = [c for c in sd if not c["op"].endswith("_backward")]
                    self.assertTrue(fwd, "%s on %s: no SDPA line in the report" % (model, device))
                    want = {b[0] if device == "h100-sxm-80gb" else b[1] for b in backends}
                    self.assertEqual({c["backend"] for c in fwd}, want, (model, device, sd))
                    targets.add((device, ",".join(sorted(want))))
        if pattern is not None:
            self.assertLess(kept[True], kept[False], "%s: checkpointing kept no fewer bytes" % model)
        # One line per model for the notes (pytest -s; generated, not copied).
        print("\nzoo %s: SDPA %s; layer 0: fused kernel keeps %s; activations kept %s" % (
            model, "; ".join("%s %s" % t for t in sorted(targets)) or "none",
            formula or "-", " / ".join("{:,} B{}".format(kept[c], " checkpointed" if c else "")
                                       for c in (False, True) if c in kept) or "-"), file=sys.stderr)


def _make(model):
    def test(self):
        self.check_model(model)
    test.__name__ = "test_" + model
    return test


for _m in CASES:
    setattr(Zoo, "test_" + _m, _make(_m))


if __name__ == "__main__":
    unittest.main()
