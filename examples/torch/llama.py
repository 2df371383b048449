"""transformers' Llama (LlamaForCausalLM: RMSNorm, RoPE, SwiGLU, grouped-query
attention with 4 query heads per KV head, causal SDPA without a mask, untied
head), built on the device, fused AdamW, bf16 autocast, clipping at 1.0.
size "gpu" has TinyLlama-1.1B's shape (22 layers, d 2048, 32 heads, 4 KV
heads, MLP 5632, vocabulary 32000) at batch 4 x 2048."""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _zoo import hf_lm_batch, hf_loss, preset, train_step  # noqa: E402

SIZES = {
    "test": dict(layers=2, hidden=256, inter=688, heads=8, kv_heads=2, vocab=1024, seq=128, batch=2),
    "gpu": dict(layers=22, hidden=2048, inter=5632, heads=32, kv_heads=4, vocab=32000, seq=2048, batch=4),
}


def setup(device, batch_size=None, grad_ckpt=False, size="test"):
    from transformers import LlamaConfig, LlamaForCausalLM
    c = preset(SIZES, size, batch_size)
    config = LlamaConfig(hidden_size=c["hidden"], intermediate_size=c["inter"],
                         num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
                         num_key_value_heads=c["kv_heads"], vocab_size=c["vocab"],
                         max_position_embeddings=max(2048, c["seq"]))
    with torch.device(device):
        model = LlamaForCausalLM(config)
    model.train()
    if grad_ckpt:
        model.gradient_checkpointing_enable()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    return dict(model=model, batch=hf_lm_batch(c, device), optimizer=optimizer,
                step=train_step(hf_loss, clip=1.0))
