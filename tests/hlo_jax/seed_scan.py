"""The scan program of ../shared/seeds/scan_vs_unroll.txt (gpusim's
examples/scan_carry.yaml) as a make_step for tools/collect/export_hlo.py:

    cd tests/hlo_jax && python3 ../../tools/collect/export_hlo.py seed_scan:make_step --arg 3 --arg rolled --out /tmp/s.hlo

The model is given as ShapeDtypeStructs (the 4 GiB w2 is never allocated).
"""

import jax
import jax.numpy as jnp


def make_step(seqlen="4", mode="rolled"):
    seqlen = int(seqlen)
    if mode not in ("rolled", "unrolled"):
        raise ValueError(f"mode {mode!r}: expected rolled or unrolled")
    model = {"w1": jax.ShapeDtypeStruct((1, 1024), jnp.float32),
             "w2": jax.ShapeDtypeStruct((1024, 1024 * 1024), jnp.float32)}
    X = jax.ShapeDtypeStruct((seqlen, 1), jnp.float32)

    def compute_loss(model, X):
        def scan_update_rule(carry, x):
            model, loss = carry
            z = x @ model["w1"] @ model["w2"]
            zval = jnp.sum(z)
            new_model = jax.tree.map(lambda p: p * zval, model)
            return (new_model, loss + zval), None

        carry = (model, jnp.zeros(()))
        (_, final_loss), _ = jax.lax.scan(scan_update_rule, carry, X, unroll=mode == "unrolled")
        return final_loss

    return jax.jit(jax.grad(compute_loss), donate_argnums=(0,)), (model, X)
