"""Runs a user's training step under the recorder and writes the trace:
the CLI (`python3 -m gpusim_torch record`) and the Python API
(gpusim_torch.record_step, gpusim_torch.record) both come here."""

import contextlib
import gc
import importlib
import inspect
import os
import signal
import sys
import sysconfig
import traceback

import torch

from gpusim_torch import autocast_emul
from gpusim_torch import collectives
from gpusim_torch.recorder import Recorder, RecordError, roles_of, storage_key, _storage
from gpusim_torch.trace_writer import write_trace

DEVICE_TYPES = ("cuda",)
AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}


def probe_fake_cuda():
    """(forward, backward, reason): whether FakeTensorMode with a fake CUDA
    device can run a forward, and a backward, in this process. It needs a
    CUDA build; the backward also needs a CUDA driver, because the autograd
    engine's CUDA device thread asks the driver for the device's primary
    context (c10/cuda hasPrimaryContext: "hasPrimaryContext expects a valid
    device index" without one)."""
    if not (hasattr(torch.backends, "cuda") and getattr(torch.backends.cuda, "is_built", lambda: False)()):
        return False, False, "torch %s is not a CUDA build" % torch.__version__
    try:
        from torch._subclasses.fake_tensor import FakeTensorMode
    except ImportError:
        return False, False, "torch %s has no FakeTensorMode" % torch.__version__
    try:
        with FakeTensorMode():
            a = torch.empty(2, 2, device="cuda", requires_grad=True)
            b = (a * a).sum()
    except Exception as e:  # the probe's only purpose is to find out
        return False, False, "fake CUDA tensors fail here: %s" % str(e).splitlines()[0]
    try:
        with FakeTensorMode():
            a = torch.empty(2, 2, device="cuda", requires_grad=True)
            (a * a).sum().backward()
    except Exception as e:
        return True, False, "fake CUDA backward fails here: %s" % str(e).splitlines()[0]
    return True, True, ""


def choose_mode(mode):
    """(mode, why, backward_ok) for `mode` in auto|meta|fake. auto takes fake
    only where a fake CUDA backward works; fake needs a fake CUDA forward
    (a step without backward records; a backward fails by name)."""
    if mode not in ("auto", "meta", "fake"):
        raise RecordError("--mode: expected auto, meta or fake, got '%s'" % mode)
    if mode == "meta":
        return "meta", "asked for", True
    fwd, bwd, why = probe_fake_cuda()
    if mode == "fake":
        if not fwd:
            raise RecordError("--mode fake: " + why)
        return "fake", "asked for" + ("" if bwd else "; " + why), bwd
    if bwd:
        return "fake", "CUDA build with a working fake CUDA device", True
    return "meta", why, True


def _cuda_optimizer_defaults(optimizer, notes):
    """On CUDA tensors PyTorch >= 2.0 picks the foreach implementation when
    a param group leaves foreach=None (torch/optim/optimizer.py
    _default_to_fused_or_foreach); on meta tensors it would not. Give the
    group what the GPU run would use. 1.13 defaults to the single-tensor
    loop on every device (torch/optim/adamw.py adamw: foreach None -> False),
    so nothing changes there."""
    from torch.optim import optimizer as optmod
    devices = getattr(optmod, "_get_foreach_kernels_supported_devices", None)
    if optimizer is None or devices is None or "cuda" not in devices():
        return
    for i, g in enumerate(optimizer.param_groups):
        if "foreach" in g and g["foreach"] is None and not g.get("differentiable", False) \
                and not g.get("fused", False):
            g["foreach"] = True
            notes.append("optimizer param group %d: foreach=None -> True, as on CUDA tensors" % i)


@contextlib.contextmanager
def _cuda_reported_available():
    """torch.autocast("cuda") disables itself where torch.cuda.is_available()
    is False (torch/amp/autocast_mode.py: "CUDA is not available.
    Disabling"), and its bf16 check asks the device. Under FakeTensorMode the
    step runs as on a CUDA device, so report one while recording; then the
    CUDA autocast kernels of this PyTorch (AutocastCUDA) apply themselves."""
    patched = {"is_available": lambda: True, "is_bf16_supported": lambda *a, **k: True}
    saved = {k: getattr(torch.cuda, k) for k in patched if hasattr(torch.cuda, k)}
    for k, v in patched.items():
        setattr(torch.cuda, k, v)
    try:
        yield
    finally:
        for k in patched:
            if k in saved:
                setattr(torch.cuda, k, saved[k])
            else:
                delattr(torch.cuda, k)


@contextlib.contextmanager
def _cuda_semantics_on_meta():
    """What differs between moving a module to CUDA and moving it to meta,
    and what CUDA allows that meta does not, made as on CUDA while recording
    in meta mode.

    - Tied parameters stay tied. nn.Module._apply swaps a CPU parameter's
      data in place when the new tensor's type is compatible
      (torch._has_compatible_shallow_copy_type: CPU -> CUDA is), so a
      Parameter shared by two modules (GPT-2's wte and lm_head) stays one;
      CPU -> meta is not compatible and each module gets its own new
      Parameter, doubling the tied weight silently (torch/nn/modules/
      module.py Module._apply, compute_should_use_set_data). The patched
      _apply re-ties what was one Parameter before the move.
    - fused=True optimizers: torch/optim/optimizer.py
      _device_dtype_check_for_fused accepts the device types of
      _get_fused_kernels_supported_devices, which has "cuda" and not "meta";
      the fused kernels (_fused_adam_, _fused_adamw_, _fused_sgd_) have meta
      kernels, in place, allocating nothing, as on CUDA (measured:
      validation/h200_2026-12-04/probes.json adamw_fused_second_step).
    - GradScaler("cuda") is enabled. Its constructor disables itself, with
      only a warning, where torch.cuda.amp.common.amp_definitely_not_available()
      (no CUDA device, no torch_xla: torch/amp/grad_scaler.py
      GradScaler.__init__; 1.13: torch/cuda/amp/grad_scaler.py, the name
      imported from .common). On a GPU it is enabled: the scale and growth
      tracker (0-dim fp32/int32, made lazily by the first scale()), the
      scaled loss, unscale_'s fp64 reciprocal and found_inf, and the
      in-place _amp_foreach_non_finite_check_and_unscale_ /
      _amp_update_scale_ kernels all run, on meta as on CUDA.
    - foreach=None picks the foreach kernels, as on CUDA tensors:
      torch/utils/_foreach_utils.py _device_has_foreach_support asks
      _get_foreach_kernels_supported_devices(), which has "cuda" and not
      "meta", so clip_grad_norm_ (torch/nn/utils/clip_grad.py) took one
      linalg_vector_norm per gradient on meta where CUDA runs one
      _foreach_norm over them all."""
    import threading
    import torch.nn as nn
    from torch.optim import optimizer as optmod
    orig_apply = nn.Module._apply
    tls = threading.local()

    def _apply(self, fn, *a, **k):
        if getattr(tls, "inside", False):
            return orig_apply(self, fn, *a, **k)
        tls.inside = True
        try:
            slots = {}
            for mod in self.modules():
                for key, p in mod._parameters.items():
                    if p is not None:
                        slots.setdefault(id(p), []).append((mod, key))
            out = orig_apply(self, fn, *a, **k)
            for places in slots.values():
                if len(places) > 1:
                    first = places[0][0]._parameters[places[0][1]]
                    for mod, key in places[1:]:
                        mod._parameters[key] = first
            return out
        finally:
            tls.inside = False

    orig_fused = getattr(optmod, "_get_fused_kernels_supported_devices", None)
    fe = sys.modules.get("torch.utils._foreach_utils")
    orig_foreach = getattr(fe, "_get_foreach_kernels_supported_devices", None) if fe is not None else None
    if orig_foreach is not None:
        fe._get_foreach_kernels_supported_devices = lambda: list(orig_foreach()) + ["meta"]
    amp_sites = []
    for modname in ("torch.cuda.amp.common", "torch.cuda.amp.grad_scaler", "torch.amp.grad_scaler"):
        mod = sys.modules.get(modname)
        if mod is None:
            try:
                mod = importlib.import_module(modname)
            except ImportError:
                continue
        if hasattr(mod, "amp_definitely_not_available"):
            amp_sites.append((mod, mod.amp_definitely_not_available))
            mod.amp_definitely_not_available = lambda: False
    nn.Module._apply = _apply
    if orig_fused is not None:
        optmod._get_fused_kernels_supported_devices = lambda: list(orig_fused()) + ["meta"]
    try:
        yield
    finally:
        nn.Module._apply = orig_apply
        for mod, f in amp_sites:
            mod.amp_definitely_not_available = f
        if orig_foreach is not None:
            fe._get_foreach_kernels_supported_devices = orig_foreach
        if orig_fused is not None:
            optmod._get_fused_kernels_supported_devices = orig_fused


@contextlib.contextmanager
def _patched_phases(rec, optimizer):
    """Phase markers for code the recorder does not drive: backward() and
    autograd.grad run as 'backward', optimizer step/zero_grad as 'optimizer'."""
    orig_backward = torch.autograd.backward
    orig_grad = torch.autograd.grad

    def wrap(fn, phase):
        def inner(*a, **k):
            if phase == "backward" and getattr(rec, "backward_refusal", None):
                raise RecordError(rec.backward_refusal)
            prev = rec.phase
            rec.set_phase(phase)
            try:
                return fn(*a, **k)
            finally:
                rec.set_phase(prev)
        return inner

    torch.autograd.backward = wrap(orig_backward, "backward")
    torch.autograd.grad = wrap(orig_grad, "backward")
    patched = []
    if optimizer is not None:
        for attr in ("step", "zero_grad"):
            patched.append(attr)
            setattr(optimizer, attr, wrap(getattr(optimizer, attr), "optimizer"))
    try:
        yield
    finally:
        torch.autograd.backward = orig_backward
        torch.autograd.grad = orig_grad
        for attr in patched:
            delattr(optimizer, attr)


# Note [torch.compile refused by name]
# In meta mode a torch.compile'd module or function is recorded as Inductor
# plans it for CUDA (Note [torch.compile on the CPU], inductor_cpu.py). Under
# --mode fake the step's tensors are fake CUDA tensors, which Dynamo would
# re-fake and AOTAutograd could not trace a backward of without a driver;
# there each way in is refused by name, with where: torch.compile (and so
# nn.Module.compile, which calls it) and torch._dynamo.optimize while the
# step file loads, setup() runs and the steps run; and objects compiled
# before that (an OptimizedModule, a module whose _compiled_call_impl is
# set, a function dynamo wrapped, which carries _torchdynamo_orig_callable:
# torch/_dynamo/eval_frame.py).
COMPILE_REFUSAL = ("torch.compile is recorded in meta mode only (--mode meta, or auto where the fake CUDA "
                   "backward does not run): under --mode fake, AOTAutograd cannot trace the compiled "
                   "region's backward without a CUDA driver. Record with --mode meta")


def _user_site(tb=None, stack=None):
    """'FILE:LINE in FUNC' of the innermost frame of `tb` (or of the
    current stack) in the user's code: not in torch, not in gpusim_torch,
    not in Python's standard library; '' when there is none."""
    inside = tuple(os.path.join(os.path.realpath(d), "") for d in (
        os.path.dirname(torch.__file__), os.path.dirname(os.path.abspath(__file__)),
        sysconfig.get_paths()["stdlib"]))
    frames = traceback.extract_tb(tb) if tb is not None else (stack or traceback.extract_stack())
    site = ""
    for fs in frames:
        if fs.filename.startswith("<") or os.path.realpath(fs.filename).startswith(inside):
            continue
        site = "%s:%d in %s" % (fs.filename, fs.lineno, fs.name)
    return site


def _def_site(fn):
    """'FILE:LINE' where `fn` (or what it wraps) is defined, or ''."""
    fn = getattr(fn, "__wrapped__", fn)
    try:
        return "%s:%d" % (inspect.getsourcefile(fn), fn.__code__.co_firstlineno)
    except (TypeError, AttributeError):
        return ""


def _call_user(what, fn, *args):
    """Runs the user's `fn`; an exception it raises becomes a RecordError
    naming `what`, the exception and the user's line it came through."""
    try:
        return fn(*args)
    except RecordError as e:
        site = _user_site(e.__traceback__)
        raise RecordError("%s%s" % (e, " (at %s)" % site if site and site not in str(e) else "")) from None
    except Exception as e:  # the user's code: any exception is reported, with where
        site = _user_site(e.__traceback__)
        refused = _compile_refusal(e)
        if refused is not None:
            raise RecordError("%s%s" % (refused, " (at %s)" % site if site else "")) from None
        first = (str(e).splitlines() or [""])[0]
        if not first:  # a bare assert: say where it stands
            fs = traceback.extract_tb(e.__traceback__)[-1]
            first = "(no message; raised at %s:%d in %s)" % (fs.filename, fs.lineno, fs.name)
        raise RecordError("%s raised %s%s%s" % (what, type(e).__name__, ": " + first if first else "",
                                                 " at " + site if site else "")) from None


def _compile_refusal(exc):
    """The message of a torch.compile setting refused, or of a compiled
    graph not modelled, inside `exc` (Dynamo wraps backend errors), or None."""
    inductor_cpu = sys.modules.get("gpusim_torch.inductor_cpu")  # imported by any capture
    if inductor_cpu is None:
        return None
    found = inductor_cpu.find_refusal(exc)
    if found is None:
        return None
    return "torch.compile: %s" % found


def _compile_refused(*a, **k):
    site = _user_site()
    raise RecordError("%s%s" % ("torch.compile called at %s: " % site if site else "", COMPILE_REFUSAL))


@contextlib.contextmanager
def refusing_compile():
    """torch.compile and torch._dynamo.optimize raise RecordError while the
    block runs (Note [torch.compile refused by name])."""
    saved = []  # 1.13 has neither
    targets = [(torch, "compile"), (sys.modules.get("torch._dynamo"), "optimize")]
    if "torch._dynamo" in sys.modules:
        # An object compiled before recording began reaches Inductor here.
        import torch._inductor.compile_fx as cfx
        targets.append((cfx, "compile_fx"))
    for mod, name in targets:
        if mod is not None and hasattr(mod, name):
            saved.append((mod, name, getattr(mod, name)))
    for mod, name, _ in saved:
        setattr(mod, name, _compile_refused)
    try:
        yield
    finally:
        for mod, name, f in saved:
            setattr(mod, name, f)


def _refuse_compiled(model, fns):
    """Objects compiled before the recorder could see torch.compile called."""
    optimized = None
    ef = sys.modules.get("torch._dynamo.eval_frame")
    if ef is not None:
        optimized = getattr(ef, "OptimizedModule", None)
    if model is not None and isinstance(model, torch.nn.Module):
        for name, m in model.named_modules():
            if (optimized is not None and isinstance(m, optimized)) or \
                    getattr(m, "_compiled_call_impl", None) is not None:
                raise RecordError("the model%s is a torch.compile'd module: %s" % (
                    " (its submodule '%s')" % name if name else "", COMPILE_REFUSAL))
    for what, fn in fns:
        if fn is not None and hasattr(fn, "_torchdynamo_orig_callable"):
            site = _def_site(fn._torchdynamo_orig_callable)
            raise RecordError("%s%s is a torch.compile'd function: %s" % (
                what, " (defined at %s)" % site if site else "", COMPILE_REFUSAL))


@contextlib.contextmanager
def time_limit(seconds, what):
    """RecordError when the block runs longer than `seconds` (SIGALRM; the
    main thread only, elsewhere no limit is set and none is claimed)."""
    import threading
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum, frame):
        site = _user_site(stack=traceback.extract_stack(frame))
        raise RecordError("%s did not finish within %g s (--timeout)%s" % (
            what, seconds, "; it was running %s" % site if site else ""))
    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _default_step(loss_fn, autocast_ctx):
    def step(model, batch, optimizer):
        if optimizer is not None:
            optimizer.zero_grad()  # the version's default set_to_none
        with autocast_ctx():
            loss = loss_fn(model, batch)
        loss.backward()
        if optimizer is not None:
            optimizer.step()
        return loss
    return step


def record_step(setup=None, out=None, *, model=None, batch=None, optimizer=None, loss_fn=None,
                step=None, steps=3, autocast=None, device_type="cuda", mode="auto",
                frames=True, bounds=None, name=None, extra_meta=(), world_size=None, rank=0,
                device=None, sdpa_backend=None, cuda_torch_version=None, warmup_history=True,
                progress=None):
    """Records the last of `steps` training steps and writes it to `out`
    (a gpusim native trace). Either `setup(device) -> dict(model=, batch=,
    optimizer=, loss_fn= | step=)`, or those objects directly (built on the
    meta device). `extra_meta`: (key, value) pairs added to the trace's meta
    lines (the CLI adds step_file and batch_size). `world_size`, `rank`:
    run the step as that rank of a fake process group (Note [Collectives
    under a fake process group], collectives.py). `device`: the gpusim
    device whose CUDA build the recording models where it decides by the
    device (the SDPA kernel: Note [SDPA as dispatched on CUDA], sdpa.py;
    default h100-sxm-80gb); `sdpa_backend`: flash|efficient|cudnn|math, the
    SDPA kernel forced as torch.nn.attention.sdpa_kernel([...]) would;
    `cuda_torch_version`: the torch version of the CUDA build whose dispatch
    rules apply (default: the recording torch's); `warmup_history`: keep
    setup's and the warm-up steps' allocations and frees for the allocator
    (Note [The warm-up history], recorder.py); `progress`: called with a
    line after setup() and after each step (the CLI prints it on a
    terminal: a long recording says where it is).
    Returns the Recording."""
    if device_type not in DEVICE_TYPES:
        raise RecordError("--device-type: expected one of %s, got '%s'" % (", ".join(DEVICE_TYPES), device_type))
    if autocast is not None and autocast not in AUTOCAST:
        raise RecordError("--autocast: expected bf16 or fp16, got '%s'" % autocast)
    if steps < 1:
        raise RecordError("--steps: expected at least 1, got %d" % steps)
    if world_size is None and rank != 0:
        raise RecordError("--rank %d: give --world-size N too" % rank)
    if world_size is not None:
        if world_size < 1 or not 0 <= rank < world_size:
            raise RecordError("--world-size %d --rank %d: expected N >= 1 and 0 <= R < N" % (world_size, rank))
        why_not = collectives.refusal()
        if why_not:
            raise RecordError("--world-size: " + why_not)
    from gpusim_torch import sdpa
    device_name = device
    try:
        target_name, target = sdpa.target_for(device, cuda_torch_version)
    except ValueError as e:
        raise RecordError(str(e))
    force = None
    if sdpa_backend is not None:
        if sdpa_backend not in ("flash", "efficient", "cudnn", "math"):
            raise RecordError("--sdpa-backend: expected flash, efficient, cudnn or math, got '%s'" % sdpa_backend)
        force = sdpa.BY_NAME[sdpa_backend]
    chosen, why, backward_ok = choose_mode(mode)
    if chosen == "fake":
        from torch._subclasses.fake_tensor import FakeTensorMode
        outer = contextlib.ExitStack()
        outer.enter_context(_cuda_reported_available())
        outer.enter_context(FakeTensorMode())
        device = torch.device("cuda")
        rec = Recorder("cuda", frames=frames, bounds=bounds)
    else:
        outer = contextlib.nullcontext()
        device = torch.device("meta")
        rec = Recorder("meta", frames=frames, bounds=bounds)
    rec.history = [] if warmup_history else None  # Note [The warm-up history] (recorder.py)
    notes = []
    hooks = []
    gc_was = gc.isenabled()
    group = contextlib.nullcontext()
    if world_size is not None:
        group = collectives.fake_process_group(world_size, rank, notes)
        rec.world = (world_size, rank)
    dispatcher = None
    if chosen == "meta":
        dispatcher = sdpa.Dispatcher(target, force)
        dispatcher.rec = rec
        rec.sdpa = dispatcher
    elif force is not None:
        raise RecordError("--sdpa-backend: modelled in meta mode only (fake CUDA tensors dispatch SDPA "
                          "themselves); record with --mode meta")
    semantics = _cuda_semantics_on_meta() if chosen == "meta" else contextlib.nullcontext()
    capture = _compile_capture(rec, device_name, dispatcher) if chosen == "meta" else None
    with group, outer, semantics, autocast_emul.cuda_autocast(chosen == "meta", rec, dispatcher), \
            (capture if capture is not None else refusing_compile()):
        with rec:
            if setup is not None:
                try:
                    spec = _call_user("setup(device)", setup, device)
                except RecordError as e:
                    if chosen != "fake" or "Couldn't swap" not in str(e):
                        raise
                    raise RecordError(
                        "--mode fake: setup(device) moved a module built on the CPU with .to(device), "
                        "which FakeTensorMode cannot swap (%s); build it on the device "
                        "(nn.Linear(..., device=device)) or record with --mode meta" % str(e).splitlines()[0])
                where = _def_site(setup)
                where = " (defined at %s)" % where if where else ""
                if not isinstance(spec, dict):
                    raise RecordError("setup(device)%s must return a dict(model=..., batch=..., "
                                      "optimizer=..., loss_fn=... or step=...), got %s"
                                      % (where, type(spec).__name__))
                unknown = sorted(str(k) for k in set(spec) - {"model", "batch", "optimizer", "loss_fn", "step"})
                if unknown:
                    raise RecordError("setup(device)%s returned unknown key(s) %s (expected model, batch, "
                                      "optimizer, loss_fn or step)" % (where, ", ".join(unknown)))
                for key, want in (("optimizer", torch.optim.Optimizer), ("model", torch.nn.Module)):
                    if spec.get(key) is not None and not isinstance(spec[key], want):
                        raise RecordError("setup(device)%s returned %s=%s (expected a %s.%s or None)" % (
                            where, key, type(spec[key]).__name__, want.__module__, want.__qualname__))
                for key in ("loss_fn", "step"):
                    if spec.get(key) is not None and not callable(spec[key]):
                        raise RecordError("setup(device)%s returned %s=%s (expected a callable)" % (
                            where, key, type(spec[key]).__name__))
                if progress is not None:
                    progress("setup(device) done")
                model = spec.get("model")
                batch = spec.get("batch")
                optimizer = spec.get("optimizer")
                loss_fn = spec.get("loss_fn")
                step = spec.get("step")
            # Tensors setup() did not make inside the recorder (built before,
            # or on another path) join the start state; no-op for the rest.
            for t in _tensors_of(model, optimizer, batch):
                rec.adopt(t)
            if (loss_fn is None) == (step is None):
                raise RecordError("give exactly one of loss_fn(model, batch) and "
                                  "step(model, batch, optimizer)")
            if step is not None and autocast is not None:
                raise RecordError("--autocast applies to loss_fn only; a step() callable sets "
                                  "its own torch.autocast")
            if capture is None:
                _refuse_compiled(model, (("step", step), ("loss_fn", loss_fn)))
            if model is not None:
                hooks = rec.install_module_hooks(model)
            _cuda_optimizer_defaults(optimizer, notes)
            if step is None:
                dtype = AUTOCAST.get(autocast)
                ctx = (lambda: torch.autocast("cuda", dtype=dtype)) if dtype else contextlib.nullcontext
                step = _default_step(loss_fn, ctx)
            try:
                if not backward_ok:
                    rec.backward_refusal = (
                        "--mode fake: this step runs a backward, and %s; record it with --mode meta "
                        "(CUDA autocast emulated) or on a machine with a CUDA driver" % why.split("; ", 1)[1])
                with _patched_phases(rec, optimizer):
                    prev = None
                    for i in range(steps):
                        gc.collect()
                        gc.disable()
                        if i == steps - 1:
                            rec.warmup_steps = steps - 1
                            rec.begin_window()
                            rec.classify(roles_of(model, optimizer, batch))
                        # The previous step's result stays alive until this
                        # step's returns, as a loop variable does.
                        result = _call_user("step %d of %d" % (i + 1, steps), step, model, batch, optimizer)
                        prev = result
                        if progress is not None:
                            progress("step %d of %d run%s" % (i + 1, steps, " (recorded)" if i == steps - 1 else ""))
                        if i == steps - 1:
                            rec.classify(roles_of(model, optimizer, batch))
                            rec.end_window()
                        rec.set_phase("forward")
                    del prev, result
                if capture is not None:
                    try:
                        capture.check_unseen_graphs()
                    except Exception as e:
                        raise RecordError("torch.compile: %s" % e) from None
            finally:
                if gc_was:
                    gc.enable()
                for h in hooks:
                    h.remove()
    comments = ["torch %s, %s mode (%s); device type %s; %d step(s) run, the last recorded "
                "with what was live before it as the start state" % (
                    torch.__version__, chosen, why, device_type, steps),
                "what the CUDA libraries add (cuBLAS and cuDNN workspaces, reduction staging, "
                "sort temporaries) is sized by gpusim for the replay's --device from the op "
                "facts (op=, dims=) and meta lines"]
    if autocast:
        comments.append("loss_fn under autocast(%s)" % autocast)
    if world_size is not None:
        comments.append("rank %d of %d under a fake process group (backend \"fake\"); its collectives "
                        "recorded, NCCL's buffers sized by gpusim" % (rank, world_size))
    if dispatcher is not None and dispatcher.counts:
        for (backend, reason), n in sorted(dispatcher.counts.items()):
            comments.append("scaled_dot_product_attention: %d call(s) run %s on %s (compute %d.%d, cuDNN %d)%s: %s"
                            % (n, backend, target_name, target.major, target.minor, target.cudnn,
                               " (forced by --sdpa-backend)" if force is not None else "", reason))
    if capture is not None and capture.graphs:
        comments += compiled_comments(capture)
    comments += notes
    recording = rec.finish(name or "gpusim_torch-step", comments)
    recording.compiled = list(capture.graphs) if capture is not None else []
    recording.compiled_report = compiled_comments(capture) if capture is not None and capture.graphs else []
    recording.meta.extend(extra_meta)
    if dispatcher is not None:
        recording.meta.append(("sdpa_target", target_name))
        recording.meta.append(("sdpa_target_capability", "%d.%d" % (target.major, target.minor)))
        if force is not None:
            recording.meta.append(("sdpa_backend_forced", sdpa_backend))
        if cuda_torch_version:
            recording.meta.append(("sdpa_rules_torch_version", cuda_torch_version))
    rec.release()
    if out is not None:
        write_trace(out, recording, frames=frames)
    return recording


def _compile_capture(rec, device_name, dispatcher=None):
    """The inductor_cpu.Capture of a meta-mode recording (None where this
    torch has no torch.compile): each compiled graph's wrapper becomes a
    GraphPlan the recorder runs (Note [torch.compile on the CPU])."""
    if not hasattr(torch, "compile"):
        return None
    from gpusim_torch import inductor_cpu, inductor_plan, sdpa
    try:
        path, label = sdpa.device_file(device_name)
    except ValueError as e:
        raise RecordError(str(e))
    props = inductor_cpu.device_properties(path, label)

    def op_facts(op, args, graph_name):
        if dispatcher is None:
            return None
        return dispatcher.compiled_facts(op, args, graph_name.endswith("_forward"))

    def make_plan(source, graph, kwargs):
        plan = inductor_plan.parse_wrapper(source, graph, op_facts=op_facts)
        plan.runner = rec.run_compiled
        return plan
    return inductor_cpu.Capture(props, make_plan)


def compiled_comments(capture):
    """One comment per compiled graph (trace comments and the CLI's report):
    its kernels and the blocks its plan allocates."""
    out = ["torch.compile: %d graph(s) planned by Inductor (torch %s) for cuda on the CPU, %s's "
           "properties (Note [torch.compile on the CPU], python/gpusim_torch/inductor_cpu.py)"
           % (len(capture.graphs), torch.__version__, capture.props.name.split(" (")[0])]
    for plan in capture.graphs:
        allocs = plan.allocations()
        triton = sum(1 for k in plan.kernels if k.startswith("triton_"))
        saved = sum(1 for o in plan.outputs if o[0] != "none")
        out.append("compiled graph %s: %d kernels (%d Triton, %d extern or fallback), %d blocks allocated "
                   "(%d B), %d outputs" % (plan.name, len(plan.kernels), triton, len(plan.kernels) - triton,
                                           len(allocs), sum(a.nbytes for a in allocs), saved))
    for note in sorted(set(capture.notes)):
        out.append("torch.compile: " + note)
    return out


def _tensors_of(model, optimizer, batch):
    from torch.utils._pytree import tree_flatten
    seen = set()
    out = []
    objs = []
    if model is not None:
        objs += list(model.parameters()) + list(model.buffers())
        objs += [p.grad for p in model.parameters() if p.grad is not None]
    if optimizer is not None:
        for st in optimizer.state.values():
            objs += [v for v in st.values() if isinstance(v, torch.Tensor)]
    if batch is not None:
        objs += [t for t in tree_flatten(batch)[0] if isinstance(t, torch.Tensor)]
    for t in objs:
        k = storage_key(t)
        if k not in seen and t.device.type != "cpu":
            seen.add(k)
            out.append(t)
    return out
