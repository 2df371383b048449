"""torchvision's ViT-B/16 (nn.MultiheadAttention, which calls SDPA when no
attention weights are asked for) with label-smoothed cross-entropy, AdamW,
bf16 autocast; gradient checkpointing wraps each encoder block in
torch.utils.checkpoint.checkpoint (non-reentrant). size "gpu": batch 64 at
224 x 224."""

import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _zoo import preset, train_step  # noqa: E402

SIZES = {
    "test": dict(image=64, layers=2, heads=4, hidden=128, mlp=512, batch=2),
    "gpu": dict(image=224, layers=12, heads=12, hidden=768, mlp=3072, batch=64),
}


class Checkpointed(nn.Module):
    def __init__(self, block):
        super().__init__()
        self.block = block

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint
        return checkpoint(self.block, x, use_reentrant=False)


def setup(device, batch_size=None, grad_ckpt=False, size="test"):
    from torchvision.models.vision_transformer import VisionTransformer
    c = preset(SIZES, size, batch_size)
    with torch.device(device):
        model = VisionTransformer(image_size=c["image"], patch_size=16, num_layers=c["layers"],
                                  num_heads=c["heads"], hidden_dim=c["hidden"], mlp_dim=c["mlp"])
    if grad_ckpt:
        layers = model.encoder.layers
        for name, block in list(layers.named_children()):
            setattr(layers, name, Checkpointed(block))
    model.train()
    images = torch.randn(c["batch"], 3, c["image"], c["image"], device=device)
    labels = torch.randint(0, 1000, (c["batch"],), device=device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    loss = lambda m, b: nn.functional.cross_entropy(m(b[0]), b[1], label_smoothing=0.1)  # noqa: E731
    return dict(model=model, batch=(images, labels), optimizer=optimizer, step=train_step(loss))
