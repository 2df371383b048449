"""transformers' BERT (BertForMaskedLM) with a padding mask (the second half
of the batch padded to half length, so SDPA runs with a mask), masked-LM
labels (-100, ignored, where no token is masked), AdamW, bf16 autocast.
size "gpu" is bert-base (12 layers, d 768) at batch 32 x 512."""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _zoo import hf_loss, preset, train_step  # noqa: E402

SIZES = {
    "test": dict(layers=2, hidden=128, heads=4, inter=512, vocab=1024, seq=128, batch=2),
    "gpu": dict(layers=12, hidden=768, heads=12, inter=3072, vocab=30522, seq=512, batch=32),
}


def setup(device, batch_size=None, grad_ckpt=False, size="test"):
    from transformers import BertConfig, BertForMaskedLM
    c = preset(SIZES, size, batch_size)
    config = BertConfig(hidden_size=c["hidden"], num_hidden_layers=c["layers"],
                        num_attention_heads=c["heads"], intermediate_size=c["inter"],
                        vocab_size=c["vocab"], max_position_embeddings=max(512, c["seq"]))
    with torch.device(device):
        model = BertForMaskedLM(config)
    model.train()
    if grad_ckpt:
        model.gradient_checkpointing_enable()
    B, S = c["batch"], c["seq"]
    ids = torch.randint(0, c["vocab"], (B, S), device=device)
    mask = torch.ones(B, S, dtype=torch.long, device=device)
    mask[B // 2:, S // 2:] = 0
    # One position in 8 masked: its label is the token, the rest -100 (ignored).
    labels = torch.full((B, S), -100, dtype=torch.long, device=device)
    labels[:, ::8] = ids[:, ::8]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return dict(model=model, batch={"input_ids": ids, "attention_mask": mask, "labels": labels},
                optimizer=optimizer, step=train_step(hf_loss))
