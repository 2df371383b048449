"""A Llama-style train step at Llama2-7B shapes, with MaxText's train state and
batch, as a make_step for tools/collect/export_hlo.py (ShapeDtypeStructs only):

    cd tests/hlo_jax && python3 ../../tools/collect/export_hlo.py llama_step:make_step --arg 0 --out /tmp/l.hlo

The built-in `llama` family models the same step (models/llama.cc): state
(step, params, AdamW mu and nu in fp32, the adam and schedule counts),
batch (inputs, inputs_position, inputs_segmentation, targets,
targets_segmentation), scanned decoder layers under jax.checkpoint (remat
`full`), explicit causal attention within segments, bf16 compute, global-norm
clipping at 1.0, and MaxText's metrics loss, moe_lb_loss, total_weights, raw_grad_norm,
grad_norm, param_norm.
`param_scan_axis` 1 stores the stacked weights with the layer axis second and
moves it to the front before the scan (what Flax's nn.scan with
variable_axes={"params": 1} does; ../shared/reference/maxtext.md). The layer
math is tools/collect/collect_jax.py's.
"""

import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "collect"))
import collect_jax  # noqa: E402

LLAMA2_7B = {"d_model": 4096, "n_layers": 32, "n_heads": 32, "head_dim": 128, "mlp_dim": 11008,
             "vocab": 32000, "batch": 1, "seq_len": 2048}
BATCH = ("inputs", "inputs_position", "inputs_segmentation", "targets", "targets_segmentation")


def decoder_layer(c, x, w, positions, segments):
    B, S, _ = x.shape
    H, Dh = c["n_heads"], c["head_dim"]
    bf = lambda a: a.astype(jnp.bfloat16)  # noqa: E731
    h = collect_jax.rms_norm(x, w["attn_norm"])
    q = collect_jax.rope((h @ bf(w["wq"])).reshape(B, S, H, Dh), positions)
    k = collect_jax.rope((h @ bf(w["wk"])).reshape(B, S, H, Dh), positions)
    v = (h @ bf(w["wv"])).reshape(B, S, H, Dh)
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) / np.sqrt(Dh)
    mask = jnp.tril(jnp.ones((S, S), bool))[None] & (segments[:, :, None] == segments[:, None, :])
    p = jax.nn.softmax(jnp.where(mask[:, None], s, -1e30), axis=-1).astype(jnp.bfloat16)
    o = jnp.einsum("bhqk,bkhd->bqhd", p, v).reshape(B, S, H * Dh)
    x = x + o @ bf(w["wo"])
    h = collect_jax.rms_norm(x, w["mlp_norm"])
    a = jax.nn.silu(h @ bf(w["wi_0"])) * (h @ bf(w["wi_1"]))
    return x + a @ bf(w["wo_mlp"])


# remat name -> the jax.checkpoint policy (jax/_src/ad_checkpoint.py
# checkpoint_policies); "none" runs the layer without jax.checkpoint.
REMAT_POLICIES = {"full": "nothing_saveable", "dots": "dots_saveable",
                  "dots_no_batch": "dots_with_no_batch_dims_saveable", "none": None}


def loss_fn(c, axis, params, batch, unroll=False, remat="full"):
    x = params["token_embedder"][batch["inputs"]].astype(jnp.bfloat16)
    stacked = {k: (jnp.moveaxis(v, axis, 0) if axis else v) for k, v in params["layers"].items()}
    body = lambda x, w: (decoder_layer(c, x, w, batch["inputs_position"],  # noqa: E731
                                       batch["inputs_segmentation"]), None)
    if remat not in REMAT_POLICIES:
        raise ValueError(f"remat {remat!r}: expected one of {', '.join(REMAT_POLICIES)}")
    policy = REMAT_POLICIES[remat]
    layer = body if policy is None else jax.checkpoint(body, policy=getattr(jax.checkpoint_policies, policy))
    x, _ = jax.lax.scan(layer, x, stacked, unroll=unroll)
    h = collect_jax.rms_norm(x, params["final_norm"])
    logits = (h @ params["logits_dense"].astype(jnp.bfloat16)).astype(jnp.float32)
    onehot = jax.nn.one_hot(batch["targets"], c["vocab"], dtype=jnp.float32)
    ce = -jnp.sum(onehot * jax.nn.log_softmax(logits), axis=-1)
    weights = batch["targets_segmentation"] != 0
    return jnp.sum(ce * weights) / jnp.maximum(jnp.sum(weights), 1)


def global_norm(tree):
    return jnp.sqrt(sum(jnp.sum(jnp.square(g)) for g in jax.tree.leaves(tree)))


def train_step(c, axis, unroll=False, remat="full"):
    b1, b2, eps, wd, lr = 0.9, 0.95, 1e-8, 0.1, 1e-4   # MaxText base.yml AdamW

    def step(state, batch):
        params = state["params"]
        loss, grads = jax.value_and_grad(lambda p: loss_fn(c, axis, p, batch, unroll, remat))(params)
        raw_grad_norm = global_norm(grads)
        grads = jax.tree.map(lambda g: g * jnp.minimum(1.0, 1.0 / (raw_grad_norm + 1e-6)), grads)
        grad_norm = global_norm(grads)
        count = state["count"] + 1
        mu = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, state["mu"], grads)
        nu = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, state["nu"], grads)
        bc1, bc2 = 1 - b1 ** count, 1 - b2 ** count
        params = jax.tree.map(lambda p, m, v: p - lr * ((m / bc1) / (jnp.sqrt(v / bc2) + eps) + wd * p),
                              params, mu, nu)
        new_state = {"step": state["step"] + 1, "params": params, "mu": mu, "nu": nu, "count": count,
                     "schedule_count": state["schedule_count"] + 1}
        # MaxText train.py train_step's scalar metrics (4bf3beaa), moe_lb_loss
        # 0.0 for a dense model.
        metrics = {"loss": loss, "moe_lb_loss": jnp.float32(0.0),
                   "total_weights": jnp.sum(batch["targets_segmentation"] != 0),
                   "raw_grad_norm": raw_grad_norm, "grad_norm": grad_norm, "param_norm": global_norm(params)}
        return new_state, metrics

    return jax.jit(step, donate_argnums=(0,))


def make_step(param_scan_axis="0", mode="rolled", n_layers=None, seq_len=None, remat="full"):
    c = dict(LLAMA2_7B)
    if n_layers is not None:
        c["n_layers"] = int(n_layers)
    if seq_len is not None:
        c["seq_len"] = int(seq_len)
    axis = int(param_scan_axis)
    f32, i32 = jnp.float32, jnp.int32
    L = c["n_layers"]
    layers = {}
    for name, shape in collect_jax.layer_shapes(c).items():
        full = (L,) + shape
        if axis:
            full = full[1:axis + 1] + (L,) + full[axis + 1:]
        layers[name] = jax.ShapeDtypeStruct(full, f32)
    D, V = c["d_model"], c["vocab"]
    params = {"token_embedder": jax.ShapeDtypeStruct((V, D), f32), "layers": layers,
              "final_norm": jax.ShapeDtypeStruct((D,), f32), "logits_dense": jax.ShapeDtypeStruct((D, V), f32)}
    scalar = jax.ShapeDtypeStruct((), i32)
    state = {"step": scalar, "params": params, "mu": params, "nu": params, "count": scalar,
             "schedule_count": scalar}
    tokens = jax.ShapeDtypeStruct((c["batch"], c["seq_len"]), i32)
    if mode not in ("rolled", "unrolled"):
        raise ValueError(f"mode {mode!r}: expected rolled or unrolled")
    return train_step(c, axis, mode == "unrolled", remat), (state, {n: tokens for n in BATCH})
