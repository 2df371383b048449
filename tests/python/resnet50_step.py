"""STEP file: torchvision's ResNet-50 trained as in the Kineto tb_plugin
example whose V100 trace ships in traces/recorded/
(kineto_tbplugin_resnet50_v100_legacy_noaddr.pt.trace.json.gz; pytorch/kineto
tb_plugin/examples/resnet50_profiler_api.py): batch 32 of 3x224x224, SGD with
momentum 0.9, cross-entropy; each step copies a new batch to the device
(the previous one freed when the loop variable is rebound), then forward,
loss, zero_grad, backward, step. The recorded run used PyTorch 1.9, whose
zero_grad() kept the gradients (set_to_none=False); that is asked for
explicitly so every version replays the same loop."""

import torch
from torch import nn

BATCH = 32


def setup(device):
    import torchvision
    model = torchvision.models.resnet50().to(device)
    model.train()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
    held = {}

    def step(model, batch, optimizer):
        held["inputs"] = torch.empty(BATCH, 3, 224, 224, device=device)
        held["labels"] = torch.zeros(BATCH, dtype=torch.long, device=device)
        held["outputs"] = model(held["inputs"])
        held["loss"] = criterion(held["outputs"], held["labels"])
        optimizer.zero_grad(set_to_none=False)
        held["loss"].backward()
        optimizer.step()
        return held["loss"]

    return dict(model=model, batch=None, optimizer=optimizer, step=step)
