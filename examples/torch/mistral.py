"""transformers' Mistral (MistralForCausalLM) with a sliding window shorter
than the sequence, so attention runs with a mask (and the KV heads are
repeated, not grouped, inside SDPA); AdamW, bf16 autocast. size "gpu": 8
layers of d 1024, 16 heads, 4 KV heads, window 512, batch 4 x 2048."""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _zoo import hf_lm_batch, hf_loss, preset, train_step  # noqa: E402

SIZES = {
    "test": dict(layers=2, hidden=256, inter=688, heads=8, kv_heads=2, vocab=1024, seq=128,
                 window=64, batch=2),
    "gpu": dict(layers=8, hidden=1024, inter=3584, heads=16, kv_heads=4, vocab=32000, seq=2048,
                window=512, batch=4),
}


def setup(device, batch_size=None, grad_ckpt=False, size="test"):
    from transformers import MistralConfig, MistralForCausalLM
    c = preset(SIZES, size, batch_size)
    config = MistralConfig(hidden_size=c["hidden"], intermediate_size=c["inter"],
                           num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
                           num_key_value_heads=c["kv_heads"], vocab_size=c["vocab"],
                           sliding_window=c["window"], max_position_embeddings=max(4096, c["seq"]))
    with torch.device(device):
        model = MistralForCausalLM(config)
    model.train()
    if grad_ckpt:
        model.gradient_checkpointing_enable()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return dict(model=model, batch=hf_lm_batch(c, device), optimizer=optimizer,
                step=train_step(hf_loss))
