"""transformers' ViT (ViTForImageClassification, SDPA attention, no mask)
classifying images with cross-entropy, AdamW, bf16 autocast. size "gpu" is
ViT-Base/16 at 224 x 224, batch 64."""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _zoo import hf_loss, preset, train_step  # noqa: E402

SIZES = {
    "test": dict(layers=2, hidden=128, heads=4, inter=512, image=64, batch=2),
    "gpu": dict(layers=12, hidden=768, heads=12, inter=3072, image=224, batch=64),
}


def setup(device, batch_size=None, grad_ckpt=False, size="test"):
    from transformers import ViTConfig, ViTForImageClassification
    c = preset(SIZES, size, batch_size)
    config = ViTConfig(hidden_size=c["hidden"], num_hidden_layers=c["layers"],
                       num_attention_heads=c["heads"], intermediate_size=c["inter"],
                       image_size=c["image"], patch_size=16, num_labels=1000)
    with torch.device(device):
        model = ViTForImageClassification(config)
    model.train()
    if grad_ckpt:
        model.gradient_checkpointing_enable()
    images = torch.randn(c["batch"], 3, c["image"], c["image"], device=device)
    labels = torch.randint(0, 1000, (c["batch"],), device=device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return dict(model=model, batch={"pixel_values": images, "labels": labels}, optimizer=optimizer,
                step=train_step(hf_loss))
