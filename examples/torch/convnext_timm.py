"""timm's ConvNeXt (depthwise 7x7 convolutions, LayerNorm, GELU MLPs,
stochastic depth 0.1) with AdamW under bf16 autocast; gradient
checkpointing is timm's own set_grad_checkpointing(). size "test" is
convnext_atto at 64 x 64, size "gpu" convnext_tiny at 224 x 224, batch 64."""

import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _zoo import preset, train_step  # noqa: E402

SIZES = {
    "test": dict(arch="convnext_atto", image=64, batch=2),
    "gpu": dict(arch="convnext_tiny", image=224, batch=64),
}


def setup(device, batch_size=None, grad_ckpt=False, size="test"):
    import timm
    c = preset(SIZES, size, batch_size)
    with torch.device(device):
        model = timm.create_model(c["arch"], pretrained=False, num_classes=1000, drop_path_rate=0.1)
    if grad_ckpt:
        model.set_grad_checkpointing(True)
    model.train()
    images = torch.randn(c["batch"], 3, c["image"], c["image"], device=device)
    labels = torch.randint(0, 1000, (c["batch"],), device=device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    loss = lambda m, b: nn.functional.cross_entropy(m(b[0]), b[1])  # noqa: E731
    return dict(model=model, batch=(images, labels), optimizer=optimizer, step=train_step(loss))
