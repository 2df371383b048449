"""torchvision's ResNet-50 under bf16 autocast with SGD (momentum 0.9) and
cross-entropy; gradient checkpointing runs the stem and the four stages
through torch.utils.checkpoint.checkpoint_sequential (4 segments,
non-reentrant). size "gpu": batch 64 at 224 x 224."""

import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _zoo import preset, train_step  # noqa: E402

SIZES = {
    "test": dict(image=64, batch=2),
    "gpu": dict(image=224, batch=64),
}


class Checkpointed(nn.Module):
    """ResNet's forward with its stem and stages under checkpoint_sequential."""

    def __init__(self, net):
        super().__init__()
        self.net = net
        self.body = nn.Sequential(nn.Sequential(net.conv1, net.bn1, net.relu, net.maxpool),
                                  net.layer1, net.layer2, net.layer3, net.layer4)

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint_sequential
        x = checkpoint_sequential(self.body, 4, x, use_reentrant=False)
        return self.net.fc(torch.flatten(self.net.avgpool(x), 1))


def setup(device, batch_size=None, grad_ckpt=False, size="test"):
    import torchvision
    c = preset(SIZES, size, batch_size)
    with torch.device(device):
        model = torchvision.models.resnet50()
    if grad_ckpt:
        model = Checkpointed(model)
    model.train()
    images = torch.randn(c["batch"], 3, c["image"], c["image"], device=device)
    labels = torch.randint(0, 1000, (c["batch"],), device=device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss = lambda m, b: nn.functional.cross_entropy(m(b[0]), b[1])  # noqa: E731
    return dict(model=model, batch=(images, labels), optimizer=optimizer, step=train_step(loss))
