"""The SDPA backend rules (python/gpusim_torch/sdpa.py) against what the CUDA
build dispatched on a real GPU, and the recorded fused op against the
kernel's saved tensors. Ground truth: validation/h200_2026-12-04/probes.json
(torch 2.11+cu130, cuDNN 9.19, an H200: each call's aten op, forward and
backward, read by a TorchDispatchMode on the GPU). PyTorch 2.x only (the
venv's pytest; ctest python.gpusim_torch.sdpa)."""

import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402

from gpusim_torch import sdpa  # noqa: E402

PROBES = os.path.join(ROOT, "validation", "h200_2026-12-04", "probes.json")
OPS = {"_scaled_dot_product_cudnn_attention": sdpa.CUDNN, "_scaled_dot_product_flash_attention": sdpa.FLASH,
       "_scaled_dot_product_efficient_attention": sdpa.EFFICIENT, "_safe_softmax": sdpa.MATH}
DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def _call(case):
    B, H, Hkv, S, L, D = (case[k] for k in ("B", "H", "Hkv", "S", "L", "D"))
    dt = DTYPES[case["dtype"]]
    q = torch.empty(B, H, S, D, device="meta", dtype=dt, requires_grad=True)
    k = torch.empty(B, Hkv, L, D, device="meta", dtype=dt, requires_grad=True)
    v = torch.empty(B, Hkv, L, D, device="meta", dtype=dt, requires_grad=True)
    shapes = {"bool_b1sl": ((B, 1, S, L), torch.bool), "bool_sl": ((S, L), torch.bool),
              "float_b1sl": ((B, 1, S, L), dt), "float_bhsl": ((B, H, S, L), dt),
              "float_b1sl_expand": ((B, 1, S, L), dt)}
    mask = None
    if case["mask"]:
        shape, mdt = shapes[case["mask"]]
        mask = torch.empty(shape, device="meta", dtype=mdt)
        if mdt == torch.bool:  # the composite converts it to the query's dtype first
            mask = torch.empty(shape, device="meta", dtype=dt)
    return sdpa.Call(q, k, v, mask, case["dropout"], case["causal"], case.get("gqa", False))


class RulesAgainstTheGpu(unittest.TestCase):
    def test_every_probe_dispatches_as_measured(self):
        with open(PROBES) as f:
            probes = json.load(f)
        t = sdpa.Target(9, 0, cudnn_version=91900, cuda_version="13.0", torch_version="2.11.0")
        checked = 0
        for case in probes["sdpa"]:
            if "skipped" in case:
                continue
            force = sdpa.BY_NAME[{"FLASH_ATTENTION": "flash", "EFFICIENT_ATTENTION": "efficient",
                                  "CUDNN_ATTENTION": "cudnn", "MATH": "math"}[case["backend"]]] \
                if case.get("backend") else None
            got, why = sdpa.select(_call(case), t, force)
            if "error" in case:
                self.assertEqual(got, sdpa.NONE, (case, why))
            else:
                want = next(OPS[o] for o in case["fwd_ops"] if o in OPS)
                self.assertEqual(sdpa.NAMES[got], sdpa.NAMES[want], (case, why))
            checked += 1
        self.assertGreaterEqual(checked, 47)

    def test_a100_runs_flash_and_v100_math_for_bf16(self):
        case = dict(B=2, H=8, Hkv=8, S=256, L=256, D=64, dtype="bfloat16", causal=True, mask=None,
                    dropout=0.0)
        a100 = sdpa.Target(8, 0, 91900, "13.0", "2.11.0")
        v100 = sdpa.Target(7, 0, 91900, "13.0", "2.11.0")
        self.assertEqual(sdpa.select(_call(case), a100)[0], sdpa.FLASH)   # no cuDNN preference on 8.x
        self.assertEqual(sdpa.select(_call(case), v100)[0], sdpa.MATH)    # no bf16 kernel before sm80

    def test_cudnn_dropout_resolution_from_2_12(self):
        case = dict(B=2, H=8, Hkv=8, S=256, L=256, D=64, dtype="bfloat16", causal=True, mask=None,
                    dropout=0.1)
        new = sdpa.Target(9, 0, 92600, "13.2", "2.15.0")
        got, why = sdpa.select(_call(case), new)
        self.assertEqual(got, sdpa.FLASH)
        self.assertIn("1/16", why)

    def test_deprioritized_by_environment(self):
        case = dict(B=2, H=8, Hkv=8, S=256, L=256, D=64, dtype="bfloat16", causal=True, mask=None,
                    dropout=0.0)
        t = sdpa.Target(9, 0, 91900, "13.0", "2.11.0")
        os.environ["TORCH_CUDNN_SDPA_DEPRIORITIZED"] = "1"
        try:
            self.assertEqual(sdpa.select(_call(case), t)[0], sdpa.FLASH)
        finally:
            del os.environ["TORCH_CUDNN_SDPA_DEPRIORITIZED"]


class RecordedFusedOp(unittest.TestCase):
    """A step with one attention layer records the fused op, its saved
    results and its facts, not the math decomposition."""

    def _record(self, **kw):
        import gpusim_torch

        class Attn(torch.nn.Module):
            def __init__(self, device):
                super().__init__()
                self.qkv = torch.nn.Linear(256, 768, device=device)

            def forward(self, x):
                B, S, _ = x.shape
                q, k, v = self.qkv(x).view(B, S, 3, 4, 64).permute(2, 0, 3, 1, 4)
                return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

        def setup(device):
            m = Attn(device)
            x = torch.empty(2, 512, 256, device=device)
            return dict(model=m, batch=x, optimizer=None, loss_fn=lambda m, b: m(b).float().sum())
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "t.trace")
            gpusim_torch.record_step(setup, out, steps=1, autocast="bf16", mode="meta", **kw)
            with open(out) as f:
                return f.read()

    def test_cudnn_on_h100_saves_out_stats_and_seed(self):
        text = self._record(device="h100-sxm-80gb", cuda_torch_version="2.11")
        self.assertIn("op=_scaled_dot_product_cudnn_attention ", text)
        self.assertIn("op=_scaled_dot_product_cudnn_attention_backward ", text)
        self.assertNotIn("_safe_softmax", text)
        # B 2, H 4, S 512: output 2*4*512*64*2 B, logsumexp 2*4*512*4 B, seed and offset 8 B each.
        sizes = [int(l.split()[2]) for l in text.splitlines() if l.startswith("alloc ") and "cudnn_attention " in l]
        self.assertEqual(sorted(sizes), sorted([2 * 4 * 512 * 64 * 2, 2 * 4 * 512 * 4, 8, 8]))
        dims = next(l for l in text.splitlines() if "op=_scaled_dot_product_cudnn_attention " in l)
        facts = [int(x) for x in dims.split("dims=")[1].split()[0].split(",")]
        self.assertEqual(facts[:12], [2, 4, 4, 512, 512, 64, 64, 2, 1, 0, 1, 0])
        self.assertEqual(facts[12:16], [sdpa.MATH, sdpa.FLASH, sdpa.CUDNN, sdpa.CUDNN])

    def test_forced_math_records_the_decomposition(self):
        text = self._record(sdpa_backend="math")
        self.assertIn("_safe_softmax", text)
        self.assertNotIn("op=_scaled_dot_product_", text)


if __name__ == "__main__":
    unittest.main()
