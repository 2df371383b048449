"""STEP file: the CS336 Transformer LM as the snapshot recorded it (vocabulary
10,000, context 256, d_model 768, 12 layers, 12 heads, d_ff 3,072, float32,
batch 32: configuration inferred from the snapshot's allocation sizes, see
README "Bring your own PyTorch model"). The recorded window is a forward
and backward pass with gradients accumulating and no optimizer (the
assignment's memory-profiling loop); the previous step's logits and loss
stay referenced until this step replaces them, as loop variables do.
setup(device, compile=True) records the same step with the model
torch.compile'd (the loss stays eager)."""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cs336_lm import TransformerLM, cross_entropy  # noqa: E402

CONFIG = dict(vocab_size=10000, context_length=256, d_model=768, num_layers=12,
              num_heads=12, d_ff=3072)
BATCH = 32


def setup(device, batch_size=BATCH, compile=False):
    model = TransformerLM(**CONFIG, device=device)
    if compile:  # torch.compile'd in place (nn.Module.compile): Inductor's plan (docs/pytorch.md)
        model.compile()
    x = torch.randint(0, CONFIG["vocab_size"], (batch_size, CONFIG["context_length"]), device=device)
    y = torch.randint(0, CONFIG["vocab_size"], (batch_size, CONFIG["context_length"]), device=device)
    held = {}

    def step(model, batch, optimizer):
        held["logits"] = model(batch[0])
        held["loss"] = cross_entropy(held["logits"], batch[1])
        held["loss"].backward()
        return held["loss"]

    return dict(model=model, batch=(x, y), optimizer=None, step=step)
