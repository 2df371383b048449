#!/usr/bin/env python3
"""Collect gpusim calibration data from JAX programs on this machine.

Runs two seed programs and writes a calibration file gpusim reads directly
(`gpusim calibrate OUT/jax_calibration.yaml`), the run configs it names, and
the raw measurements:

  1. The scan example of JAX issue "Scan leads to much higher memory usage
     than an unrolled loop" (../shared/seeds/scan_vs_unroll.txt; gpusim's
     examples/scan_carry.yaml), rolled and unrolled, T = 1..4.
  2. A small Llama-like training step (RMSNorm, RoPE, SwiGLU, untied head,
     fp32 weights and AdamW moments, bf16 compute, scanned layers under full
     remat) with param_scan_axis 0 and 1, in plain jax + numpy: with axis 1
     the stacked weights are stored with the layer axis second and transposed
     to the front before the scan, as Flax's nn.scan does for MaxText's
     default (../shared/reference/maxtext.md). With --flax (and flax
     importable) the layers are a flax.linen nn.scan with
     variable_axes={"params": axis} instead, reproducing the transpose itself.

For every program: compiled.memory_analysis() (argument/output/alias/temp
bytes), device.memory_stats() after the run, the median of warm step times,
a profiler trace (jax.profiler.trace, Perfetto) and a device memory profile
(jax.profiler.save_device_memory_profile, pprof).

Without a GPU, JAX runs on the CPU: every code path still runs (smaller
shapes by default), the cases are written with fit: false, and the hardware
field says so. See README.md.
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import calibration_io as cio  # noqa: E402

try:
    import jax
    import jax.numpy as jnp
    import numpy as np
except ImportError as e:  # pragma: no cover - depends on the machine
    sys.stderr.write(
        "collect_jax.py needs JAX and NumPy (%s).\n"
        "Install them, e.g. `pip install -U \"jax[cuda12]\"` on a CUDA machine or "
        "`pip install -U jax` for the CPU fallback, then rerun.\n" % e)
    sys.exit(2)

SCAN_SOURCE = ("JAX issue 'Scan leads to much higher memory usage than an unrolled loop' "
               "(../shared/seeds/scan_vs_unroll.txt), rerun by tools/collect/collect_jax.py")
LLAMA_SOURCE = ("Llama-like step after MaxText param_scan_axis issue "
                "(../shared/seeds/param_scan_axis.txt), tools/collect/collect_jax.py")


def device_info():
    dev = jax.devices()[0]
    gpu = dev.platform == "gpu"
    kind = getattr(dev, "device_kind", dev.platform)
    name = cio.gpusim_device_name(kind) if gpu else None
    hardware = f"{kind} x{jax.device_count()}" if gpu else \
        f"CPU fallback ({cio.host_description()}); times and bytes not comparable with a GPU"
    software = f"jax {jax.__version__}, jaxlib {getattr(jax.lib, '__version__', '?')}, numpy {np.__version__}"
    return dev, gpu, name or cio.FALLBACK_DEVICE, hardware, software


def memory_analysis_dict(compiled):
    ma = compiled.memory_analysis()
    if ma is None:
        return {}
    out = {}
    for k in ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
              "temp_size_in_bytes", "generated_code_size_in_bytes", "host_temp_size_in_bytes"):
        if hasattr(ma, k):
            out[k] = int(getattr(ma, k))
    return out


def memory_stats(dev):
    try:
        stats = dev.memory_stats()
    except Exception:  # not implemented on some backends
        stats = None
    return {k: int(v) for k, v in (stats or {}).items() if isinstance(v, (int, np.integer))}


def profile(fn, args, out_dir, tag):
    """A Perfetto trace of two calls and a device memory profile after them."""
    trace_dir = os.path.join(out_dir, "profiles", f"{tag}.trace")
    os.makedirs(trace_dir, exist_ok=True)
    try:
        with jax.profiler.trace(trace_dir, create_perfetto_trace=True):
            for _ in range(2):
                args = fn(*args)
                jax.block_until_ready(args)
    except Exception as e:  # profiler plugins missing: keep going
        print(f"  profiler trace skipped: {e}")
    prof = os.path.join(out_dir, "profiles", f"{tag}.memory.prof")
    try:
        jax.profiler.save_device_memory_profile(prof)
    except Exception as e:
        print(f"  memory profile skipped: {e}")
    return args


# --- 1. the scan example ----------------------------------------------------

def scan_program(seqlen, unroll, cols):
    key = jax.random.key(0)
    X = jnp.ones((seqlen, 1), dtype=jnp.float32)
    model = {"w1": jax.random.normal(key, (1, 1024)), "w2": jax.random.normal(key, (1024, cols))}

    def model_fn(m, x):
        return x @ m["w1"] @ m["w2"]

    def compute_loss(m, X):
        def body(carry, x):
            m, loss = carry
            zval = jnp.sum(model_fn(m, x))
            return (jax.tree.map(lambda p: p * zval, m), loss + zval), None
        (_, final), _ = jax.lax.scan(body, (m, jnp.zeros(())), X, unroll=unroll)
        return final

    fn = jax.jit(jax.grad(compute_loss), donate_argnums=(0,))
    return fn, model, X


def run_scan(args, dev, out_dir):
    results = []
    for unroll in (False, True):
        for t in range(1, 5):
            if unroll and t == 1:
                continue  # T=1 is the same program either way
            fn, model, X = scan_program(t, unroll, args.scan_cols)
            compiled = fn.lower(model, X).compile()
            ma = memory_analysis_dict(compiled)
            state = {"m": model}

            def step():
                state["m"] = fn(state["m"], X)

            median, times = cio.median_step_time(step, args.warmup, args.iters,
                                                 sync=lambda: jax.block_until_ready(state["m"]))
            tag = f"scan_{'unrolled' if unroll else 'rolled'}_T{t}"
            profile(lambda m: (fn(m, X),), (state["m"],), out_dir, tag)
            results.append({"tag": tag, "unroll": unroll, "T": t, "memory_analysis": ma,
                            "memory_stats": memory_stats(dev), "step_time_s": median, "times": times})
            print(f"  {tag}: temp {ma.get('temp_size_in_bytes')} B, step {median * 1e3:.3f} ms")
    return results


def scan_config(device, cols):
    return {
        "framework": "jax", "device": device,
        "loop": {"mode": "rolled", "trip_count": 4},
        "program": {
            "name": "scan_carry",
            "inputs": {"w1": {"shape": [1, 1024], "dtype": "f32", "donate": True},
                       "w2": {"shape": [1024, cols], "dtype": "f32", "donate": True},
                       "X": {"shape": ["trip_count", 1], "dtype": "f32"}},
            "scan": {"carry": {"w1": "w1", "w2": "w2", "loss": "zero"},
                     "xs": {"x": "X"},
                     "body": [{"op": "matmul", "out": "h", "in": ["x", "w1"]},
                              {"op": "matmul", "out": "z", "in": ["h", "w2"]},
                              {"op": "sum", "out": "zval", "in": ["z"]},
                              {"op": "scale", "out": "w1_next", "in": ["w1", "zval"]},
                              {"op": "scale", "out": "w2_next", "in": ["w2", "zval"]},
                              {"op": "add", "out": "loss_next", "in": ["loss", "zval"]}],
                     "carry_out": {"w1": "w1_next", "w2": "w2_next", "loss": "loss_next"}},
            "loss": "loss", "grad": ["w1", "w2"]},
    }


# --- 2. the Llama-like step ---------------------------------------------------

LAYER_WEIGHTS = ("attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "wi_0", "wi_1", "wo_mlp")


def layer_shapes(c):
    D, H, Dh, M = c["d_model"], c["n_heads"], c["head_dim"], c["mlp_dim"]
    return {"attn_norm": (D,), "wq": (D, H * Dh), "wk": (D, H * Dh), "wv": (D, H * Dh),
            "wo": (H * Dh, D), "mlp_norm": (D,), "wi_0": (D, M), "wi_1": (D, M), "wo_mlp": (M, D)}


def init_params(c, axis, seed=0):
    """fp32 params; stacked layer weights with the layer axis at `axis`."""
    rng = np.random.default_rng(seed)
    L = c["n_layers"]
    layers = {}
    for name, shape in layer_shapes(c).items():
        if name.endswith("norm"):
            w = np.ones((L,) + shape, np.float32)
        else:
            w = (rng.standard_normal((L,) + shape) / np.sqrt(shape[0])).astype(np.float32)
        layers[name] = jnp.asarray(np.moveaxis(w, 0, axis) if axis else w)
    D, V = c["d_model"], c["vocab"]
    return {"embed": jnp.asarray(rng.standard_normal((V, D)).astype(np.float32) * 0.02),
            "layers": layers, "final_norm": jnp.ones((D,), jnp.float32),
            "head": jnp.asarray(rng.standard_normal((D, V)).astype(np.float32) / np.sqrt(D))}


def rms_norm(x, scale):
    x32 = x.astype(jnp.float32)
    y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + 1e-6)
    return (y * scale).astype(jnp.bfloat16)


def rope(x, positions):
    d = x.shape[-1]
    freq = 1.0 / (10000 ** (jnp.arange(0, d, 2, dtype=jnp.float32) / d))
    ang = positions[:, :, None, None].astype(jnp.float32) * freq
    x1, x2 = jnp.split(x.astype(jnp.float32), 2, axis=-1)
    return jnp.concatenate([x1 * jnp.cos(ang) - x2 * jnp.sin(ang),
                            x2 * jnp.cos(ang) + x1 * jnp.sin(ang)], axis=-1).astype(jnp.bfloat16)


def decoder_layer(c, x, w, positions):
    B, S, _ = x.shape
    H, Dh = c["n_heads"], c["head_dim"]
    bf = lambda a: a.astype(jnp.bfloat16)  # noqa: E731
    h = rms_norm(x, w["attn_norm"])
    q = rope((h @ bf(w["wq"])).reshape(B, S, H, Dh), positions)
    k = rope((h @ bf(w["wk"])).reshape(B, S, H, Dh), positions)
    v = (h @ bf(w["wv"])).reshape(B, S, H, Dh)
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) / np.sqrt(Dh)
    mask = jnp.tril(jnp.ones((S, S), bool))
    p = jax.nn.softmax(jnp.where(mask, s, -1e30), axis=-1).astype(jnp.bfloat16)
    o = jnp.einsum("bhqk,bkhd->bqhd", p, v).reshape(B, S, H * Dh)
    x = x + o @ bf(w["wo"])
    h = rms_norm(x, w["mlp_norm"])
    a = jax.nn.silu(h @ bf(w["wi_0"])) * (h @ bf(w["wi_1"]))
    return x + a @ bf(w["wo_mlp"])


def loss_fn(c, axis, params, tokens, targets, positions, use_flax_layers=None):
    x = params["embed"][tokens].astype(jnp.bfloat16)
    if use_flax_layers is not None:
        x = use_flax_layers(params["layers"], x, positions)
    else:
        # Flax's nn.scan with variable_axes={"params": axis != 0} moves the
        # layer axis to the front: a transposed copy of every stacked weight.
        stacked = {k: (jnp.moveaxis(v, axis, 0) if axis else v) for k, v in params["layers"].items()}
        layer = jax.checkpoint(lambda x, w: (decoder_layer(c, x, w, positions), None))  # remat full
        x, _ = jax.lax.scan(layer, x, stacked)
    h = rms_norm(x, params["final_norm"])
    logits = (h @ params["head"].astype(jnp.bfloat16)).astype(jnp.float32)
    onehot = jax.nn.one_hot(targets, c["vocab"], dtype=jnp.float32)
    return -jnp.mean(jnp.sum(onehot * jax.nn.log_softmax(logits), axis=-1))


def adamw_step(c, axis, flax_layers=None):
    b1, b2, eps, wd, lr = 0.9, 0.95, 1e-8, 0.1, 1e-4   # MaxText base.yml AdamW

    def step(state, tokens, targets, positions):
        params, mu, nu, count = state
        loss, grads = jax.value_and_grad(
            lambda p: loss_fn(c, axis, p, tokens, targets, positions, flax_layers))(params)
        gnorm = jnp.sqrt(sum(jnp.sum(g * g) for g in jax.tree.leaves(grads)))
        grads = jax.tree.map(lambda g: g * jnp.minimum(1.0, 1.0 / (gnorm + 1e-6)), grads)  # clip 1.0
        count = count + 1
        mu = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, mu, grads)
        nu = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, nu, grads)
        bc1, bc2 = 1 - b1 ** count, 1 - b2 ** count
        params = jax.tree.map(lambda p, m, v: p - lr * ((m / bc1) / (jnp.sqrt(v / bc2) + eps) + wd * p),
                              params, mu, nu)
        return (params, mu, nu, count), loss

    return jax.jit(step, donate_argnums=(0,))


def flax_layers_fn(c, axis):
    """flax.linen layers scanned with variable_axes={"params": axis}; returns
    (apply(layers_params, x, positions), init params) or None without flax."""
    try:
        import flax.linen as nn
    except ImportError:
        return None

    class Layer(nn.Module):
        @nn.compact
        def __call__(self, x, positions):
            w = {name: self.param(name, nn.initializers.ones if name.endswith("norm")
                                  else nn.initializers.lecun_normal(), shape, jnp.float32)
                 for name, shape in layer_shapes(c).items()}
            return decoder_layer(c, x, w, positions), None

    Scanned = nn.scan(nn.remat(Layer), variable_axes={"params": axis}, split_rngs={"params": True},
                      in_axes=(nn.broadcast,), length=c["n_layers"])
    module = Scanned()

    def apply(layer_params, x, positions):
        return module.apply({"params": layer_params}, x, positions)[0]

    def init(x, positions):
        return module.init(jax.random.key(0), x, positions)["params"]

    return apply, init


def run_llama(args, dev, out_dir, c):
    results = []
    B, S = c["batch"], c["seq_len"]
    rng = np.random.default_rng(1)
    tokens = jnp.asarray(rng.integers(0, c["vocab"], (B, S)), jnp.int32)
    targets = jnp.asarray(rng.integers(0, c["vocab"], (B, S)), jnp.int32)
    positions = jnp.broadcast_to(jnp.arange(S, dtype=jnp.int32), (B, S))
    for axis in (0, 1):
        params = init_params(c, axis)
        flax_layers = None
        if args.flax:
            f = flax_layers_fn(c, axis)
            if f is None:
                print("  --flax: flax is not importable; using the plain-jax transpose")
            else:
                flax_layers, init = f
                params["layers"] = init(params["embed"][tokens].astype(jnp.bfloat16), positions)
        zeros = jax.tree.map(jnp.zeros_like, params)
        state = [(params, zeros, jax.tree.map(jnp.zeros_like, params), jnp.zeros((), jnp.int32))]
        fn = adamw_step(c, axis, flax_layers)
        compiled = fn.lower(state[0], tokens, targets, positions).compile()
        ma = memory_analysis_dict(compiled)

        def step():
            state[0], _ = fn(state[0], tokens, targets, positions)

        median, times = cio.median_step_time(step, args.warmup, args.iters,
                                             sync=lambda: jax.block_until_ready(state[0]))
        tag = f"llama_like_axis{axis}"
        profile(lambda s: (fn(s, tokens, targets, positions)[0],), (state[0],), out_dir, tag)
        results.append({"tag": tag, "param_scan_axis": axis, "memory_analysis": ma,
                        "memory_stats": memory_stats(dev), "step_time_s": median, "times": times})
        print(f"  {tag}: temp {ma.get('temp_size_in_bytes')} B, step {median * 1e3:.3f} ms")
    return results


def llama_config(device, c):
    return {
        "framework": "jax", "device": device,
        "model": {"from": "llama2-7b", "name": "llama-like-collect", "d_model": c["d_model"],
                  "n_layers": c["n_layers"], "n_heads": c["n_heads"], "n_kv_heads": c["n_heads"],
                  "head_dim": c["head_dim"], "mlp_dim": c["mlp_dim"], "vocab": c["vocab"],
                  "attention": "explicit", "param_scan_axis": 0},
        "optimizer": {"kind": "adamw", "moment_dtype": "f32", "clip_grad_norm": True},
        "loop": {"mode": "rolled"},
        "remat": {"policy": "full"},
        "parallelism": {"fsdp": 1},
        "batch": {"per_device": c["batch"], "seq_len": c["seq_len"]},
        "allocator": {"impl": "ideal"},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="collected_jax", help="output folder")
    ap.add_argument("--iters", type=int, default=10, help="timed warm steps (median)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--scan-cols", type=int, default=None,
                    help="w2 columns of the scan example (seed: 1048576; CPU default 4096)")
    ap.add_argument("--flax", action="store_true", help="use flax nn.scan for the Llama-like layers")
    ap.add_argument("--skip-scan", action="store_true")
    ap.add_argument("--skip-llama", action="store_true")
    args = ap.parse_args()

    dev, gpu, device, hardware, software = device_info()
    if args.scan_cols is None:
        args.scan_cols = 1024 * 1024 if gpu else 4096
    print(f"collect_jax: {hardware}; gpusim device {device}")
    if not gpu:
        print("  no GPU: running on the CPU fallback; cases are written with fit: false")
    out = os.path.abspath(args.out)
    os.makedirs(os.path.join(out, "configs"), exist_ok=True)
    llama = ({"d_model": 1024, "n_layers": 8, "n_heads": 8, "head_dim": 128, "mlp_dim": 2816,
              "vocab": 32000, "batch": 1, "seq_len": 2048} if gpu else
             {"d_model": 128, "n_layers": 2, "n_heads": 2, "head_dim": 64, "mlp_dim": 352,
              "vocab": 512, "batch": 1, "seq_len": 128})

    raw = {"hardware": hardware, "software": software, "device": device, "scan": [], "llama_like": []}
    cases = []
    if not args.skip_scan:
        cio.write_yaml(os.path.join(out, "configs", "scan_carry.yaml"),
                       "JAX scan example (scan_vs_unroll seed); written by collect_jax.py",
                       scan_config(device, args.scan_cols))
        raw["scan"] = run_scan(args, dev, out)
        for r in raw["scan"]:
            cases.append(cio.calibration_case(
                r["tag"], "configs/scan_carry.yaml",
                [f"loop.mode={'unrolled' if r['unroll'] else 'rolled'}", f"loop.trip_count={r['T']}"],
                r["step_time_s"], r["memory_analysis"].get("temp_size_in_bytes"), "memory_analysis_temp",
                hardware, software, SCAN_SOURCE, fit=False))
    if not args.skip_llama:
        cio.write_yaml(os.path.join(out, "configs", "llama_like.yaml"),
                       "Llama-like step of collect_jax.py", llama_config(device, llama))
        raw["llama_like"] = run_llama(args, dev, out, llama)
        for r in raw["llama_like"]:
            cases.append(cio.calibration_case(
                r["tag"], "configs/llama_like.yaml", [f"model.param_scan_axis={r['param_scan_axis']}"],
                r["step_time_s"], r["memory_analysis"].get("temp_size_in_bytes"), "memory_analysis_temp",
                hardware, software, LLAMA_SOURCE, fit=gpu))
    with open(os.path.join(out, "raw_jax.json"), "w") as f:
        json.dump(raw, f, indent=2)
    path = os.path.join(out, "jax_calibration.yaml")
    cio.write_yaml(path, f"Measured by tools/collect/collect_jax.py on {hardware}.\n{software}\n"
                   f"Run: gpusim calibrate {path}", {"name": "collect-jax", "cases": cases})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
