"""Distributed steps: a fake process group for the recording process, and
the c10d collectives the recorder turns into trace events.

Note [Collectives under a fake process group]
`--world-size N --rank R` runs the user's step as rank R of N in this one
process. PyTorch 2.x has a process group that communicates nothing,
backend "fake" (torch/testing/_internal/distributed/fake_pg.py,
FakeProcessGroup with a FakeStore), so DDP and FSDP build as they would
under NCCL: DDP's Reducer makes its gradient buckets (bucket_cap_mb,
torch/csrc/distributed/c10d/reducer.cpp initialize_buckets) through the
caching allocator, recorded like any allocation. Their collectives reach
the dispatcher as c10d ops (torch/csrc/distributed/c10d/Ops.cpp:
c10d::allreduce_, broadcast_, allgather_, _allgather_base_,
reduce_scatter_, _reduce_scatter_base_, ...), below autograd, so the
recorder's dispatch mode sees each in program order, also those the
Reducer issues from C++ in backward. The recorder answers them itself,
without the fake group's kernels: FakeWork's future holds no value, and
DDP's comm hook needs its result (torch/csrc/distributed/c10d/comm.cpp
"expected the hook result is either a Tensor or a TensorList"). It returns
the op's in-place outputs with a completed Work
(torch._C._distributed_c10d._create_work_from_future), which is what every
rank's data would be after a broadcast in a group where all ranks hold the
same values. torch/distributed/_tools/fake_collectives.py lists the same op
set for FakeTensorMode. Each collective is a `collective` event on stream 1
(ProcessGroupNCCL runs on its own stream), waiting for the compute issued
before it (ProcessGroupNCCL syncStream), with its bytes, dtype and group
size; the compute that next reads its buffers, and the first compute after
the backward (DDP's finalize_backward waits every bucket's work), wait for
it. Every process group that ran a collective (in setup, warm-up or the
recorded step) is a `meta comm.ID RANKS` line: NCCL builds one
communicator per group (gpusim sizes its buffers, Note [NCCL buffers]).

Data the step reads back: a tensor on the meta device has none, but DDP's
bucket rebuild broadcasts its bucket order from a CPU tensor copied to the
device and back (reducer.cpp sync_bucket_indices). The recorder keeps a
CPU copy of a small tensor copied onto the device (a shadow) while only a
broadcast touches it, and answers the copy back from it.
DDP's _verify_param_shape_across_processes compares every rank's parameter
shapes through an all-gather and .item(): in a fake group every rank is
this process, so it is skipped (named in the trace's comments).

PyTorch 1.13 (Debian's python3-torch) has no fake process group, and its
c10d ops have no kernel for the meta device's autograd key (AutogradMeta:
"Could not run 'c10d::broadcast_' with arguments from the 'AutogradMeta'
backend"), so DDP cannot run on meta tensors there: refused by name.
"""

import contextlib

import torch

# op name -> (kind, where the process group is, how bytes are read)
_OPS = {
    "allreduce_": ("all_reduce", 1, "inplace"),
    "allreduce_coalesced_": ("all_reduce", 1, "inplace"),
    "broadcast_": ("broadcast", 1, "inplace"),
    "barrier": ("all_reduce", 1, "inplace"),  # ProcessGroupNCCL::barrier: a 1-element all_reduce
    "allgather_": ("all_gather", 2, "out_in"),
    "_allgather_base_": ("all_gather", 2, "out_in"),
    "allgather_into_tensor_coalesced_": ("all_gather", 2, "out_in"),
    "reduce_scatter_": ("reduce_scatter", 2, "out_in"),
    "_reduce_scatter_base_": ("reduce_scatter", 2, "out_in"),
    "reduce_scatter_tensor_coalesced_": ("reduce_scatter", 2, "out_in"),
}


def _flat(x):
    out = []
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for y in x:
            out += _flat(y)
    return out


def _nbytes(ts):
    return sum(t.numel() * t.element_size() for t in ts)


def describe(func, name, args):
    """(kind, group ranks, group key, read bytes, write bytes, tensors) of a
    c10d op, or raises ValueError naming an op gpusim does not model."""
    spec = _OPS.get(name)
    if spec is None:
        raise ValueError("c10d.%s: a collective gpusim does not model (it models all_reduce, broadcast, "
                         "all_gather and reduce_scatter)" % name)
    kind, pg_at, how = spec
    import torch.distributed as dist
    pg = dist.ProcessGroup.unbox(args[pg_at])
    group = dist.distributed_c10d._resolve_process_group(pg.group_name)
    ranks = tuple(dist.get_process_group_ranks(group))
    if how == "inplace":
        ts = _flat(args[0])
        if name == "barrier":
            ts = ts[:1]
        read = write = _nbytes(ts)
        tensors = ts
    else:
        outs, ins = _flat(args[0]), _flat(args[1])
        read, write = _nbytes(ins), _nbytes(outs)
        tensors = outs + ins
    return kind, ranks, pg.group_name, read, write, tensors


def completed(func, args):
    """The op's result: its in-place outputs and a completed Work."""
    from torch._C._distributed_c10d import _create_work_from_future
    fut = torch.futures.Future()
    fut.set_result(args[0])
    work = _create_work_from_future(fut).boxed()
    if len(func._schema.returns) == 2:
        return args[0], work
    return work


def refusal():
    """Why this PyTorch cannot record a distributed step, or None."""
    import torch.distributed as dist
    if not dist.is_available():
        return "torch %s is built without torch.distributed" % torch.__version__
    try:
        from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: F401
    except ImportError:
        return ("torch %s has no fake process group (torch.testing._internal.distributed.fake_pg, "
                "backend \"fake\": PyTorch 2.x), and its c10d collectives have no kernel for the meta "
                "device's autograd key (AutogradMeta), so DDP and FSDP cannot run on meta tensors; record "
                "a distributed step with PyTorch 2.x" % torch.__version__)
    return None


@contextlib.contextmanager
def fake_process_group(world_size, rank, notes):
    """The default process group as rank `rank` of `world_size`, backend
    "fake"; destroyed on exit."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore
    from torch.nn.parallel import distributed as ddp_mod
    if dist.is_initialized():
        raise ValueError("--world-size: a process group is initialized already; the recorder makes its own")
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world_size)
    saved = getattr(ddp_mod, "_verify_param_shape_across_processes", None)
    if saved is not None:
        def skip(*a, **k):
            msg = ("DDP's _verify_param_shape_across_processes skipped (every rank of the fake group is "
                   "this process)")
            if msg not in notes:
                notes.append(msg)
        ddp_mod._verify_param_shape_across_processes = skip
    try:
        yield
    finally:
        if saved is not None:
            ddp_mod._verify_param_shape_across_processes = saved
        dist.destroy_process_group()
