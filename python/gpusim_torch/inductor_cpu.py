"""Inductor's own plan for a CUDA device, made on the CPU: while a step is
recorded, the graphs torch.compile hands to Inductor go through Dynamo,
AOTAutograd, the min-cut partitioner, Inductor's lowering, its Scheduler and
its wrapper code generation for device cuda:0, and the generated wrapper
(what TORCH_LOGS=output_code prints) is read by inductor_plan.py instead of
being loaded and run.

Note [torch.compile on the CPU]
A compiled region runs what Inductor generated: fused kernels (an
intermediate fused into its consumer is never allocated), buffers reused
inside the graph, and the tensors AOTAutograd's partitioner chose to save
for the backward (the rest is recomputed). gpusim takes all of it from the
torch being recorded with, not from a model of it:

1. Dynamo traces the user's code on the recorder's meta tensors: graph
   breaks, guards and recompiles are Dynamo's own. The recorder is a
   TorchDispatchMode that ignores compile internals
   (torch/utils/_python_dispatch.py ignore_compile_internals: it is off
   while Dynamo compiles and on while the compiled code runs).
2. torch.compile's default backend calls torch._inductor.compile_fx.compile_fx
   (torch/__init__.py _TorchCompileInductorWrapper.__call__), which runs the
   pre-grad passes, AOTAutograd with Inductor's decompositions and its
   partition_fn (min_cut_rematerialization_partition, compiler="inductor")
   and compile_fx_inner per graph. gpusim calls that compile_fx with
   inner_compile=its own wrapper of compile_fx_inner; nothing else changes.
3. The joint graph is traced on meta, then moved to cuda:0 before the
   joint-graph passes (compile_fx.partition_fn -> _recursive_joint_graph_passes;
   inference graphs: compile_fx_forward): device arguments become cuda:0,
   placeholders get fake CUDA values, FakeTensorProp re-derives every node's
   value. It cannot be traced on fake CUDA tensors from the start: AOTAutograd
   traces the backward through the autograd engine
   (_aot_autograd/graph_capture_wrappers.py create_joint: torch.autograd.grad),
   whose CUDA device thread asks the driver for a primary context
   ("hasPrimaryContext expects a valid device index" without one). On meta,
   the joint-graph passes would treat every value as data-free
   (fx_passes/joint_graph.py: meta outputs replaced by empty_strided), so they
   must see cuda. The partitioner then runs on the CUDA graph, as it does on
   a GPU.
4. compile_fx_inner runs as it is (post-grad passes, GraphLowering, the
   Scheduler's fusion, wrapper codegen with its buffer reuse and, when
   configured, memory planning). GraphLowering._compile_to_module_lines
   receives the wrapper source; gpusim keeps it and returns a module whose
   call() is inductor_plan's runtime, so no kernel is compiled and no module
   is loaded.

What cannot run without a GPU or triton, and what gpusim does instead (the
only patches, each applied while Inductor compiles):
- device probing: torch.cuda.is_available/device_count/current_device/
  get_device_properties/get_device_capability/get_device_name/
  set_device/_exchange_device/_maybe_exchange_device/is_bf16_supported and
  the same through torch/_dynamo/device_interface.py CudaInterface answer
  as the --device's GPU (configs/devices: SMs, compute capability, threads
  per SM, memory; the rest from the CUDA C Programming Guide's compute
  capability table): Inductor reads them for split reductions
  (ir.py Reduction.num_splits: multi_processor_count), persistent
  reductions and kernel metadata (runtime/hints.py DeviceProperties.create).
- torch.cuda.get_rng_state/set_rng_state: dynamo/utils.py preserve_rng_state
  saves and restores the CUDA generator around lowering; a fixed state.
- triton: scheduler.py Scheduler.create_backend refuses a CUDA device when
  has_triton() is false; of triton itself, kernel source generation reads
  only torch/utils/_triton.py triton_hash_with_backend (a cache key in each
  kernel's inductor_meta), answered with a fixed string. The kernel sources
  are generated as on a GPU machine and never compiled.
- constants: a tensor built on the meta device while tracing has no data.
  A 0-dim one made by torch.tensor(number) in the user's code is rebuilt as
  full((), number) in Dynamo's graph before AOTAutograd traces it (the graph
  the uniform-value constant folder turns lift_fresh_copy into anyway); any
  other lifted meta constant becomes zeros of its shape on cuda (0-dim: a
  CPU scalar), named in the trace's comments. The uniform-value constant
  folder (fx_passes/joint_graph.py UniformValueConstantFolder) evaluates its
  constant subgraphs on the CPU instead of CUDA: it keeps only the values.
- CompositeImplicitAutograd ops on meta: their Python Meta kernels are set
  aside while tracing, so they decompose above autograd as on CUDA
  (_composite_ops_decompose_on_meta; without it F.cross_entropy's joint
  graph has no gradient).
- SDPA: on meta, aten::scaled_dot_product_attention asks no fused-kernel
  stub (attention.cpp: _fused_sdp_choice_stub has no meta entry) and takes
  the math path; the recorder's SDPA dispatcher (sdpa.py) runs as a torch
  function mode, which Dynamo traces, so the compiled graph holds the fused
  kernel the CUDA build would choose.

Not corrected (named here): decompositions that ask the tensor's device
while AOTAutograd traces see meta, not cuda, and take their non-CUDA branch:
torch/_decomp/decompositions.py log_sigmoid_forward (keeps a buffer the
CUDA branch does not), _fused_addmm_activation (exact GELU, not tanh),
upsample index dtype and output memory format, and
torch/_inductor/decomposition.py's convolution_backward bias decomposition
and bf16 index_add. Transformer LMs reach none of them.

Refused by name: mode="reduce-overhead" and "max-autotune" (CUDA graphs:
cudagraph_trees.py's private memory pool, static input copies) and
backend="cudagraphs" (the same pools), and
max_autotune (its GEMM and template choice is made by timing candidates on
the GPU, select_algorithm.py); cpp_wrapper; dynamic shapes (a symbolic size
in a compiled graph). What is recorded instead is said in each refusal.
Other backends run as they are: "eager" and "aot_eager" run Dynamo's or
AOTAutograd's graphs op by op, which the recorder records as eager ops.
"""

import contextlib
import re
import sys
import types

import torch

CUDA0 = torch.device("cuda", 0)


class CompileRefused(Exception):
    """A torch.compile setting the recorder does not model (raised through
    Dynamo, which wraps it; session.py unwraps it into a RecordError)."""


def device_properties(target_path, name):
    """The torch.cuda.get_device_properties() the modelled GPU would answer,
    from its configs/devices YAML (sms, compute_capability,
    max_threads_per_sm, memory.cuda_total). Per compute capability, from the
    CUDA C Programming Guide, "Compute Capabilities" table: 64 K 32-bit
    registers per SM (5.0 onwards), 1,024 threads per block, warp size 32,
    shared memory per block opt-in 163 KB (8.0), 99 KB (8.6/8.9), 227 KB
    (9.0 and 10.0)."""
    with open(target_path) as f:
        text = f.read()

    def num(pattern, default):
        m = re.search(pattern, text, re.M)
        return int(m.group(1)) if m else default
    m = re.search(r'^compute_capability:\s*"?(\d+)\.(\d+)"?', text, re.M)
    major, minor = int(m.group(1)), int(m.group(2))
    smem = {(8, 0): 163 * 1024, (8, 6): 99 * 1024, (8, 9): 99 * 1024}.get((major, minor), 227 * 1024)
    return types.SimpleNamespace(
        name="%s (modelled by gpusim)" % name, major=major, minor=minor,
        multi_processor_count=num(r"^sms:\s*(\d+)", 108),
        max_threads_per_multi_processor=num(r"^max_threads_per_sm:\s*(\d+)", 2048),
        total_memory=num(r"^\s+cuda_total:\s*(\d+)", 80 * 2 ** 30),
        regs_per_multiprocessor=65536, max_threads_per_block=1024, warp_size=32,
        shared_memory_per_block_optin=smem, shared_memory_per_block=48 * 1024,
        shared_memory_per_multiprocessor=smem + 1024, L2_cache_size=num(r"^l2:\s*(\d+)MiB", 40) * 2 ** 20,
        gcnArchName="sm_%d%d" % (major, minor), is_integrated=False, uuid="gpusim-" + name,
        pci_bus_id=0, pci_device_id=0, pci_domain_id=0)


@contextlib.contextmanager
def _patched(pairs):
    """Sets (owner, attribute) -> value for the block. For a class owner the
    raw __dict__ entry is kept (staticmethods stay staticmethods)."""
    saved = []
    for (owner, attr), value in pairs.items():
        if isinstance(owner, type):
            saved.append((owner, attr, owner.__dict__.get(attr, None), attr in owner.__dict__))
        else:
            saved.append((owner, attr, getattr(owner, attr, None), hasattr(owner, attr)))
        setattr(owner, attr, value)
    try:
        yield
    finally:
        for owner, attr, old, had in reversed(saved):
            if had:
                setattr(owner, attr, old)
            else:
                delattr(owner, attr)


def _device_probes(props):
    """The device-probing patches of Note [torch.compile on the CPU]."""
    import torch._dynamo.device_interface as di
    import torch._inductor.scheduler as sched
    import torch.utils._triton as ut
    cap = (props.major, props.minor)
    ci = di.CudaInterface
    return {
        (torch.cuda, "is_available"): lambda: True,
        (torch.cuda, "device_count"): lambda: 1,
        (torch.cuda, "current_device"): lambda: 0,
        (torch.cuda, "get_device_properties"): lambda device=None: props,
        (torch.cuda, "get_device_capability"): lambda device=None: cap,
        (torch.cuda, "get_device_name"): lambda device=None: props.name,
        (torch.cuda, "is_bf16_supported"): lambda *a, **k: cap >= (8, 0),
        (torch.cuda, "set_device"): lambda device: None,
        (torch.cuda, "_exchange_device"): lambda device: 0,
        (torch.cuda, "_maybe_exchange_device"): lambda device: 0,
        (torch.cuda, "get_rng_state"): lambda device="cuda": torch.zeros(16, dtype=torch.uint8),
        (torch.cuda, "set_rng_state"): lambda state, device="cuda": None,
        (ci, "get_device_properties"): staticmethod(lambda device=None: props),
        (ci, "current_device"): staticmethod(lambda: 0),
        (ci, "device_count"): staticmethod(lambda: 1),
        (ci, "set_device"): staticmethod(lambda device: None),
        (ci, "exchange_device"): staticmethod(lambda device: 0),
        (ci, "maybe_exchange_device"): staticmethod(lambda device: 0),
        (ci, "is_bf16_supported"): staticmethod(lambda *a, **k: cap >= (8, 0)),
        (sched, "has_triton"): lambda: True,
        (ut, "triton_hash_with_backend"): lambda: "gpusim-no-triton",
    }


def _to_cuda(v):
    if isinstance(v, torch.device) and v.type == "meta":
        return CUDA0
    if isinstance(v, str) and v == "meta":
        return CUDA0
    if isinstance(v, (list, tuple)):
        return type(v)(_to_cuda(x) for x in v)
    if isinstance(v, dict):
        return {k: _to_cuda(x) for k, x in v.items()}
    return v


def _fake_mode_of(gm, inputs=()):
    from torch._guards import detect_fake_mode
    vals = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
    return detect_fake_mode(list(inputs) + vals) or detect_fake_mode()


def retarget(gm, notes, inputs=()):
    """Moves a graph traced on meta to cuda:0 (Note [torch.compile on the
    CPU], 3). Returns the placeholders' fake CUDA values; a graph already on
    cuda is left as it is."""
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp
    from torch.utils._python_dispatch import _disable_current_modes
    fake_mode = _fake_mode_of(gm, inputs)
    moved = False
    ins = []
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            v = n.meta.get("val")
            if isinstance(v, torch.Tensor) and v.device.type == "meta":
                with fake_mode:
                    v = torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device=CUDA0,
                                            requires_grad=v.requires_grad)
                moved = True
            ins.append(v)
        elif n.op == "get_attr":
            v = getattr(gm, n.target, None)
            if isinstance(v, torch.Tensor) and v.device.type == "meta":
                with _disable_current_modes():
                    if v.dim() == 0:
                        setattr(gm, n.target, torch.zeros((), dtype=v.dtype))
                    else:
                        setattr(gm, n.target, _fake_zeros(fake_mode, v))
                notes.append("constant %s %s of the compiled graph was made on the meta device (no data): "
                             "planned as zeros" % (n.target, list(v.shape)))
                moved = True
        elif n.op == "call_function":
            a, k = _to_cuda(n.args), _to_cuda(n.kwargs)
            if a != n.args or k != n.kwargs:
                n.args, n.kwargs = a, k
                moved = True
    if moved:
        FakeTensorProp(gm, fake_mode).propagate_dont_convert_inputs(*ins)
        gm.recompile()
    return ins


def _fake_zeros(fake_mode, v):
    with fake_mode:
        return torch.zeros(v.shape, dtype=v.dtype, device=CUDA0)


def literal_scalars_as_full(gm):
    """Dynamo's graph: torch.tensor(NUMBER, device=meta) -> torch.full((),
    NUMBER, dtype) so the value survives tracing on meta (Note [torch.compile
    on the CPU], constants). torch.tensor infers float32 (the default dtype)
    for a float, int64 for an int, bool for a bool."""
    changed = False
    for n in gm.graph.nodes:
        if n.op != "call_function" or n.target is not torch.tensor or len(n.args) != 1:
            continue
        value = n.args[0]
        if not isinstance(value, (bool, int, float)):
            continue
        dtype = n.kwargs.get("dtype") or (torch.bool if isinstance(value, bool) else torch.int64
                                          if isinstance(value, int) else torch.get_default_dtype())
        kwargs = {k: v for k, v in n.kwargs.items() if k in ("device", "requires_grad")}
        kwargs["dtype"] = dtype
        n.target = torch.full
        n.args = ((), value)
        n.kwargs = kwargs
        changed = True
    if changed:
        gm.recompile()


class _CpuForCuda(torch.utils._python_dispatch.TorchDispatchMode):
    """Runs factory ops asked for on cuda on the CPU (the constant folder's
    values; Note [torch.compile on the CPU], constants)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        d = kwargs.get("device")
        if d is not None and torch.device(d).type == "cuda":
            kwargs["device"] = torch.device("cpu")
        return func(*args, **kwargs)


def refusal_for(patches):
    """The refusal message for the effective Inductor config (the global
    config with compile_fx's config_patches over it), or None."""
    from torch._inductor import config

    def get(key):
        if key in patches:
            return patches[key]
        owner = config
        for part in key.split(".")[:-1]:
            owner = getattr(owner, part)
        return getattr(owner, key.split(".")[-1])
    if get("triton.cudagraphs"):
        return ("torch.compile with CUDA graphs (mode=\"reduce-overhead\" or \"max-autotune\", or "
                "torch._inductor.config.triton.cudagraphs) is not modelled: CUDA graph trees keep a private "
                "memory pool and static copies of the inputs (torch/_inductor/cudagraph_trees.py), which "
                "gpusim does not size. Record with mode=None (or \"max-autotune-no-cudagraphs\" is refused "
                "too, below): gpusim models the default mode's buffer plan")
    if get("max_autotune") or get("max_autotune_gemm") or get("max_autotune_pointwise"):
        return ("torch.compile with max-autotune (mode=\"max-autotune-no-cudagraphs\" or "
                "torch._inductor.config.max_autotune*) is not modelled: it picks GEMM kernels and templates "
                "(and which epilogues fuse into them) by timing candidates on the GPU "
                "(torch/_inductor/select_algorithm.py), which cannot run here. Record with mode=None: gpusim "
                "models the default mode's plan (cuBLAS extern kernels)")
    if get("cpp_wrapper"):
        return ("torch.compile with cpp_wrapper is not modelled: gpusim reads Inductor's Python wrapper. "
                "Record without cpp_wrapper (the buffer plan is the same)")
    return None


@contextlib.contextmanager
def _composite_ops_decompose_on_meta():
    """torch/_meta_registrations.py activate_meta registers every
    decomposition of torch._decomp's tables as a Python Meta kernel
    (py_impl(DispatchKey.Meta)), CompositeImplicitAutograd ops included.
    Under the Python dispatcher, which AOTAutograd enables while it traces,
    a backend kernel makes the dispatcher skip the op's
    CompositeImplicitAutograd kernel on that backend's Autograd key, so on
    meta an op like aten::nll_loss reaches autograd's not-implemented
    fallback and the joint graph loses its gradient (F.cross_entropy's
    backward is None). CUDA has no such Python kernel: the op decomposes
    above autograd. While tracing, those Python Meta kernels of
    CompositeImplicitAutograd ops are set aside, so meta decomposes them as
    CUDA does."""
    from torch._C import DispatchKey
    from torch._decomp import global_decomposition_table
    taken = []
    seen = set()
    for table in global_decomposition_table.values():
        for op in list(table):
            if op in seen or not isinstance(op, torch._ops.OpOverload):
                continue
            seen.add(op)
            if DispatchKey.Meta in op.py_kernels and \
                    torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd"):
                taken.append((op, op.py_kernels.pop(DispatchKey.Meta)))
                op._dispatch_cache.clear()
    try:
        yield
    finally:
        for op, fn in taken:
            op.py_kernels[DispatchKey.Meta] = fn
            op._dispatch_cache.clear()


class Capture:
    """While entered, torch.compile's Inductor backend plans for cuda:0 on
    the CPU (Note [torch.compile on the CPU]) and every compiled graph's
    wrapper becomes an inductor_plan.GraphPlan whose call() the recorder
    runs. `props`: device_properties(...). `make_plan(source, graph,
    info)`: builds the runtime module's call from the wrapper source and the
    GraphLowering. `graphs`: the plans, in compile order; `notes`: what was
    modelled, for the trace's comments."""

    def __init__(self, props, make_plan):
        self.props = props
        self.make_plan = make_plan
        self.graphs = []
        self.notes = []
        self._stack = None
        self._compiling = []  # compile_fx_inner kwargs of the graph being compiled
        self._aot_ids = {}    # AOT ID -> graph number in this recording

    # Note [Inductor patched on the first torch.compile]
    # Importing Inductor (torch._inductor.compile_fx, its graph and passes)
    # costs about 1.5 s of CPU on torch 2.15 beyond Dynamo, which meta
    # kernels import anyway (torch/_compile.py _disable_dynamo, on the first
    # torch._refs call): a third of recording an eager 110M-parameter step
    # (python -m gpusim_torch.bench: 6.4 s before, 4.1 s after, one load
    # of about 7 on 2 cores). So entering the
    # capture patches only torch.compile (nn.Module.compile calls it too,
    # torch/nn/modules/module.py) and the Inductor backend's entry
    # (torch/__init__.py _TorchCompileInductorWrapper.__call__, which Dynamo
    # calls for each graph of an object compiled before recording began);
    # the first call of either imports them and installs the rest. Where
    # Dynamo has compiled graphs earlier in this process, everything is
    # installed at once, as before. A graph Dynamo compiles while nothing
    # was installed (another backend of an object compiled before recording,
    # torch._dynamo.optimize) is refused on leaving (check_unseen_graphs),
    # not recorded as eager.
    def __enter__(self):
        self._orig_compile = torch.compile
        self._active = False
        self._stack = contextlib.ExitStack()
        cap = self

        def compile_(*a, **k):
            backend = k.get("backend", a[1] if len(a) > 1 else "inductor")
            name = backend if isinstance(backend, str) else getattr(backend, "__name__", "")
            if name in ("cudagraphs", "cudagraphs_inner"):
                raise CompileRefused(
                    "torch.compile(backend=\"cudagraphs\") is not modelled: CUDA graphs keep a private memory "
                    "pool (torch/_dynamo/backends/cudagraphs.py, cudagraph_trees.py), which gpusim does not size. "
                    "Record with the default backend (Inductor's plan) or backend=\"aot_eager\" (AOTAutograd's "
                    "graphs run eagerly, recorded op by op)")
            cap._activate()
            return cap._orig_compile(*a, **k)

        light = {(torch, "compile"): compile_}
        wrapper = getattr(torch, "_TorchCompileInductorWrapper", None)
        if wrapper is not None:
            orig_call = wrapper.__call__

            def call(wrapper_self, *a, **k):  # a graph of an object compiled before recording began
                cap._activate(reset=False)  # Dynamo is compiling a frame: its caches stay
                return orig_call(wrapper_self, *a, **k)
            light[(wrapper, "__call__")] = call
        self._stack.enter_context(_patched(light))
        self._graphs_before = _dynamo_graph_count()
        if self._graphs_before > 0:  # graphs compiled earlier in this process may run again
            self._activate()
        return self

    def check_unseen_graphs(self):
        """Raises CompileRefused where Dynamo compiled a graph while the
        capture was entered but never patched (torch._dynamo.optimize
        without torch.compile): that graph ran unplanned."""
        if not self._active and _dynamo_graph_count() > self._graphs_before:
            raise CompileRefused(
                "a graph was compiled by torch._dynamo without torch.compile (torch._dynamo.optimize?); "
                "only torch.compile and nn.Module.compile are modelled (Note [Inductor patched on the "
                "first torch.compile], python/gpusim_torch/inductor_cpu.py)")

    def _activate(self, reset=True):
        if self._active:
            return
        self._active = True
        import torch._dynamo
        import torch._dynamo.config as dcfg
        import torch._functorch.config as fcfg
        import torch._inductor.compile_fx as cfx
        import torch._inductor.config as icfg
        import torch._inductor.fx_passes.joint_graph as jg
        import torch._inductor.graph as igraph
        cap = self
        orig_compile_fx = cfx.compile_fx
        orig_inner = cfx.compile_fx_inner
        orig_joint = cfx._recursive_joint_graph_passes
        orig_deduce = jg.UniformValueConstantFolder._deduce_value
        probes = _device_probes(self.props)

        def compile_fx(model_, inputs_, inner_compile=None, config_patches=None, **kw):
            why = refusal_for(config_patches or {})
            if why:
                raise CompileRefused(why)
            if isinstance(model_, torch.fx.GraphModule):
                literal_scalars_as_full(model_)
            return orig_compile_fx(model_, inputs_, inner_compile=inner, config_patches=config_patches, **kw)

        def joint(gm, skip_invoke_subgraph=False, input_device=None):
            retarget(gm, cap.notes)
            return orig_joint(gm, skip_invoke_subgraph, CUDA0)

        def inner(gm, example_inputs, **kw):
            from torch.utils._python_dispatch import _disable_current_modes
            ins = retarget(gm, cap.notes, example_inputs)
            for v in ins:
                if isinstance(v, torch.Tensor) and any(not isinstance(s, int) for s in v.shape):
                    raise CompileRefused(
                        "torch.compile with dynamic shapes is not modelled: the compiled graph's input sizes "
                        "are symbolic (%s). Record with dynamic=False and one shape per step" % list(v.shape))
            with _disable_current_modes(), _patched(probes):
                cap._compiling.append(kw)
                try:
                    return orig_inner(gm, ins, **kw)
                finally:
                    cap._compiling.pop()

        def deduce(folder, node):
            with _CpuForCuda():
                return orig_deduce(folder, node)

        def to_module(graph, wrapper_code):
            kw = cap._compiling[-1] if cap._compiling else {}
            plan = cap.make_plan(wrapper_code.value, graph, kw)
            # AOTAutograd numbers graphs per process (its AOT ID); the trace
            # numbers them per recording, so the same step writes the same
            # names however many were compiled before it.
            m = re.match(r"(\d+)_(\w+)$", plan.name)
            if m:
                plan.name = "%d_%s" % (cap._aot_ids.setdefault(m.group(1), len(cap._aot_ids)), m.group(2))
            cap.graphs.append(plan)
            return types.SimpleNamespace(call=plan, runner=None,
                                         __file__="<gpusim: Inductor wrapper of graph %s>" % plan.name)

        self._stack.enter_context(_composite_ops_decompose_on_meta())
        self._stack.enter_context(_patched({
            (cfx, "compile_fx"): compile_fx,
            (cfx, "_recursive_joint_graph_passes"): joint,
            (jg.UniformValueConstantFolder, "_deduce_value"): deduce,
            (igraph.GraphLowering, "_compile_to_module_lines"): to_module,
            # Caches could hand back a module compiled elsewhere (a GPU's).
            (icfg, "fx_graph_cache"): False,
            (icfg, "fx_graph_remote_cache"): False,
            (fcfg, "enable_autograd_cache"): False,
            # A backend error must not become a silent eager fallback.
            (dcfg, "suppress_errors"): False,
            # Compile the backward with the forward, not inside the recorded
            # backward (the plan is the same; compile time moves).
            (fcfg, "force_non_lazy_backward_lowering"): True,
        }))
        if reset:
            torch._dynamo.reset()

    def __exit__(self, *exc):
        if self._active:
            import torch._dynamo
            torch._dynamo.reset()
        self._stack.close()
        return False


def _dynamo_graph_count():
    """Graphs Dynamo has compiled in this process (0 before it is imported):
    torch._dynamo.utils.counters["stats"]["unique_graphs"]."""
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return 0
    return utils.counters["stats"]["unique_graphs"]


def find_refusal(exc):
    """The CompileRefused inside `exc` (Dynamo wraps backend errors:
    BackendCompilerFailed.inner_exception, __cause__), or None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, CompileRefused) or type(exc).__name__ == "PlanError":
            return exc
        exc = getattr(exc, "inner_exception", None) or exc.__cause__ or exc.__context__
    return None
