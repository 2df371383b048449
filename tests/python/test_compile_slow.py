"""The wrapper reader (python/gpusim_torch/inductor_plan.py, Note [Reading
Inductor's wrapper]) against what a compiled module really allocates: the
CS336 LM compiled by Inductor for the CPU (C++ kernels, the same wrapper
codegen and buffer reuse as for CUDA), each graph's wrapper read by
parse_wrapper(device="cpu"), then the compiled module itself run on CPU
tensors under the profiler (profile_memory: every allocation and free, in
order). The plan's allocations, frees and input drops must be the module's,
block for block. Slow (a C++ compile, about 15 s): ctest
python.gpusim_torch.compile_slow."""

import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, HERE)

import torch  # noqa: E402

from gpusim_torch import inductor_plan  # noqa: E402


def compile_on_cpu():
    """[(wrapper source, GraphLowering, loaded module)] of the CS336 LM's
    forward and backward, compiled by Inductor for the CPU."""
    import torch._inductor.graph as ig
    import cs336_lm
    grabbed = []
    orig = ig.GraphLowering._compile_to_module_lines

    def grab(self, wrapper_code):
        mod = orig(self, wrapper_code)
        grabbed.append((wrapper_code.value, self, mod))
        return mod
    saved = (torch._inductor.config.fx_graph_cache, torch._functorch.config.enable_autograd_cache)
    ig.GraphLowering._compile_to_module_lines = grab
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    try:
        torch._dynamo.reset()
        m = cs336_lm.TransformerLM(vocab_size=512, context_length=32, d_model=64, num_layers=2, num_heads=4,
                                   d_ff=128)
        ids = torch.randint(0, 512, (2, 32))
        cs336_lm.cross_entropy(torch.compile(m)(ids), ids).backward()
    finally:
        ig.GraphLowering._compile_to_module_lines = orig
        torch._inductor.config.fx_graph_cache, torch._functorch.config.enable_autograd_cache = saved
        torch._dynamo.reset()
    return grabbed


def run_profiled(graph, mod, names):
    """(input bytes, [+bytes / -bytes] of every CPU allocation and free
    while the inputs are made and the module's call() runs)."""
    with tempfile.TemporaryDirectory() as d:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
            args = []
            for n in names:
                b = graph.graph_inputs[n]
                args.append(torch.empty_strided([int(s) for s in b.get_size()], [int(s) for s in b.get_stride()],
                                                dtype=b.get_dtype()).zero_())  # zeros: valid indices
            nbytes = [a.untyped_storage().nbytes() for a in args]
            out = mod.call(args)
        path = os.path.join(d, "t.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    del out
    mem = [e["args"]["Bytes"] for e in sorted(events, key=lambda e: e["ts"]) if e.get("name") == "[memory]"]
    return nbytes, mem


class WrapperAgainstExecutionTest(unittest.TestCase):
    def test_plan_is_what_the_compiled_module_allocates(self):
        grabbed = compile_on_cpu()
        self.assertEqual(len(grabbed), 2)  # the forward and the backward
        for source, graph, mod in grabbed:
            plan = inductor_plan.parse_wrapper(source, graph, device="cpu")
            nbytes, mem = run_profiled(graph, mod, plan.inputs)
            expected = []
            for s in plan.steps:
                if s[0] == "alloc":
                    expected.append(plan.storages[s[1]].nbytes)
                elif s[0] == "free":
                    expected.append(-plan.storages[s[1]].nbytes)
                elif s[0] == "drop":  # nothing but the list held the input
                    expected.append(-nbytes[s[1]])
            made = sum(1 for n in nbytes if n)
            self.assertEqual(mem[:made], [n for n in nbytes if n])
            self.assertGreater(len(expected), 20, plan.name)
            self.assertEqual(mem[made:made + len(expected)], expected, plan.name)
            # and nothing else while call() ran: what follows is the
            # previous graph's outputs going (or nothing)
            self.assertTrue(all(b < 0 for b in mem[made + len(expected):]), plan.name)


if __name__ == "__main__":
    unittest.main()
