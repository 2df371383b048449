"""transformers' GPT-2 (GPT2LMHeadModel, SDPA attention with dropout 0.1,
tied input and output embeddings) fine-tuned as users do: the model built on
the CPU and moved with .to(device), AdamW (foreach on CUDA, the default),
bf16 autocast, gradient clipping at 1.0. size "gpu" is GPT2Config()'s 124M
model at batch 8 x 1024.

    python3 -m gpusim_torch record examples/torch/gpt2.py --out gpt2.trace
    gpusim replay gpt2.trace --device h100-sxm-80gb
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _zoo import hf_lm_batch, hf_loss, preset, train_step  # noqa: E402

SIZES = {
    "test": dict(n_layer=2, n_embd=128, n_head=4, vocab=1024, seq=128, batch=2),
    "gpu": dict(n_layer=12, n_embd=768, n_head=12, vocab=50257, seq=1024, batch=8),
}


def setup(device, batch_size=None, grad_ckpt=False, size="test", compile=False):
    from transformers import GPT2Config, GPT2LMHeadModel
    c = preset(SIZES, size, batch_size)
    config = GPT2Config(n_layer=c["n_layer"], n_embd=c["n_embd"], n_head=c["n_head"],
                        vocab_size=c["vocab"], n_positions=max(1024, c["seq"]))
    model = GPT2LMHeadModel(config).to(device)
    model.train()
    if grad_ckpt:
        model.gradient_checkpointing_enable()
    if compile:  # torch.compile'd in place (nn.Module.compile), as torch.compile(model) would run it
        model.compile()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    return dict(model=model, batch=hf_lm_batch(c, device), optimizer=optimizer,
                step=train_step(hf_loss, clip=1.0))
