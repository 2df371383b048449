"""torch.compile'd steps recorded on the CPU (issue 34; python/gpusim_torch/
inductor_cpu.py Note [torch.compile on the CPU], inductor_plan.py Note
[Reading Inductor's wrapper]). PyPI's torch 2.x only (the venv's pytest);
ctest: python.gpusim_torch.compile. GPUSIM_BINARY names the gpusim binary
for the replay checks (skipped without it). The check against a CPU
compile's real allocations is in test_compile_slow.py."""

import ast
import os
import re
import subprocess
import sys
import tempfile
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, HERE)

import torch  # noqa: E402
from torch import nn  # noqa: E402

import gpusim_torch  # noqa: E402
from gpusim_torch import inductor_plan  # noqa: E402
from gpusim_torch.recorder import RecordError  # noqa: E402

GPUSIM = os.environ.get("GPUSIM_BINARY", "")


class MLP(nn.Module):
    def __init__(self, device):
        super().__init__()
        self.fc1 = nn.Linear(64, 256, device=device)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(256, 64, device=device)
        self.norm = nn.LayerNorm(64, device=device)

    def forward(self, x):
        return self.norm(self.fc2(self.act(self.fc1(x))))


def sum_step(model, fwd, device):
    """setup()'s dict: one backward of fwd(batch).sum()."""
    def step(m, batch, opt):
        loss = fwd(batch).sum()
        loss.backward()
        return loss
    return dict(model=model, batch=torch.randn(32, 64, device=device), optimizer=None, step=step)


def mlp_setup(compile_kw=None, compiled=True):
    def setup(device):
        model = MLP(device)
        return sum_step(model, torch.compile(model, **(compile_kw or {})) if compiled else model, device)
    return setup


def record(setup, steps=2, **kw):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "t.gpusim")
        rec = gpusim_torch.record_step(setup, out, steps=steps, mode="meta", **kw)
        return rec, open(out, "rb").read()


def alloc_names(data):
    return [ln.split(b"name=")[1].split(b" ")[0].decode() for ln in data.splitlines()
            if ln.startswith(b"alloc ") and b"name=" in ln]


_MLP = {}


def mlp_recording():
    if "rec" not in _MLP:
        _MLP["rec"] = record(mlp_setup())
    return _MLP["rec"]


class FakeLayout:
    def __init__(self, size, stride, dtype):
        self.size, self.stride, self.dtype, self.offset = size, stride, dtype, 0


class FakeBuf:
    def __init__(self, name, size=None, stride=None, dtype=torch.float32, parent=None):
        self.get_name = lambda: name
        self.name, self._layout, self.inputs = name, FakeLayout(size, stride, dtype) if size else None, []
        if parent is not None:
            self.inputs = [types.SimpleNamespace(get_name=lambda: parent)]

    def get_layout(self):
        if self._layout is None:
            raise NotImplementedError
        return self._layout

    def get_origins(self):
        return []


class MultiOutput(FakeBuf):
    """Stands for ir.py MultiOutput (matched by class name)."""


class WrapperReadingTest(unittest.TestCase):
    """The reading of each wrapper construct (Note [Reading Inductor's
    wrapper]) on a call() written in Inductor's form."""

    SOURCE = '''# AOT ID: ['7_backward']
triton_poi_fused_0 = async_compile.triton('triton_poi_fused_0', \'\'\'
def triton_poi_fused_0(in_out_ptr0, in_ptr0, xnumel, XBLOCK : tl.constexpr):
    pass
\'\'\', device_str='cuda')
class Runner:
    def call(self, args):
        primals_1, saved_1, tangents_1 = args
        args.clear()
        assert_size_stride(primals_1, (4, 4), (4, 1), 'input')
        with torch.cuda._DeviceGuard(0):
            buf0 = empty_strided_cuda((4, 4), (4, 1), torch.float32)
            extern_kernels.mm(tangents_1, primals_1, out=buf0)
            del tangents_1
            buf1 = empty_strided_cuda((4, 4), (4, 1), torch.float32)
            buf2 = buf1; del buf1  # reuse
            raw_stream0 = get_raw_stream(0)
            triton_poi_fused_0.run(buf2, saved_1, 16, stream=raw_stream0)
            del saved_1
            buf7 = buf2[0:8].view(2, 4).sum(dim=0)
            buf8 = buf2[0:8].view(2, 4)
            buf3 = torch.ops.aten._fake_fallback.default(buf2)
            buf4 = buf3[0]
            buf5 = buf3[1]
            del buf3
            del buf5
            buf6 = empty_strided_cuda((2, ), (1, ), torch.float32)
        return (reinterpret_tensor(buf0, (16, ), (1, ), 0), buf4, primals_1, None, )
'''

    def graph(self):
        bufs = {"buf3": FakeBuf("buf3"), "buf7": FakeBuf("buf7", (4, ), (1, )), "buf4": MultiOutput("buf4", (4, 2), (2, 1), parent="buf3"),
                "buf5": MultiOutput("buf5", (4, 2), (2, 1), parent="buf3")}
        inputs = {n: types.SimpleNamespace(get_size=lambda: (4, 4), get_stride=lambda: (4, 1),
                                           get_dtype=lambda: torch.float32)
                  for n in ("primals_1", "saved_1", "tangents_1")}
        return types.SimpleNamespace(name_to_buffer=bufs, buffers=list(bufs.values()), graph_inputs=inputs)

    def test_steps_in_the_wrappers_order(self):
        plan = inductor_plan.parse_wrapper(self.SOURCE, self.graph())
        self.assertEqual(plan.name, "7_backward")
        self.assertEqual(plan.inputs, ["primals_1", "saved_1", "tangents_1"])
        st = plan.storages
        steps = []
        for s in plan.steps:
            if s[0] in ("alloc", "free"):
                steps.append((s[0], st[s[1]].buf, st[s[1]].nbytes))
            elif s[0] == "drop":
                steps.append(("drop", plan.inputs[s[1]]))
            else:
                steps.append(("kernel", s[1]["kernel"]))
        self.assertEqual(steps, [
            ("alloc", "buf0", 64), ("kernel", "mm"), ("drop", "tangents_1"),
            ("alloc", "buf1", 64),                     # buf2 = buf1: the reuse allocates nothing
            ("kernel", "triton_poi_fused_0"), ("drop", "saved_1"),
            ("alloc", "buf7", 16), ("kernel", "sum"),  # a tensor method that computes; buf8 only views
            ("alloc", "buf4", 32), ("alloc", "buf5", 32),  # the fallback allocates its results
            ("kernel", "_fake_fallback"),
            ("free", "buf5", 32),                      # del buf3 and del buf5: no name holds it
            ("alloc", "buf6", 8),
            ("free", "buf7", 16),                      # still named at return, not returned
            ("free", "buf1", 64),                      # once buf2 and buf8 (its view) are gone
            ("free", "buf6", 8)])
        # the in-place kernel reads and writes buf2 (buf1's block): 64 + 64 read, 64 written
        k = [s[1] for s in plan.steps if s[0] == "kernel" and s[1]["kernel"] == "triton_poi_fused_0"][0]
        self.assertEqual((k["read"], k["write"]), (128, 64))
        kinds = [o[0] for o in plan.outputs]
        self.assertEqual(kinds, ["storage", "storage", "input", "none"])
        self.assertEqual(plan.outputs[0][1].size, (16,))
        self.assertEqual(plan.storages[plan.outputs[1][1].sid].buf, "buf4")

    def test_unknown_lines_are_refused_by_name(self):
        bad = self.SOURCE.replace("            del tangents_1\n", "            launch_rockets(buf0)\n")
        with self.assertRaises(inductor_plan.PlanError) as e:
            inductor_plan.parse_wrapper(bad, self.graph())
        self.assertIn("calls launch_rockets, which gpusim does not model", str(e.exception))
        bad = self.SOURCE.replace("            del tangents_1\n", "            for i in range(2): pass\n")
        with self.assertRaises(inductor_plan.PlanError) as e:
            inductor_plan.parse_wrapper(bad, self.graph())
        self.assertIn("is not modelled: for i in range(2)", str(e.exception))


class CompiledMlpTest(unittest.TestCase):
    def test_each_plan_is_its_output_code(self):
        """The plan against the wrapper Inductor generated for cuda: one
        block per empty_strided_cuda line, none for a `# reuse` line, one
        kernel per launch, the return tuple's length as outputs."""
        rec, _ = mlp_recording()
        self.assertEqual([p.name for p in rec.compiled], ["0_forward", "0_backward"])
        for plan in rec.compiled:
            call = plan.source[plan.source.index("def call("):]
            self.assertIn("empty_strided_cuda", call)
            self.assertEqual(len(plan.allocations()), call.count("= empty_strided_cuda("), plan.name)
            launches = len(re.findall(r"^\s+triton_\w+\.run\(", call, re.M)) + \
                len(re.findall(r"^\s+(?:buf\d+ = )?extern_kernels\.\w+\(", call, re.M))
            self.assertEqual(len(plan.kernels), launches, plan.name)
            ret = [n for n in ast.walk(ast.parse(call.replace("def call(self, args):", "def call(args):", 1)))
                   if isinstance(n, ast.Return)][0]
            self.assertEqual(len(plan.outputs), len(ret.value.elts), plan.name)
        # fused: the forward's GELU and LayerNorm are Triton kernels
        fw = rec.compiled[0]
        self.assertTrue(any(k.startswith("triton_poi_fused_gelu") for k in fw.kernels), fw.kernels)
        self.assertTrue(any("native_layer_norm" in k for k in fw.kernels), fw.kernels)

    def test_saved_tensors_are_the_partitioners(self):
        """What the compiled forward returns (outputs, then what it saves
        for the backward) is what Inductor's own compile_fx -- its joint
        passes and min_cut_rematerialization_partition -- makes of the same
        model on CPU tensors (here device placement is the only
        difference)."""
        import torch._inductor.compile_fx as cfx
        rec, _ = mlp_recording()
        fw = rec.compiled[0]
        ours = []
        for o in fw.outputs:
            if o[0] == "input":
                ours.append(("input",) + tuple(fw.input_layouts[o[1]]))
            else:
                v = o[1]
                ours.append((tuple(v.size), v.dtype))
        graphs = []

        def inner(gm, example_inputs, **kw):
            graphs.append(gm)
            return gm
        torch._dynamo.reset()
        model = MLP("cpu")
        backend = lambda gm, ins: cfx.compile_fx(gm, ins, inner_compile=inner)  # noqa: E731
        torch.compile(model, backend=backend)(torch.randn(32, 64)).sum().backward()
        torch._dynamo.reset()
        cpu_fw = graphs[0]
        theirs = []
        for a in list(cpu_fw.graph.nodes)[-1].args[0]:
            if a.op == "placeholder":
                theirs.append(("input", tuple(a.meta["val"].shape), a.meta["val"].dtype))
            else:
                v = a.meta["val"]
                theirs.append((tuple(v.shape), v.dtype))
        self.assertEqual(ours, theirs)
        self.assertGreater(len(theirs), 1)  # the forward saves tensors for the backward

    def test_recorded_and_replayed_with_graph_names(self):
        rec, data = mlp_recording()
        names = alloc_names(data)
        self.assertTrue(any(re.match(r"^fc1:0_forward/buf\d+/addmm$", n) for n in names), names)
        self.assertIn(b"marker compiled:0_forward", data)
        self.assertIn(b"marker compiled_end:0_backward phase=backward", data)
        if not GPUSIM:
            self.skipTest("GPUSIM_BINARY not set")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "c.gpusim")
            open(path, "wb").write(data)
            r = subprocess.run([GPUSIM, "replay", path, "--device", "h100-sxm-80gb"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertRegex(r.stdout, r"0_forward\s+1 run\(s\), \d+ kernels, \d+ blocks allocated")
            self.assertRegex(r.stdout, r"0_backward\s+1 run\(s\)")

    def test_same_step_same_bytes(self):
        _, a = record(mlp_setup(), frames=False)
        _, b = record(mlp_setup(), frames=False)
        self.assertEqual(a, b)


class Cs336FusionTest(unittest.TestCase):
    def test_fused_intermediates_are_never_allocated(self):
        """The CS336 LM's SwiGLU (silu(w1 x) * w3 x) and hand-written
        softmax: eager allocates each elementwise result, Inductor's plan
        fuses them into Triton kernels; the matmuls stay extern kernels
        with blocks of their own."""
        import cs336_lm

        def setup(compiled):
            def s(device):
                model = cs336_lm.TransformerLM(vocab_size=512, context_length=32, d_model=64, num_layers=2,
                                               num_heads=4, d_ff=128, device=device)
                fwd = torch.compile(model) if compiled else model
                ids = torch.randint(0, 512, (2, 32), device=device)

                def step(m, b, o):
                    loss = cs336_lm.cross_entropy(fwd(b), b)
                    loss.backward()
                    return loss
                return dict(model=model, batch=ids, optimizer=None, step=step)
            return s
        _, eager = record(setup(False))
        rec, compiled = record(setup(True))
        e, c = alloc_names(eager), alloc_names(compiled)
        for op in ("sigmoid", "exp"):
            self.assertTrue([n for n in e if n.endswith(":" + op)], op)
            self.assertFalse([n for n in c if n.endswith(":" + op)], op)
        self.assertTrue([n for n in c if re.match(r"^layers\.0\.ffn\.w1:0_forward/buf\d+/mm$", n)], c)
        fw = rec.compiled[0]
        self.assertTrue([k for k in fw.kernels if k.startswith("triton_") and "sigmoid" in k], fw.kernels)
        self.assertLess(len(c), len(e))


class GraphBreakTest(unittest.TestCase):
    def test_graph_breaks_split_regions_as_dynamo_does(self):
        def setup(device):
            model = MLP(device)

            @torch.compile
            def fwd(x):
                h = model.fc1(x)
                torch._dynamo.graph_break()
                return model.norm(model.fc2(model.act(h)))
            return sum_step(model, fwd, device)
        rec, data = record(setup)
        self.assertEqual(sorted(p.name for p in rec.compiled),
                         ["0_backward", "0_forward", "1_backward", "1_forward"])
        lines = [ln for ln in data.splitlines() if ln.startswith(b"marker compiled")]
        self.assertEqual(lines[:4], [b"marker compiled:0_forward", b"marker compiled_end:0_forward",
                                     b"marker compiled:1_forward", b"marker compiled_end:1_forward"])


class InferenceGraphTest(unittest.TestCase):
    def test_a_no_grad_region_is_one_inference_graph(self):
        def setup(device):
            model = MLP(device)
            fwd = torch.compile(model)

            def step(m, b, o):
                with torch.no_grad():
                    return fwd(b).sum()
            return dict(model=model, batch=torch.randn(32, 64, device=device), optimizer=None, step=step)
        rec, data = record(setup)
        self.assertEqual([p.name for p in rec.compiled], ["0_inference"])
        # nothing is saved for a backward: the graph returns its one output
        self.assertEqual(len(rec.compiled[0].outputs), 1)
        self.assertIn(b"marker compiled:0_inference", data)


class RefusalTest(unittest.TestCase):
    def refused(self, setup, **kw):
        with self.assertRaises(RecordError) as e:
            record(setup, **kw)
        return str(e.exception)

    def test_modes_refused_by_name_with_what_is_modelled(self):
        msg = self.refused(mlp_setup(dict(mode="reduce-overhead")))
        self.assertIn('torch.compile with CUDA graphs (mode="reduce-overhead"', msg)
        self.assertIn("gpusim models the default mode's buffer plan", msg)
        msg = self.refused(mlp_setup(dict(mode="max-autotune")))
        self.assertIn("CUDA graphs", msg)
        msg = self.refused(mlp_setup(dict(mode="max-autotune-no-cudagraphs")))
        self.assertIn("max-autotune", msg)
        self.assertIn("by timing candidates on the GPU", msg)

    def test_cudagraphs_backend_refused_other_backends_recorded_op_by_op(self):
        msg = self.refused(mlp_setup(dict(backend="cudagraphs")))
        self.assertIn('torch.compile(backend="cudagraphs") is not modelled', msg)
        rec, data = record(mlp_setup(dict(backend="aot_eager")))
        self.assertFalse(rec.compiled)
        self.assertTrue([n for n in alloc_names(data) if n.endswith(":addmm")])

    def test_dynamic_shapes_refused(self):
        msg = self.refused(mlp_setup(dict(dynamic=True)))
        self.assertIn("dynamic shapes is not modelled", msg)

    def test_fake_mode_refuses_compile(self):
        with self.assertRaises(RecordError) as e:
            with tempfile.TemporaryDirectory() as d:
                gpusim_torch.record_step(mlp_setup(), os.path.join(d, "t.gpusim"), steps=1, mode="fake")
        self.assertIn("torch.compile is recorded in meta mode only", str(e.exception))


# Each case runs in a fresh interpreter: whether Inductor is patched depends
# on what this process compiled before (Note [Inductor patched on the first
# torch.compile], inductor_cpu.py).
_LAZY_PRELUDE = """
import sys
sys.path[:0] = [%r, %r]
import torch
from test_compile import MLP, alloc_names, record, sum_step
""" % (os.path.join(ROOT, "python"), HERE)


def run_fresh(body):
    r = subprocess.run([sys.executable, "-W", "ignore", "-c", _LAZY_PRELUDE + body],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise AssertionError(r.stderr[-3000:])
    return r.stdout.strip().splitlines()[-1]


class LazyInductorTest(unittest.TestCase):
    def test_an_eager_step_does_not_import_inductor(self):
        out = run_fresh("""
def setup(device):
    model = MLP(device)
    return sum_step(model, model, device)
rec, data = record(setup)
print(len(rec.compiled), "torch._inductor.compile_fx" in sys.modules)
""")
        self.assertEqual(out, "0 False")

    def test_compiled_before_recording_began_is_planned(self):
        out = run_fresh("""
fwd = torch.compile(lambda m, x: m(x))   # compiled here, run only inside the recording
def setup(device):
    model = MLP(device)
    return sum_step(model, lambda x: fwd(model, x), device)
rec, data = record(setup)
print(",".join(sorted(p.name for p in rec.compiled)))
""")
        self.assertEqual(out, "0_backward,0_forward")

    def test_dynamo_without_torch_compile_is_refused(self):
        out = run_fresh("""
from gpusim_torch.recorder import RecordError
def setup(device):
    model = MLP(device)
    import torch._dynamo
    return sum_step(model, torch._dynamo.optimize("aot_eager")(model), device)
try:
    record(setup)
    print("recorded")
except RecordError as e:
    print(str(e).replace("\\n", " "))
""")
        self.assertIn("without torch.compile", out)


if __name__ == "__main__":
    unittest.main()
