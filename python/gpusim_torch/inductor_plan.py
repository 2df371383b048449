"""One compiled graph's buffer plan, read from the Python wrapper Inductor
generated for it (inductor_cpu.py: Note [torch.compile on the CPU]), and
run by the recorder in place of the compiled module.

Note [Reading Inductor's wrapper]
The wrapper's call(args) (torch/_inductor/codegen/wrapper.py
PythonWrapperCodegen) is straight-line Python, and what it allocates is
what the CUDA caching allocator sees when the compiled graph runs:
- `bufN = empty_strided_cuda(size, stride, dtype)` (wrapper.py
  make_buffer_allocation) allocates a block of the strided tensor's storage
  size; `empty_strided_cpu` allocates host memory (not the device's).
- `bufM = reinterpret_tensor(bufN, ...); del bufN  # reuse` (wrapper.py
  ReuseLine / make_buffer_reuse: a freed buffer of the same size handed to a
  later one, AllocateLine.plan) allocates nothing: bufM is bufN's block;
  `alloc_from_pool(pool, ...)` (memory_planning.py, config.memory_planning)
  is a view of one pooled block.
- kernels: `triton_*.run(...)` writes into buffers allocated before it
  (an in-place reuse, scheduler.py decide_inplace_update, passes the same
  buffer as in_out_ptr); `extern_kernels.X(..., out=bufN)` too; a fallback
  kernel `bufN = torch.ops.aten.X.default(...)` allocates its results itself
  (ir.py FallbackKernel; a tuple of results is unpacked by MultiOutput lines
  `bufK = bufN[i]`).
- `del NAME` drops the wrapper's reference (wrapper.py FreeIfNotReusedLine,
  after the buffer's last use, Scheduler.free_buffers); a block is freed when
  no name holds it, as Python's reference counting frees the tensor. The
  graph's inputs arrive in a list the wrapper clears (`args.clear()`), so a
  `del primals_N` frees an input that nothing outside holds (the backward's
  saved activations): whether it does is decided when the graph runs, by
  the recorder's storage liveness.
- `return (...)`: the graph's outputs (for a forward: the user's outputs,
  then the tensors saved for the backward); a returned block lives on as
  the tensor handed back, everything else still named is freed at return.
Anything else in call() is refused by name (an unknown line would be a
silently wrong plan).
"""

import ast
import re

import torch
from torch.utils._python_dispatch import _disable_current_modes

from gpusim_torch import ops

_IGNORED_CALLS = {"assert_size_stride", "assert_size_stride_grouped", "assert_alignment",
                  "torch.cuda.set_device", "get_raw_stream", "async_compile.wait", "check_aligned",
                  "torch._check", "run_intermediate_hooks", "start_graph", "end_graph",
                  "torch.cuda.synchronize", "assert_tensor_metadata"}
_ALIAS_CALLS = {"reinterpret_tensor", "alloc_from_pool", "copy_if_misaligned",
                "torch.ops.aten.view.dtype", "aten.view.dtype"}


class PlanError(Exception):
    """The wrapper holds something this reader does not model."""


def _dotted(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return base + "." + node.attr if base else ""
    return ""


def storage_bytes(size, stride, itemsize):
    """The storage a strided tensor spans (ATen computeStorageNbytes, offset 0)."""
    if any(s == 0 for s in size):
        return 0
    return (1 + sum((s - 1) * st for s, st in zip(size, stride))) * itemsize


def _dtype(node):
    name = _dotted(node)
    if name.startswith("torch."):
        v = getattr(torch, name[6:], None)
        if isinstance(v, torch.dtype):
            return v
    return None


def _ints(node):
    v = ast.literal_eval(node)
    if not isinstance(v, (tuple, list)) or not all(isinstance(x, int) for x in v):
        raise ValueError
    return tuple(v)


class _View:
    __slots__ = ("sid", "size", "stride", "dtype", "offset")

    def __init__(self, sid, size, stride, dtype, offset=0):
        self.sid, self.size, self.stride, self.dtype, self.offset = sid, size, stride, dtype, offset


class Storage:
    """One block the graph allocates (or one of its inputs)."""
    __slots__ = ("sid", "nbytes", "buf", "kernel", "module", "device", "input")

    def __init__(self, sid, nbytes, buf, device=True, input_index=None):
        self.sid, self.nbytes, self.buf = sid, nbytes, buf
        self.kernel = ""
        self.module = ""
        self.device = device
        self.input = input_index


class GraphPlan:
    """A compiled graph as the recorder runs it. `steps`: ("alloc", sid),
    ("free", sid), ("kernel", event template), ("drop", input index);
    `outputs`: per returned value ("input", i, view or None), ("storage",
    view) or ("none",)."""

    def __init__(self, name, source):
        self.name = name
        self.source = source
        self.inputs = []
        self.input_layouts = []  # (size, dtype) of each input, None when unknown
        self.storages = {}
        self.steps = []
        self.outputs = []
        self.kernels = []
        self.runner = None  # set by the recorder side: fn(plan, args) -> outputs

    def __call__(self, args):
        return self.runner(self, args)

    # Summaries for the report (cli.py) and tests.
    def allocations(self):
        return [self.storages[s[1]] for s in self.steps if s[0] == "alloc"]

    def saved_outputs(self):
        return self.outputs


def _module_path(nodes):
    """The innermost module path of FX nodes' nn_module_stack (Dynamo's
    "L['self'].layers[0].attn" -> "layers.0.attn")."""
    best = ""
    for n in sorted(nodes, key=lambda n: n.name):
        st = n.meta.get("nn_module_stack") or n.meta.get("fwd_nn_module_stack")
        if not st:
            continue
        path = list(st.values())[-1][0]
        path = re.sub(r"^[LG]\['[^']*'\]\.?", "", path)
        path = re.sub(r"\[['\"]?([^'\"\]]+)['\"]?\]", r".\1", path)
        path = re.sub(r"^L\.|^self\.|^\.", "", path)
        path = path.replace("._modules.", ".").replace("._orig_mod", "")
        if len(path) > len(best):
            best = path
    return best


class _Builder:
    def __init__(self, name, source, graph, op_facts=None, device="cuda"):
        self.plan = GraphPlan(name, source)
        self.device = device  # whose allocations are the device's (cuda; cpu: the suite's check)
        self.op_facts = op_facts  # (op, meta args, graph name) -> (op, dims) or None
        self.graph = graph
        self.env = {}        # name -> _View | ("tuple", {child name: _View}) | ("input", i, view)
        self.refs = {}       # sid -> number of names bound to it
        self.kernel_src = {}  # triton kernel name -> parameter names
        self.children = {}   # fallback buffer name -> [MultiOutput names]
        self.next_sid = 0
        self.cur_origins = ""
        for b in getattr(graph, "buffers", []):
            # ir.py MultiOutput: one result of a multi-output kernel
            if any(c.__name__ == "MultiOutput" for c in type(b).__mro__) and b.inputs:
                parent = b.inputs[0]
                pname = parent.get_name() if hasattr(parent, "get_name") else None
                if pname:
                    self.children.setdefault(pname, []).append(b.get_name())

    # -- layout facts from the GraphLowering ------------------------------
    def _layout(self, name):
        buf = self.graph.name_to_buffer.get(name) if hasattr(self.graph, "name_to_buffer") else None
        if buf is None:
            return None
        try:
            lay = buf.get_layout()
            size = tuple(int(s) for s in lay.size)
            stride = tuple(int(s) for s in lay.stride)
            return size, stride, lay.dtype, int(lay.offset)
        except (TypeError, AttributeError, NotImplementedError):
            return None

    def _module_of(self, name):
        """The module of the FX node whose value the buffer holds (ir.py
        origin_node), else the innermost of its origins'."""
        buf = self.graph.name_to_buffer.get(name) if hasattr(self.graph, "name_to_buffer") else None
        if buf is None:
            return ""
        node = getattr(buf, "origin_node", None)
        if node is None:
            op = getattr(buf, "get_defining_op", lambda: None)()
            node = getattr(op, "origin_node", None)
        if node is not None:
            path = _module_path([node])
            if path:
                return path
        try:
            return _module_path(buf.get_origins())
        except AttributeError:
            return ""

    def _new_storage(self, nbytes, buf, device=True):
        s = Storage(self.next_sid, nbytes, buf, device)
        s.module = self._module_of(buf)
        self.plan.storages[s.sid] = s
        self.next_sid += 1
        if device:
            self.plan.steps.append(("alloc", s.sid))
        return s

    def _bind(self, name, value):
        for sid in self._sids(value):
            self.refs[sid] = self.refs.get(sid, 0) + 1
        self._unbind(name)
        self.env[name] = value

    def _sids(self, value):
        if isinstance(value, _View):
            return [value.sid]
        if isinstance(value, tuple) and value and value[0] == "tuple":
            return [v.sid for v in value[1].values()]
        return []

    def _unbind(self, name):
        value = self.env.pop(name, None)
        if value is None:
            return
        for sid in self._sids(value):
            self.refs[sid] -= 1
            if self.refs[sid] == 0:
                st = self.plan.storages[sid]
                if st.input is not None:
                    self.plan.steps.append(("drop", st.input))
                elif st.device:
                    self.plan.steps.append(("free", sid))

    # -- expressions -------------------------------------------------------
    def _view_of(self, expr):
        """The _View an argument expression denotes, or None (a scalar...)."""
        if isinstance(expr, ast.Name):
            v = self.env.get(expr.id)
            return v if isinstance(v, _View) else None
        if isinstance(expr, ast.Call):
            fn = _dotted(expr.func)
            if fn == "reinterpret_tensor" and len(expr.args) >= 4:
                base = self._view_of(expr.args[0])
                if base is None:
                    return None
                return _View(base.sid, _ints(expr.args[1]), _ints(expr.args[2]), base.dtype,
                             ast.literal_eval(expr.args[3]))
            if fn in ("copy_if_misaligned",) and expr.args:
                return self._view_of(expr.args[0])
            if fn == "alloc_from_pool" and len(expr.args) >= 5:
                base = self._view_of(expr.args[0])
                if base is None:
                    return None
                return _View(base.sid, _ints(expr.args[3]), _ints(expr.args[4]), _dtype(expr.args[2]),
                             ast.literal_eval(expr.args[1]))
        if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Name):
            v = self.env.get(expr.value.id)
            if isinstance(v, tuple) and v and v[0] == "tuple":
                return None  # handled by the assignment of a MultiOutput name
        return None

    def _meta_arg(self, expr):
        """A meta tensor (or Python value) standing for an argument, for
        ops.cost / ops.device_facts; raises ValueError when unknown."""
        v = self._view_of(expr)
        if v is not None:
            with _disable_current_modes():
                return torch.empty_strided(v.size, v.stride, dtype=v.dtype, device="meta")
        if isinstance(expr, (ast.List, ast.Tuple)):
            return [self._meta_arg(e) for e in expr.elts]
        d = _dtype(expr)
        if d is not None:
            return d
        return ast.literal_eval(expr)

    # -- statements --------------------------------------------------------
    def run(self, body):
        for stmt in body:
            self._stmt(stmt)

    def _stmt(self, stmt):
        if isinstance(stmt, ast.With):
            return self.run(stmt.body)
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            tgt = stmt.targets[0]
            if isinstance(tgt, ast.Tuple) and isinstance(stmt.value, ast.Name) and stmt.value.id == "args":
                return self._inputs([e.id for e in tgt.elts])
            if isinstance(tgt, ast.Name):
                return self._assign(tgt.id, stmt.value, stmt)
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            fn = _dotted(stmt.value.func)
            if fn == "args.clear" or fn in _IGNORED_CALLS:
                return None
            return self._kernel(stmt.value, stmt)
        if isinstance(stmt, ast.Delete):
            for t in stmt.targets:
                if isinstance(t, ast.Name):
                    self._unbind(t.id)
            return None
        if isinstance(stmt, ast.Return):
            return self._return(stmt.value)
        if isinstance(stmt, ast.Pass):
            return None
        raise PlanError("line %d of graph %s's wrapper is not modelled: %s"
                        % (stmt.lineno, self.plan.name, ast.unparse(stmt)[:200]))

    def _inputs(self, names):
        for i, name in enumerate(names):
            self.plan.inputs.append(name)
            lay = self.graph_input(name)
            st = Storage(self.next_sid, 0, name, device=True)
            st.input = i
            self.plan.storages[st.sid] = st
            self.next_sid += 1
            size, stride, dtype = lay if lay else ((), (), torch.float32)
            self.plan.input_layouts.append((size, dtype) if lay else None)
            self._bind(name, _View(st.sid, size, stride, dtype))

    def graph_input(self, name):
        v = getattr(self.graph, "graph_inputs", {}).get(name)
        if v is None:
            return None
        try:
            return (tuple(int(s) for s in v.get_size()), tuple(int(s) for s in v.get_stride()), v.get_dtype())
        except (TypeError, AttributeError, NotImplementedError):
            return None

    def _assign(self, name, value, stmt):
        if isinstance(value, ast.Call):
            fn = _dotted(value.func)
            if fn in ("empty_strided_cuda", "empty_strided_cpu", "empty_strided_cpu_pinned"):
                size, stride, dtype = _ints(value.args[0]), _ints(value.args[1]), _dtype(value.args[2])
                if dtype is None:
                    raise PlanError("graph %s: %s has a dtype gpusim cannot read" % (self.plan.name, ast.unparse(stmt)))
                st = self._new_storage(storage_bytes(size, stride, dtype.itemsize), name,
                                       device=(fn == "empty_strided_" + self.device))
                return self._bind(name, _View(st.sid, size, stride, dtype))
            if fn == "get_raw_stream":
                return None
            if fn in _ALIAS_CALLS or fn.endswith("view.dtype"):
                v = self._view_of(value) if fn != "torch.ops.aten.view.dtype" else None
                if v is None and value.args:
                    base = self._view_of(value.args[0])
                    if base is not None and fn.endswith("view.dtype"):
                        lay = self._layout(name)
                        v = _View(base.sid, lay[0], lay[1], lay[2]) if lay else base
                if v is None:
                    raise PlanError("graph %s: cannot resolve %s" % (self.plan.name, ast.unparse(stmt)[:200]))
                return self._bind(name, v)
            chain = _method_chain(value)
            if chain is not None and isinstance(self.env.get(chain[0]), _View):
                return self._tensor_method(name, chain, stmt)
            return self._kernel(value, stmt, result=name)
        if isinstance(value, ast.Name):
            v = self.env.get(value.id)
            if v is None:
                raise PlanError("graph %s: %s names nothing bound" % (self.plan.name, ast.unparse(stmt)))
            return self._bind(name, v)
        if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name):
            parent = self.env.get(value.value.id)
            if isinstance(parent, tuple) and parent and parent[0] == "tuple":
                if name in parent[1]:
                    return self._bind(name, parent[1][name])
                raise PlanError("graph %s: %s is not one of %s's outputs" % (self.plan.name, name, value.value.id))
        if isinstance(value, ast.Constant):
            return None  # a scalar (e.g. an unbacked size)
        raise PlanError("line %d of graph %s's wrapper is not modelled: %s"
                        % (stmt.lineno, self.plan.name, ast.unparse(stmt)[:200]))

    def _tensor_method(self, name, chain, stmt):
        """`NAME = base[...].view(...).sum(...)...`: tensor methods on a
        buffer in the wrapper itself (Inductor's mix-order reduction sums
        its workspace's slices so: codegen/simd.py). Views and slices alias;
        any other method runs an ATen kernel whose result is a new block of
        NAME's layout."""
        base, methods = chain
        computing = [m for m in methods if m not in _VIEW_METHODS]
        if not computing:
            return self._bind(name, self.env[base])
        lay = self._layout(name)
        if lay is None:
            raise PlanError("graph %s: %s makes a tensor whose layout gpusim cannot find"
                            % (self.plan.name, ast.unparse(stmt)[:200]))
        size, stride, dtype, _ = lay
        st = self._new_storage(storage_bytes(size, stride, dtype.itemsize), name)
        v = _View(st.sid, size, stride, dtype)
        src = self.env[base]
        nbytes = 1
        for d in src.size:
            nbytes *= d
        kind = "reduce" if computing[-1] in ("sum", "mean", "amax", "amin", "max", "min") else "elementwise"
        self._emit_kernel(computing[-1], {"kind": kind, "flops": float(nbytes), "read": st.nbytes if kind != "reduce"
                                          else nbytes * (src.dtype.itemsize if src.dtype else 4),
                                          "write": st.nbytes, "m": 0, "n": 0, "k": 0, "batch": 1},
                          [src.sid, st.sid], [st.sid], stmt, [name])
        self._bind(name, v)

    def _kernel(self, call, stmt, result=None):
        fn = _dotted(call.func)
        outs = []
        if result is not None:
            kids = self.children.get(result)
            if kids:
                views = {}
                for kid in kids:
                    lay = self._layout(kid)
                    if lay is None:
                        continue
                    size, stride, dtype, _ = lay
                    st = self._new_storage(storage_bytes(size, stride, dtype.itemsize), kid)
                    views[kid] = _View(st.sid, size, stride, dtype)
                self._bind(result, ("tuple", views))
                outs = list(views.values())
            else:
                lay = self._layout(result)
                if lay is not None:
                    size, stride, dtype, _ = lay
                    st = self._new_storage(storage_bytes(size, stride, dtype.itemsize), result)
                    v = _View(st.sid, size, stride, dtype)
                    self._bind(result, v)
                    outs = [v]
        if fn.endswith(".run") and fn.startswith("triton_"):
            return self._triton(fn[:-4], call, stmt)
        if fn.startswith("cpp_fused_") and self.device == "cpu":
            # A C++ kernel of a CPU compile (the suite reads CPU wrappers
            # to check this reader against the module's real allocations).
            uses = [v.sid for v in (self._view_of(a) for a in call.args) if v is not None]
            return self._emit_kernel(fn, {"kind": "elementwise", "flops": 0.0, "read": 0, "write": 0, "m": 0,
                                          "n": 0, "k": 0, "batch": 1}, uses, [], stmt)
        return self._extern(fn, call, stmt, outs)

    def _triton(self, kname, call, stmt):
        params = self.kernel_src.get(kname)
        if params is None:
            raise PlanError("graph %s: kernel %s has no definition in the wrapper" % (self.plan.name, kname))
        read = write = 0
        uses = []
        written = []
        numel = 1
        names = []
        for p, a in zip(params, call.args):
            if p.startswith(("out_ptr", "in_out_ptr")):
                names.append(_base_name(a))
            v = self._view_of(a)
            if v is None:
                if isinstance(a, ast.Constant) and isinstance(a.value, int) and p.endswith("numel"):
                    numel *= a.value
                continue
            nbytes = 1
            for s in v.size:
                nbytes *= s
            nbytes *= v.dtype.itemsize if v.dtype is not None else 4
            uses.append(v.sid)
            if p.startswith("in_out_ptr"):
                read += nbytes
                write += nbytes
                written.append(v.sid)
            elif p.startswith("out_ptr"):
                write += nbytes
                written.append(v.sid)
            else:
                read += nbytes
        kind = "reduce" if kname.startswith(("triton_red_", "triton_per_")) else \
            "matmul" if kname.startswith("triton_tem_") else "elementwise"
        self._emit_kernel(kname, {"kind": kind, "flops": float(numel), "read": read, "write": write,
                                  "m": 0, "n": 0, "k": 0, "batch": 1}, uses, written, stmt, names)

    def _extern(self, fn, call, stmt, outs):
        if fn.startswith("extern_kernels."):
            opname = fn.split(".", 1)[1]
        elif fn.startswith(("torch.ops.", "aten.")):
            opname = fn.split(".")[-2] if fn.count(".") >= 3 else fn.split(".")[-1]
        else:
            raise PlanError("line %d of graph %s's wrapper calls %s, which gpusim does not model: %s"
                            % (stmt.lineno, self.plan.name, fn or "an expression", ast.unparse(stmt)[:200]))
        uses = []
        written = [v.sid for v in outs]
        for a in list(call.args) + [k.value for k in call.keywords]:
            for sub in (a.elts if isinstance(a, (ast.List, ast.Tuple)) else [a]):
                v = self._view_of(sub)
                if v is not None:
                    uses.append(v.sid)
        out_kw = [k for k in call.keywords if k.arg == "out"]
        names = [_base_name(out_kw[0].value)] if out_kw else []
        if out_kw:
            v = self._view_of(out_kw[0].value)
            if v is not None:
                written.append(v.sid)
        ev = None
        packet = getattr(torch.ops.aten, opname, None)
        func = None
        if packet is not None:
            func = getattr(packet, "default", None)
            if fn.startswith(("torch.ops.", "aten.")) and fn.count(".") >= 3:
                func = getattr(packet, fn.split(".")[-1], func)
        try:
            args = [self._meta_arg(a) for a in call.args]
            kwargs = {k.arg: self._meta_arg(k.value) for k in call.keywords if k.arg != "out"}
            out_t = [self._meta_arg(out_kw[0].value)] if out_kw else []
            with _disable_current_modes():
                out_t += [torch.empty_strided(v.size, v.stride, dtype=v.dtype, device="meta") for v in outs]
            ins = [t for t in args + list(kwargs.values()) if isinstance(t, torch.Tensor)]
            if func is not None:
                c = ops.cost(func, opname, args, kwargs, out_t, ins)
                if c is not None:
                    kind, flops, read, write, m, n, k, batch = c
                    ev = {"kind": kind, "flops": flops, "read": read, "write": write, "m": m, "n": n,
                          "k": k, "batch": batch}
                    facts = ops.device_facts(opname, args, kwargs, out_t)
                    if self.op_facts is not None and facts is None:
                        facts = self.op_facts(opname, args, self.plan.name)
                    if facts is not None:
                        ev["op"], ev["dims"] = facts[0], list(facts[1])
                    ev["dtype_of"] = (out_t or ins)[0].dtype if (out_t or ins) else None
        except (ValueError, SyntaxError, TypeError, RuntimeError, IndexError, AttributeError):
            ev = None
        if ev is None:
            ev = {"kind": "elementwise", "flops": 0.0, "read": 0, "write": 0, "m": 0, "n": 0, "k": 0,
                  "batch": 1}
        self._emit_kernel(opname, ev, uses, written, stmt, names or [s.buf for s in
                                                                   (self.plan.storages[v.sid] for v in outs)])

    def _emit_kernel(self, kname, ev, uses, written, stmt, names=()):
        module = ""
        for n in names:
            module = module or (self._module_of(n) if n else "")
        for sid in written:
            st = self.plan.storages[sid]
            if not st.kernel:
                st.kernel = kname
            module = module or st.module
        ev = dict(ev)
        ev["kernel"] = kname
        ev["module"] = module
        ev["uses"] = sorted(set(uses))
        self.plan.kernels.append(kname)
        self.plan.steps.append(("kernel", ev))

    def _return(self, value):
        elts = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value] if value is not None else []
        returned = set()
        for e in elts:
            if isinstance(e, ast.Constant) and e.value is None:
                self.plan.outputs.append(("none",))
                continue
            v = self._view_of(e)
            if v is None:
                raise PlanError("graph %s returns %s, which gpusim cannot resolve" % (self.plan.name, ast.unparse(e)))
            st = self.plan.storages[v.sid]
            returned.add(v.sid)
            if st.input is not None:
                self.plan.outputs.append(("input", st.input, None if isinstance(e, ast.Name) else v))
            else:
                self.plan.outputs.append(("storage", v))
        # Locals die at return: what is still named and not returned is freed
        # (in the order the names were bound).
        for name in list(self.env):
            value = self.env[name]
            sids = self._sids(value)
            if any(s in returned for s in sids):
                self.env.pop(name)
                continue
            self._unbind(name)


_VIEW_METHODS = {"view", "reshape", "permute", "transpose", "t", "expand", "squeeze", "unsqueeze", "as_strided",
                 "narrow", "select", "unflatten", "flatten", "[]"}


def _method_chain(expr):
    """(base name, [method, ...] innermost first) of `base[...].m1(...).m2(...)`
    ("[]" for a subscript), or None."""
    methods = []
    while True:
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            methods.append(expr.func.attr)
            expr = expr.func.value
        elif isinstance(expr, ast.Subscript):
            methods.append("[]")
            expr = expr.value
        else:
            break
    if not isinstance(expr, ast.Name) or not methods:
        return None
    return expr.id, methods[::-1]


def _base_name(expr):
    """The buffer name an argument expression reads (`bufN` of
    `reinterpret_tensor(bufN, ...)`), or ''."""
    while isinstance(expr, ast.Call) and expr.args:
        expr = expr.args[0]
    return expr.id if isinstance(expr, ast.Name) else ""


def parse_wrapper(source, graph, name=None, op_facts=None, device="cuda"):
    """The GraphPlan of an Inductor wrapper module's source (Note [Reading
    Inductor's wrapper]). `graph`: the GraphLowering that generated it (for
    the layouts of fallback kernels' results and module paths). `op_facts`:
    (op, meta args, graph name) -> (op, dims) or None, the facts of kernels
    ops.device_facts does not know (the fused SDPA kernels: sdpa.py).
    `device`: whose empty_strided_DEVICE allocates the blocks of the plan
    (cuda; cpu reads a CPU compile's wrapper, for the suite's check)."""
    tree = ast.parse(source)
    if name is None:
        m = re.search(r"^# AOT ID: \['([^']+)'\]", source, re.M)
        name = m.group(1) if m else "graph"
    b = _Builder(name, source, graph, op_facts, device)
    call = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Call) and _dotted(node.value.func) == "async_compile.triton":
            src = node.value.args[1].value if len(node.value.args) > 1 else ""
            kname = node.targets[0].id
            m = re.search(r"def %s\(([^)]*)\)" % re.escape(kname), src)
            if m:
                b.kernel_src[kname] = [p.split(":")[0].strip() for p in m.group(1).split(",") if p.strip()]
        if isinstance(node, ast.FunctionDef) and node.name == "call" and call is None:
            call = node
    if call is None:
        raise PlanError("graph %s: the wrapper has no call() function" % name)
    b.run(call.body)
    return b.plan
