"""The recorder: a TorchDispatchMode (below autograd, so it sees forward ops,
the backward formulas autograd runs, gradient accumulation and optimizer
ops) that turns a step on the meta device into gpusim trace events.

Note [Frees from storage liveness]
A device allocation is a storage (c10::StorageImpl). Each storage the
recorder first sees as an op's result is an alloc of storage.nbytes(); the
recorder then holds only a *weak* reference to it (storage._weak_ref(), as
torch/multiprocessing/reductions.py does for shared storages), so it never
extends a lifetime. At every op boundary (entry of __torch_dispatch__, and
at the window's end) every live storage whose strong use count has dropped
to zero (UntypedStorage._expired) is a free, before the op's own allocs:
that is when PyTorch's caching allocator gets the block back (c10
StorageImpl release -> CUDACachingAllocator free). Tensors autograd saves
without a Python object (SavedVariable) keep their storage's use count up,
so they stay live exactly as long as on a GPU. Views and in-place ops
return an existing storage: no alloc. A storage whose nbytes grew
(resize_) is a free and a new alloc, as CUDA resizes reallocate. Holding
the weak reference keeps the StorageImpl's memory (not its data), so its
address (`_cdata`) identifies it until the recorder drops it.
"""

import gc
import os
import sys
import warnings

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from gpusim_torch import collectives
from gpusim_torch import fallbacks
from gpusim_torch.errors import RecordError  # also gpusim_torch.recorder.RecordError, as before
from gpusim_torch import ops
from gpusim_torch import sdpa

ops.init_dtypes(torch)

_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
# Where a stack ends: the code of an entry point that starts a recording
# from the user's program (gpusim.record adds its own). The frames of its
# callers (a notebook cell, a script) are not the step's, and are not in a
# recording made by `python -m gpusim_torch record`, whose entry is ours.
STACK_ROOTS: set = set()
MAX_FRAMES = 8

_expired = torch.UntypedStorage._expired
_free_weak_ref = torch.UntypedStorage._free_weak_ref
_current_node = getattr(torch._C, "_current_autograd_node", None)

if hasattr(torch.Tensor, "untyped_storage"):
    def _storage(t):
        return t.untyped_storage()
else:  # PyTorch 1.13: TypedStorage wraps the UntypedStorage
    def _storage(t):
        return t.storage()._storage


def _is_compiling():
    f = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    return bool(f()) if f is not None else False


class Recording:
    """What write_trace needs: events (dicts), interned frames, comments."""

    def __init__(self):
        self.name = ""
        self.comments = []
        self.meta = []      # (key, value): traces/FORMAT.md `meta` lines
        self.events = []
        self.frames = {}  # id -> (function, file, line)
        # Note [The warm-up history]: ("alloc", id, bytes) / ("free", id) of
        # what ran before the window (setup, the warm-up steps), or None.
        self.warmup = None
        self.compiled = []  # inductor_plan.GraphPlan of each compiled graph (session.py)


class _Buf:
    __slots__ = ("id", "handle", "nbytes", "name", "phase", "event", "role", "op", "uses",
                 "silent")

    def __init__(self, bid, handle, nbytes, name, phase, role=None):
        self.id = bid
        self.handle = handle
        self.nbytes = nbytes
        self.name = name
        self.phase = phase
        self.event = None  # its alloc event (a dict), once in the window
        self.role = role   # known at allocation (device workspaces); else classify/finish
        self.op = ""       # the op that allocated it
        self.uses = 0      # ops that read it since
        self.silent = False  # its block passed to another storage: no free of its own


# Note [Formulas for subclass-like tensors]
# Derivative formulas in PyTorch's torch/csrc/autograd/FunctionsManual.cpp
# take an out-of-place branch when areAnyTensorSubclassLike(...) is true:
# for meta tensors always (kTensorSubclassLike in
# aten/src/ATen/TensorSubclassLikeUtils.h holds the Meta backend bit), and
# under any dispatch mode or FakeTensorMode. On CUDA tensors the same
# formulas write in place into a fresh zeros tensor: gather_backward
# (grad.new_zeros(...).scatter_add_), index_backward (zeros.index_put_),
# take_backward (put_), masked_scatter_backward, ... So a backward op in
# _ZERO_FILL_INTO whose first argument is a zeros tensor made in backward and
# read by nothing else reuses that tensor's block, as on the GPU: no alloc,
# and the zeros tensor's death frees nothing.
_ZERO_FACTORIES = {"new_zeros", "zeros", "zeros_like", "new_full", "full", "full_like"}
_ZERO_FILL_INTO = {"scatter_add", "scatter", "index_put", "_index_put_impl", "index_add",
                   "index_copy", "masked_scatter", "put", "index_fill", "slice_scatter",
                   "select_scatter", "diagonal_scatter", "as_strided_scatter", "index_reduce",
                   "scatter_reduce"}

# Note [The warm-up history]
# The caching allocator never gives segments back on its own
# (CUDACachingAllocator.cpp: release_cached_blocks runs on an OOM retry or
# empty_cache(), not at a step's end), so what a step reserves depends on
# everything allocated before it: the model's build, the first step's
# optimizer states, the cuBLAS workspaces, the earlier steps' activations.
# Measured on an H200 (validation/h200_2026-12-04/zoo.json), a replay of the
# recorded step alone from a cold allocator was -4% to +17% off
# max_memory_reserved(); replayed after the warm-up steps' allocations it
# was within 0.5%. So record_step keeps the allocations and frees of setup()
# and the warm-up steps (sizes and order, nothing else) and writes them as
# `warmup` lines (traces/FORMAT.md 1.5); gpusim replays them through the
# allocator before the window (sim/replay Note [Warm-up history]). The
# history also marks each op whose kernel library allocates
# (`warmup compute OP`, its phase and op facts, the same as the window's
# compute events carry): the workspaces cuBLAS and cuBLASLt keep per
# (thread, stream) are made at the first one of each thread
# (CublasHandlePool.cpp), and the transient ones (reduction staging, fused
# attention and cuDNN workspaces, sort temporaries) at every op; gpusim
# places them there (sim/lower/eager/device_memory.cc, Note [Transient
# workspaces in the warm-up history]). Without the transients the first
# step's segments were decided without the 100+ MiB blocks that the
# backward's reductions and attention map and free, and the replay of a
# checkpointed ViT reserved 20% more than the H200 did.


class Recorder(TorchDispatchMode):
    """Records device allocations, frees and ops of the code run inside it.

    device_type: the device the step's tensors live on while recording
    ("meta"). frames: capture Python frames for each event. bounds: {op name:
    int} sizes for data-dependent results (fallbacks.py)."""

    def __init__(self, device_type="meta", frames=True, bounds=None):
        super().__init__()
        self.device_type = device_type
        self.frames = frames
        self.bounds = dict(bounds or {})
        self.live = {}          # storage address -> _Buf
        self.next_id = 0
        self.phase = "forward"
        self.module_stack = []
        self.module_names = {}  # id(module) -> qualified name
        self.in_window = False
        self.rec = Recording()
        self._frame_ids = {}
        self.notes = {}         # message -> count (fallbacks, item() calls)
        self.window_start = []  # bufs live when the window began
        self.warmup_steps = 0   # steps run before the recorded one (record_step sets it)
        # Note [Collectives under a fake process group] (collectives.py).
        self.world = None       # (world_size, rank) of a distributed recording
        self.groups = {}        # group name -> (comm id, ranks), in first-use order
        self.last_compute = -1  # event index of the last compute event
        self.pending = {}       # buffer id -> collective event index not yet waited for
        self.wait_all = False   # the backward ended: the next compute waits every collective
        self.shadows = {}       # storage address -> CPU copy of a small tensor's data
        # Note [The warm-up history]: None (not kept), or the allocations and
        # frees before the window, in order; history_head: the tensors made
        # before recording began (adopted), which came first.
        self.history = None
        self.history_head = []
        self.sdpa = None        # sdpa.Dispatcher (meta mode): the fused SDPA ops' facts
        # Note [Host work per kernel]: what the host did since the last
        # compute event (aten ops dispatched outside autograd's engine,
        # autograd nodes the engine ran, Python module calls), written on the
        # next compute event as host=D,N,M (traces/FORMAT.md 1.6).
        self.host_work = [0, 0, 0]
        self.last_node = None

    @classmethod
    def ignore_compile_internals(cls):
        """Off while torch.compile compiles, on while the compiled code runs
        (torch/utils/_python_dispatch.py): Dynamo then compiles under the
        recorder instead of falling back to eager (Note [torch.compile on
        the CPU], inductor_cpu.py)."""
        return True

    # -- op boundary ---------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.live:
            self._sweep()
        if self.in_window:
            self._count_host_work()
        name = ops.op_name(func)
        if getattr(func, "namespace", "") == "c10d":
            return self._collective(func, name, args)
        if self.shadows:
            out = self._shadowed(func, name, args, kwargs)
            if out is not None:
                return out
        try:
            out = func(*args, **kwargs)
        except (NotImplementedError, RuntimeError) as e:
            out = fallbacks.run(self, func, name, args, kwargs, e)
        if name == "copy_" and len(args) >= 2 and self._relevant(args[0]) and isinstance(args[1], torch.Tensor) \
                and args[1].device.type == "cpu" and args[0].is_contiguous() and args[1].numel() <= 65536 \
                and args[0].shape == args[1].shape:
            self.shadows[_storage(args[0])._cdata] = args[1].detach().clone()
        self._after(func, name, args, kwargs, out)
        return out

    def _count_host_work(self):
        """Note [Host work per kernel]: an op the engine runs counts its node
        once (the node's ops follow one another); any other op is one
        dispatch from Python (the binding, the dispatcher, autograd's graph
        recording), and so is an op of a module's forward the engine re-runs
        (the module's pre-hook pushed module_stack)."""
        if _current_node is None:
            # torch 1.13 has no _current_autograd_node: a backward op (the
            # step's backward phase, outside a re-run forward) stands for
            # its node.
            self.host_work[1 if self.phase == "backward" and not self.module_stack else 0] += 1
            return
        node = _current_node()
        if node is None or self.module_stack:
            # Outside the engine, or inside it re-running a module's Python
            # forward (activation checkpointing's recompute, called from a
            # node's saved-tensor unpack, torch/utils/checkpoint.py): each
            # op is dispatched from Python.
            self.host_work[0] += 1
            self.last_node = None
        elif node is not self.last_node:
            self.host_work[1] += 1
            self.last_node = node

    def _take_host_work(self, ev):
        ev["host"] = list(self.host_work)
        self.host_work = [0, 0, 0]

    # -- collectives (Note [Collectives under a fake process group]) ---------
    def _collective(self, func, name, args):
        try:
            kind, ranks, gname, read, write, tensors = collectives.describe(func, name, args)
        except ValueError as e:
            raise RecordError(str(e))
        if gname not in self.groups:
            self.groups[gname] = (len(self.groups), ranks)
        for t in tensors:  # a broadcast leaves what every rank holds; the rest change data
            if kind != "broadcast":
                self.shadows.pop(_storage(t)._cdata, None)
        if self.in_window:
            uses = sorted({self.live[_storage(t)._cdata].id for t in tensors
                           if self._relevant(t) and _storage(t)._cdata in self.live})
            ev = {"type": "collective", "name": self._label(name), "kind": kind, "stream": 1,
                  "phase": self._phase(), "read": read, "write": write, "group": len(ranks),
                  "uses": uses}
            if self.last_compute >= 0:
                ev["after"] = [self.last_compute]
            dt = ops.DTYPE_NAMES.get(tensors[0].dtype) if tensors else None
            if dt is not None:
                ev["dtype"] = dt
            if kind in ("all_reduce", "reduce_scatter"):
                # What DDP and FSDP reduce are gradients (DDP's buckets,
                # reducer.cpp initialize_buckets), unless already classified.
                for t in tensors:
                    b = self.live.get(_storage(t)._cdata) if self._relevant(t) else None
                    if b is not None and b.event is not None and b.event["role"] is None:
                        b.event["role"] = "gradient"
            at = len(self.rec.events)
            self._emit(ev)
            for u in uses:
                self.pending[u] = at
        return collectives.completed(func, args)

    def _shadowed(self, func, name, args, kwargs):
        """A copy back to the CPU of a shadowed tensor, from its shadow;
        a write into a shadowed storage drops the shadow. None: not handled."""
        if name == "copy_" and len(args) >= 2 and isinstance(args[0], torch.Tensor) \
                and args[0].device.type == "cpu" and self._relevant(args[1]):
            sh = self.shadows.get(_storage(args[1])._cdata)
            if sh is not None and sh.shape == args[1].shape:
                from torch.utils._python_dispatch import _disable_current_modes
                with _disable_current_modes():
                    args[0].copy_(sh)
                return args[0]
        if func._schema.is_mutable:
            for t in tree_flatten((args, kwargs))[0]:
                if isinstance(t, torch.Tensor) and self._relevant(t):
                    self.shadows.pop(_storage(t)._cdata, None)
        return None

    def _relevant(self, t):
        return isinstance(t, torch.Tensor) and t.device.type == self.device_type and not t.is_sparse

    def _after(self, func, name, args, kwargs, out):
        host = sdpa.HOST_RESULTS.get(name)
        if host and isinstance(out, (tuple, list)):
            # Results the CUDA kernel keeps on the host: no device block.
            skip = {id(out[i]) for i in host if i < len(out)}
            outs = [t for t in tree_flatten(out)[0] if self._relevant(t) and id(t) not in skip]
        else:
            outs = [t for t in tree_flatten(out)[0] if self._relevant(t)]
        ins = [t for t in tree_flatten((args, kwargs))[0] if self._relevant(t)]
        if not outs and not ins:
            return
        phase = self._phase()
        label = None
        uses = []
        for t in ins:
            b = self.live.get(_storage(t)._cdata)
            if b is not None:
                b.uses += 1
        into = None
        zero_filled = False
        if phase == "backward" and name in _ZERO_FILL_INTO and outs and ins:
            b0 = self.live.get(_storage(ins[0])._cdata)
            if (b0 is not None and b0.op in _ZERO_FACTORIES and b0.uses == 1
                    and outs[0].shape == ins[0].shape and outs[0].dtype == ins[0].dtype):
                into = b0
        for t in outs:
            st = _storage(t)
            key = st._cdata
            buf = self.live.get(key)
            nbytes = st.nbytes()
            if buf is None and into is not None and nbytes == into.nbytes:
                # Note [Formulas for subclass-like tensors]: the block moves.
                moved = _Buf(into.id, st._weak_ref(), nbytes, into.name, into.phase, into.role)
                moved.event = into.event
                moved.op = name
                into.silent = True
                self.live[key] = moved
                uses.append(moved.id)
                into = None
                zero_filled = True
                continue
            if buf is None:
                if nbytes == 0:
                    continue  # the caching allocator hands out no block for 0 bytes
                label = label or self._label(name)
                buf = _Buf(self.next_id, st._weak_ref(), nbytes, label, phase)
                buf.op = name
                self.next_id += 1
                self.live[key] = buf
                self._emit_alloc(buf)
            elif nbytes > buf.nbytes:  # resize_: a new block, the old one freed
                self._emit({"type": "free", "buffer": buf.id, "phase": phase})
                label = label or self._label(name)
                buf.id = self.next_id
                self.next_id += 1
                buf.nbytes = nbytes
                buf.name = label
                buf.phase = phase
                self._emit_alloc(buf)
            uses.append(buf.id)
        if not self.in_window:
            if self.history is not None:
                # Where the device's libraries allocate around an op: the
                # kept cuBLAS(Lt) workspaces and the transient ones
                # (Note [The warm-up history]).
                facts = self._device_facts(name, args, kwargs, outs, zero_filled)
                if facts is not None:
                    self.history.append(("compute", facts[0], self._phase(), list(facts[1])))
            return
        c = ops.cost(func, name, args, kwargs, outs, ins)
        if c is None:
            return
        for t in ins:
            st = _storage(t)
            buf = self.live.get(st._cdata)
            if buf is not None:
                uses.append(buf.id)
        kind, flops, read, write, m, n, k, batch = c
        ev = {"type": "compute", "name": label or self._label(name), "kind": kind,
              "phase": phase, "flops": flops, "read": read, "write": write,
              "m": m, "n": n, "k": k, "batch": batch, "uses": sorted(set(uses))}
        dt = ops.DTYPE_NAMES.get((outs or ins)[0].dtype)
        if dt is not None:
            ev["dtype"] = dt
        self._order_compute(ev)
        self._take_host_work(ev)
        facts = self._device_facts(name, args, kwargs, outs, zero_filled)
        if facts is None and kind == "elementwise":
            # Note [ATen elementwise loops] (ops.py): the slow loops only; a
            # vectorised op is timed as before, with no facts.
            loop = ops.elementwise_loop(name, ins, outs)
            if loop:
                facts = (name, [loop])
        if facts is not None:
            ev["op"], ev["dims"] = facts
        self._emit(ev)

    def _device_facts(self, name, args, kwargs, outs, zero_filled):
        """(op, dims) of an op whose kernel library adds device memory
        (ops.device_facts; a fused SDPA op's from the dispatcher), else None."""
        facts = ops.device_facts(name, args, kwargs, outs)
        if name in sdpa.FUSED_OPS and self.sdpa is not None:
            d = self.sdpa.facts_for(name, args)
            facts = (name, d) if d is not None else None
        if facts is not None and zero_filled and facts[0] == "index_put":
            # index_backward on CUDA tensors: _index_put_impl_(zeros,
            # indices, grad, accumulate=true, unsafe=true), no range check
            # (FunctionsManual.cpp index_backward).
            dims = list(facts[1])
            dims[6] = 1
            facts = ("_index_put_impl_", dims)
        return facts

    def _order_compute(self, ev):
        """A compute event waits for the collectives whose buffers it uses
        (or all of them, first after the backward); it becomes the last
        compute (Note [Collectives under a fake process group])."""
        if self.pending:
            waits = set(self.pending.values()) if self.wait_all else \
                {self.pending[u] for u in ev["uses"] if u in self.pending}
            if waits:
                ev["after"] = sorted(waits)
                self.pending = {b: i for b, i in self.pending.items() if i not in waits}
        self.wait_all = False
        self.last_compute = len(self.rec.events)

    # -- compiled graphs (Note [Reading Inductor's wrapper], inductor_plan.py)
    def run_compiled(self, plan, args):
        """Runs one compiled graph's plan (an inductor_plan.GraphPlan) in
        place of the module Inductor generated: its allocations, kernels
        and frees in the wrapper's order, the inputs it drops (freed when
        nothing else holds them), and meta tensors for what it returns,
        whose blocks are then tracked like any other storage."""
        from torch.utils._python_dispatch import _disable_current_modes
        inputs = list(args)
        args.clear()
        if self.live:
            self._sweep()
        phase = self._phase()
        in_keys = [_storage(t)._cdata if self._relevant(t) else None for t in inputs]
        bufs = {}

        def buf_id(sid):
            st = plan.storages[sid]
            if st.input is not None:
                b = self.live.get(in_keys[st.input]) if in_keys[st.input] is not None else None
            else:
                b = bufs.get(sid)
            return b.id if b is not None else None
        if self.in_window:
            self.rec.events.append({"type": "marker", "name": "compiled:" + plan.name, "phase": phase})
        for step in plan.steps:
            kind = step[0]
            if kind == "alloc":
                st = plan.storages[step[1]]
                if st.nbytes == 0:
                    continue
                name = "%s%s/%s%s" % (st.module + ":" if st.module else "", plan.name, st.buf,
                                      "/" + st.kernel if st.kernel else "")
                b = _Buf(self.next_id, None, st.nbytes, name, phase)
                b.op = st.kernel or "inductor"
                self.next_id += 1
                bufs[st.sid] = b
                self._emit_alloc(b)
            elif kind == "free":
                b = bufs.pop(step[1], None)
                if b is not None:
                    self._emit({"type": "free", "buffer": b.id, "phase": phase})
            elif kind == "drop":
                inputs[step[1]] = None
                self._sweep()
            else:
                k = step[1]
                if not self.in_window:
                    if self.history is not None and k.get("op"):
                        self.history.append(("compute", k["op"], phase, list(k.get("dims", []))))
                    continue
                uses = sorted({i for i in (buf_id(sid) for sid in k["uses"]) if i is not None})
                ev = {"type": "compute", "name": "%s%s/%s" % (k["module"] + ":" if k["module"] else "",
                                                                plan.name, k["kernel"]),
                      "kind": k["kind"], "phase": phase, "flops": k["flops"], "read": k["read"],
                      "write": k["write"], "m": k["m"], "n": k["n"], "k": k["k"], "batch": k["batch"],
                      "uses": uses}
                dt = ops.DTYPE_NAMES.get(k.get("dtype_of"))
                if dt is not None:
                    ev["dtype"] = dt
                self._order_compute(ev)
                if k.get("op"):
                    ev["op"], ev["dims"] = k["op"], list(k.get("dims", []))
                self._emit(ev)
        out = []
        made = {}
        with _disable_current_modes():
            for o in plan.outputs:
                if o[0] == "none":
                    out.append(None)
                elif o[0] == "input":
                    t = inputs[o[1]]
                    v = o[2]
                    out.append(t if v is None else t.as_strided(v.size, v.stride, v.offset))
                else:
                    v = o[1]
                    base = made.get(v.sid)
                    if base is None:
                        base = torch.empty((plan.storages[v.sid].nbytes,), dtype=torch.uint8,
                                           device=self.device_type)
                        made[v.sid] = base
                    t = torch.empty((0,), dtype=v.dtype, device=self.device_type)
                    t.set_(base.untyped_storage(), v.offset, v.size, v.stride)
                    out.append(t)
        for sid, base in made.items():
            b = bufs.pop(sid, None)
            if b is None:
                continue
            st = base.untyped_storage()
            b.handle = st._weak_ref()
            self.live[st._cdata] = b
        if self.in_window:
            self.rec.events.append({"type": "marker", "name": "compiled_end:" + plan.name, "phase": phase})
        return out

    def _sweep(self):
        dead = [(b.id, key) for key, b in self.live.items() if _expired(b.handle)]
        if not dead:
            return
        # Newest first: within one boundary, temporaries made later die
        # first (a callee's locals before the caller's), the order the
        # recorded CS336 snapshot shows.
        dead.sort(reverse=True)
        phase = self._phase()
        for bid, key in dead:
            b = self.live.pop(key)
            self.shadows.pop(key, None)
            _free_weak_ref(b.handle)
            if b.silent:
                continue
            self._emit({"type": "free", "buffer": bid, "phase": phase})

    # -- events --------------------------------------------------------------
    def _emit(self, ev):
        if not self.in_window and self.history is not None and ev["type"] == "free":
            self.history.append(("free", ev["buffer"]))
        if self.in_window:
            if self.frames and "stack" not in ev:
                ev["stack"] = self._stack()
            self.rec.events.append(ev)

    def _emit_alloc(self, buf):
        if not self.in_window:
            if self.history is not None:
                self.history.append(("alloc", buf.id, buf.nbytes))
            return
        ev = {"type": "alloc", "buffer": buf.id, "size": buf.nbytes, "role": buf.role,
              "name": buf.name, "phase": buf.phase}
        buf.event = ev
        self._emit(ev)

    def _phase(self):
        if self.phase != "backward" and _current_node is not None and _current_node() is not None:
            return "backward"
        return self.phase

    def set_phase(self, phase):
        if phase != self.phase:
            if self.phase == "backward" and self.pending:
                self.wait_all = True  # DDP's finalize_backward waits for every bucket
            self.phase = phase
            if self.in_window:
                self.rec.events.append({"type": "marker", "name": phase, "phase": phase})

    def _module_path(self):
        if _current_node is not None:
            node = _current_node()
            if node is not None:
                return node.metadata.get("gpusim_module", "")
        return self.module_stack[-1] if self.module_stack else ""

    def _label(self, opname):
        path = self._module_path()
        return path + ":" + opname if path else opname

    def _stack(self):
        out = []
        f = sys._getframe(2)
        while f is not None and len(out) < MAX_FRAMES:
            code = f.f_code
            if code in STACK_ROOTS:
                break
            fn = code.co_filename
            if not (fn.startswith(_TORCH_DIR) or fn.startswith(_OWN_DIR) or fn.startswith("<frozen")):
                key = (code.co_name, fn, f.f_lineno)
                fid = self._frame_ids.get(key)
                if fid is None:
                    fid = len(self._frame_ids)
                    self._frame_ids[key] = fid
                    self.rec.frames[fid] = key
                out.append(fid)
            f = f.f_back
        return out

    def adopt(self, t):
        """Tracks `t`'s storage, allocated before recording began (start state)."""
        st = _storage(t)
        key = st._cdata
        if key in self.live or st.nbytes() == 0:
            return
        self.live[key] = _Buf(self.next_id, st._weak_ref(), st.nbytes(), "", "other")
        if self.history is not None and not self.in_window:
            self.history_head.append(("alloc", self.next_id, st.nbytes()))
        self.next_id += 1

    # -- the window ----------------------------------------------------------
    def begin_window(self):
        """Starts recording events; what is live now is the start state, one
        alloc each (their roles filled in by finish)."""
        gc.collect()
        self._sweep()
        if self.history is not None:
            self.rec.warmup = self.history_head + self.history
            self.history = None
        self.in_window = True
        self.rec.events.append({"type": "marker", "name": "start_state", "phase": "other"})
        for b in sorted(self.live.values(), key=lambda b: b.id):
            self._emit_alloc(b)
            b.event["phase"] = "other"
            b.event["stack"] = []
            self.window_start.append(b)
        self.rec.events.append({"type": "marker", "name": "step", "phase": self.phase})

    def end_window(self):
        self._sweep()
        self.in_window = False

    def classify(self, roles):
        """roles: {storage address: (role, name)} for tensors whose role is
        known (parameters, gradients, optimizer state, the batch), taken
        while they are live. Fills those bufs' alloc events."""
        for key, (role, name) in roles.items():
            b = self.live.get(key)
            if b is not None and b.event is not None:
                b.event["role"] = role
                b.event["name"] = name

    def finish(self, name, comments):
        """The recording, with default roles for allocs no one classified:
        forward allocations are activations, the rest temporaries."""
        for ev in self.rec.events:
            if ev["type"] == "alloc" and ev["role"] is None:
                ev["role"] = "activation" if ev["phase"] == "forward" else "temporary"
        self.rec.name = name
        self.rec.meta = recording_meta(self.device_type, self.warmup_steps)
        if self.world is None and self.groups:
            # Collectives under a process group the caller made (the
            # gpusim_torch.record block): its world.
            import torch.distributed as dist
            if dist.is_initialized():
                self.world = (dist.get_world_size(), dist.get_rank())
        if self.world is not None:
            self.rec.meta += [("world_size", str(self.world[0])), ("rank", str(self.world[1]))]
            for gname, (cid, ranks) in sorted(self.groups.items(), key=lambda kv: kv[1][0]):
                self.rec.meta.append(("comm.%d" % cid, ",".join(str(r) for r in ranks)))
            for env in ("NCCL_BUFFSIZE", "NCCL_LL_BUFFSIZE", "NCCL_LL128_BUFFSIZE", "NCCL_MIN_NCHANNELS",
                        "NCCL_MAX_NCHANNELS"):
                if os.environ.get(env):
                    self.rec.meta.append((env, os.environ[env]))
        self.rec.comments = list(comments) + [
            "note: %s (x%d)" % (msg, n) for msg, n in sorted(self.notes.items())]
        return self.rec

    def release(self):
        """Drops the weak references (call once, after the last window)."""
        for b in self.live.values():
            _free_weak_ref(b.handle)
        self.live.clear()

    # -- module paths --------------------------------------------------------
    def install_module_hooks(self, model):
        from torch.nn.modules import module as mm
        for qname, mod in model.named_modules():
            self.module_names[id(mod)] = qname or type(mod).__name__
        pre = mm.register_module_forward_pre_hook(self._pre_hook)
        post = mm.register_module_forward_hook(self._post_hook)
        return [pre, post]

    def _pre_hook(self, module, inputs):
        if _is_compiling():
            return  # traced by Dynamo: no side effect in the compiled graph
        self.module_stack.append(self.module_names.get(id(module), type(module).__name__))
        if self.in_window:
            self.host_work[2] += 1

    def _post_hook(self, module, inputs, output):
        if _is_compiling():
            return None
        path = self.module_stack.pop() if self.module_stack else ""
        if _current_node is None:
            return None  # 1.13: backward events carry op names only
        # Tag the autograd nodes this module created, so that backward ops
        # (run by the engine) name it too: inner modules' hooks fire first,
        # so an outer module stops at nodes already tagged.
        todo = [t.grad_fn for t in tree_flatten(output)[0]
                if isinstance(t, torch.Tensor) and t.grad_fn is not None]
        while todo:
            node = todo.pop()
            if node is None:
                continue
            md = node.metadata
            if "gpusim_module" in md:
                continue
            md["gpusim_module"] = path
            for nxt, _ in node.next_functions:
                if nxt is not None and type(nxt).__name__ != "AccumulateGrad":
                    todo.append(nxt)
        return None


def recording_meta(device_type, warmup_steps):
    """The `meta` lines gpusim's device model reads (traces/FORMAT.md, *Op
    facts*): the framework and its version and the library settings of this
    process that change what the CUDA backend allocates."""
    cudnn = torch.backends.cudnn
    det = getattr(torch, "are_deterministic_algorithms_enabled", lambda: False)()
    meta = [("framework", "pytorch"),
            ("torch_version", torch.__version__),
            ("torch_cuda", str(torch.version.cuda or "none")),
            ("recorded_on", "fake_cuda" if device_type == "cuda" else "meta"),
            ("warmup_steps", str(warmup_steps)),
            ("cudnn_benchmark", "1" if cudnn.benchmark else "0"),
            ("cudnn_deterministic", "1" if cudnn.deterministic else "0"),
            ("deterministic_algorithms", "1" if det else "0")]
    for env in ("CUBLAS_WORKSPACE_CONFIG", "CUBLASLT_WORKSPACE_SIZE", "TORCH_CUBLASLT_UNIFIED_WORKSPACE"):
        if os.environ.get(env):
            meta.append((env, os.environ[env]))
    return meta


def storage_key(t):
    return _storage(t)._cdata


def roles_of(model=None, optimizer=None, batch=None):
    """{storage address: (role, name)} for the tensors whose role the
    objects tell: parameters and buffers, their .grad, optimizer state,
    the batch."""
    roles = {}
    names = {}
    if model is not None:
        for n, p in model.named_parameters():
            names[id(p)] = n
            roles[storage_key(p)] = ("parameter", n)
            if p.grad is not None:
                roles[storage_key(p.grad)] = ("gradient", n + ".grad")
        for n, b in model.named_buffers():
            roles[storage_key(b)] = ("parameter", n)
    if optimizer is not None:
        for gi, group in enumerate(optimizer.param_groups):
            for pi, p in enumerate(group["params"]):
                pn = names.get(id(p), "group%d.param%d" % (gi, pi))
                if storage_key(p) not in roles:
                    roles[storage_key(p)] = ("parameter", pn)
                if p.grad is not None and storage_key(p.grad) not in roles:
                    roles[storage_key(p.grad)] = ("gradient", pn + ".grad")
                for k, v in sorted(optimizer.state.get(p, {}).items()):
                    if isinstance(v, torch.Tensor) and v.device.type != "cpu":
                        roles[storage_key(v)] = ("optimizer_state", pn + "." + str(k))
    if batch is not None:
        flat, _ = tree_flatten(batch)
        for i, t in enumerate(flat):
            if isinstance(t, torch.Tensor) and t.device.type != "cpu":
                roles.setdefault(storage_key(t), ("input_batch", "batch.%d" % i))
    return roles
