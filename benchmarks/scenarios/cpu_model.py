"""Model left on the CPU: CUDA is there, but neither the model nor the batches were moved.

Fix: ``model.to("cuda")`` before building the optimizer, and each batch to the GPU.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _common import Steps, parse_args, pick_device
from torch import nn

LABEL = "model and batches left on the CPU while a GPU is available"
EXPECTED = {"bottleneck": "device_placement", "finding": "code.cpu_model"}
REQUIRES_CUDA = True


def main() -> None:
    args = parse_args(__doc__)
    gpu_dev = pick_device(args.device)
    dev = gpu_dev if args.fix else torch.device("cpu")  # the planted mistake: never moved
    width, batch = (1024, 256) if gpu_dev.type == "cuda" else (64, 16)
    model = nn.Sequential(
        nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10)
    ).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    xs = torch.randn(8, batch, width)
    ys = torch.randint(0, 10, (8, batch))
    if args.fix and dev.type == "cuda":
        xs, ys = xs.pin_memory(), ys.pin_memory()
    with Steps("cpu_model", args, gpu_dev, batch) as steps:
        for i in range(args.iters):
            x, y = xs[i % 8].to(dev, non_blocking=True), ys[i % 8].to(dev, non_blocking=True)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            steps.mark()


if __name__ == "__main__":
    main()
