"""What the zoo's STEP files share: the training step they all run, and the
size presets. Each file's setup(device, batch_size=None, grad_ckpt=False,
size="test") builds its model on `device`, and returns the dict that
`python3 -m gpusim_torch record` and tools/collect/collect_torch.py --zoo
both run: one step is zero_grad, the forward and loss under bf16 autocast,
backward, clip_grad_norm_ (when asked), optimizer.step -- what a user's loop
does, so the GPU measurement and the CPU recording run the same code.

size "test" is small enough to record in seconds on the CPU (the suite's);
size "gpu" is the shape people train (measured on a real GPU by
collect_torch.py --zoo)."""

import torch


def train_step(loss_of, clip=None, autocast=torch.bfloat16):
    """step(model, batch, optimizer) for session.record_step: `loss_of(model,
    batch)` is the forward and the loss."""
    def step(model, batch, optimizer):
        optimizer.zero_grad(set_to_none=True)
        if autocast is None:
            loss = loss_of(model, batch)
        else:
            with torch.autocast("cuda", dtype=autocast):
                loss = loss_of(model, batch)
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        return loss
    return step


def preset(sizes, size, batch_size):
    """The size preset's dict, with batch_size replacing its batch when given."""
    if size not in sizes:
        raise ValueError("size %r: expected one of %s" % (size, ", ".join(sorted(sizes))))
    c = dict(sizes[size])
    if batch_size is not None:
        c["batch"] = int(batch_size)
    return c


def hf_lm_batch(c, device):
    """input_ids and labels (the same tokens: the model shifts them), as a
    causal-LM fine-tuning loop feeds them."""
    ids = torch.randint(0, c["vocab"], (c["batch"], c["seq"]), device=device)
    return {"input_ids": ids, "labels": ids}


def hf_loss(model, batch):
    return model(**batch).loss
