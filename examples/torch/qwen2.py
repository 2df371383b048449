"""transformers' Qwen2 (Qwen2ForCausalLM: biased QKV, 7 query heads per KV
head, tied embeddings) with bf16 parameters (model.to(torch.bfloat16), no
autocast) and AdamW, as memory-tight fine-tuning does. size "gpu" has
Qwen2-0.5B's shape (24 layers, d 896, 14 heads, 2 KV heads, MLP 4864,
vocabulary 151936) at batch 4 x 1024."""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _zoo import hf_lm_batch, hf_loss, preset, train_step  # noqa: E402

SIZES = {
    "test": dict(layers=2, hidden=224, inter=608, heads=7, kv_heads=1, vocab=1024, seq=128, batch=2),
    "gpu": dict(layers=24, hidden=896, inter=4864, heads=14, kv_heads=2, vocab=151936, seq=1024, batch=4),
}


def setup(device, batch_size=None, grad_ckpt=False, size="test"):
    from transformers import Qwen2Config, Qwen2ForCausalLM
    c = preset(SIZES, size, batch_size)
    config = Qwen2Config(hidden_size=c["hidden"], intermediate_size=c["inter"],
                         num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
                         num_key_value_heads=c["kv_heads"], vocab_size=c["vocab"],
                         tie_word_embeddings=True, max_position_embeddings=max(2048, c["seq"]))
    with torch.device(device):
        model = Qwen2ForCausalLM(config)
    model.to(torch.bfloat16)
    model.train()
    if grad_ckpt:
        model.gradient_checkpointing_enable()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    return dict(model=model, batch=hf_lm_batch(c, device), optimizer=optimizer,
                step=train_step(hf_loss, autocast=None))
