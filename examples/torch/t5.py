"""transformers' T5 (T5ForConditionalGeneration: encoder-decoder, relative
position bias, untied scaling) trained on (source, target) pairs with
AdamW under bf16 autocast. size "gpu" is t5-small's shape (6+6 layers,
d 512, 8 heads) at batch 16, source 512, target 128."""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _zoo import hf_loss, preset, train_step  # noqa: E402

SIZES = {
    "test": dict(layers=2, d_model=128, d_ff=512, heads=4, d_kv=32, vocab=1024, src=128, tgt=32, batch=2),
    "gpu": dict(layers=6, d_model=512, d_ff=2048, heads=8, d_kv=64, vocab=32128, src=512, tgt=128, batch=16),
}


def setup(device, batch_size=None, grad_ckpt=False, size="test"):
    from transformers import T5Config, T5ForConditionalGeneration
    c = preset(SIZES, size, batch_size)
    config = T5Config(d_model=c["d_model"], d_ff=c["d_ff"], num_layers=c["layers"],
                      num_heads=c["heads"], d_kv=c["d_kv"], vocab_size=c["vocab"],
                      decoder_start_token_id=0, pad_token_id=0)
    with torch.device(device):
        model = T5ForConditionalGeneration(config)
    model.train()
    if grad_ckpt:
        model.gradient_checkpointing_enable()
    src = torch.randint(0, c["vocab"], (c["batch"], c["src"]), device=device)
    tgt = torch.randint(0, c["vocab"], (c["batch"], c["tgt"]), device=device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return dict(model=model, batch={"input_ids": src, "labels": tgt}, optimizer=optimizer,
                step=train_step(hf_loss))
