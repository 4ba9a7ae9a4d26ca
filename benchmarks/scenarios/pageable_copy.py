"""``non_blocking=True`` copies from pageable memory: each step's 77 MB batch blocks the host.

A non_blocking host-to-device copy is only asynchronous from pinned memory; from pageable
memory the call returns when the copy is done, so copy and compute serialise. Fix: pin the
host buffer once.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _common import Steps, parse_args, pick_device
from torch import nn

LABEL = "non_blocking=True host-to-device copies from pageable memory"
EXPECTED = {"bottleneck": "memory_transfer", "finding": "code.pageable_copy"}
REQUIRES_CUDA = True


def main() -> None:
    args = parse_args(__doc__)
    dev = pick_device(args.device)
    gpu = dev.type == "cuda"
    batch, size = (128, 224) if gpu else (4, 32)
    n_batches = 4
    host = torch.randn(n_batches, batch, 3, size, size)  # pageable
    labels = torch.randint(0, 10, (n_batches, batch))
    if args.fix and gpu:
        host, labels = host.pin_memory(), labels.pin_memory()
    model = (
        nn.Sequential(
            nn.Conv2d(3, 32, 7, stride=4, padding=3),
            nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(64, 10),
        )
        .to(dev)
        .to(memory_format=torch.channels_last)
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with Steps("pageable_copy", args, dev, batch) as steps:
        for i in range(args.iters):
            x = host[i % n_batches].to(dev, non_blocking=True)  # the planted hidden sync
            y = labels[i % n_batches].to(dev, non_blocking=True)
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=gpu):
                loss = F.cross_entropy(model(x.contiguous(memory_format=torch.channels_last)), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            steps.mark()


if __name__ == "__main__":
    main()
