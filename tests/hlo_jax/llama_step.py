"""A Llama-style train step at Llama2-7B shapes (tools/collect/collect_jax.py's
step: scanned layers under jax.checkpoint, explicit attention, fp32 weights
and AdamW moments, bf16 compute, clipping) as a make_step for
tools/collect/export_hlo.py, with ShapeDtypeStructs only:

    cd tests/hlo_jax && python3 ../../tools/collect/export_hlo.py llama_step:make_step --arg 0 --out /tmp/l.hlo
"""

import os
import sys

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "collect"))
import collect_jax  # noqa: E402

LLAMA2_7B = {"d_model": 4096, "n_layers": 32, "n_heads": 32, "head_dim": 128, "mlp_dim": 11008,
             "vocab": 32000, "batch": 1, "seq_len": 2048}


def make_step(param_scan_axis="0", n_layers=None, seq_len=None):
    c = dict(LLAMA2_7B)
    if n_layers is not None:
        c["n_layers"] = int(n_layers)
    if seq_len is not None:
        c["seq_len"] = int(seq_len)
    axis = int(param_scan_axis)
    f32 = jnp.float32
    L = c["n_layers"]
    layers = {}
    for name, shape in collect_jax.layer_shapes(c).items():
        full = (L,) + shape
        if axis:
            full = full[1:axis + 1] + (L,) + full[axis + 1:]
        layers[name] = jax.ShapeDtypeStruct(full, f32)
    D, V = c["d_model"], c["vocab"]
    params = {"embed": jax.ShapeDtypeStruct((V, D), f32), "layers": layers,
              "final_norm": jax.ShapeDtypeStruct((D,), f32), "head": jax.ShapeDtypeStruct((D, V), f32)}
    state = (params, params, params, jax.ShapeDtypeStruct((), jnp.int32))
    B, S = c["batch"], c["seq_len"]
    tok = jax.ShapeDtypeStruct((B, S), jnp.int32)
    return collect_jax.adamw_step(c, axis), (state, tok, tok, tok)
