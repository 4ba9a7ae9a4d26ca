"""Bursty input pipeline: 4 DataLoader workers that cannot keep up with the GPU.

Each item takes 2 ms of CPU work in a worker (decoding, augmenting). Four workers finish their
batches together, the loop uses them up at the GPU's pace, then waits for the next round: every
4th step stalls, the median step looks healthy, and GPU utilisation swings between 0 and 100 %.
Fix: as many workers as the cores allow (all but two).
"""

from __future__ import annotations

import os
import time

import torch
import torch.nn.functional as F
from _common import Steps, parse_args, pick_device
from torch import nn
from torch.utils.data import DataLoader, Dataset

LABEL = "4 DataLoader workers too few: every 4th step stalls"
EXPECTED = {"bottleneck": "input_pipeline", "finding": "load.input_bound"}
REQUIRES_CUDA = False


class AugmentingDataset(Dataset[tuple[torch.Tensor, int]]):
    """Items cost ``cpu_s`` of CPU time each (a busy loop: it holds a core, as decoding does)."""

    def __init__(self, n: int, size: int, cpu_s: float) -> None:
        self.n, self.size, self.cpu_s = n, size, cpu_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        t = time.perf_counter()
        g = torch.Generator().manual_seed(i)
        img = torch.rand(3, self.size, self.size, generator=g)
        if i % 2:
            img = img.flip(-1)
        while time.perf_counter() - t < self.cpu_s:
            pass
        return img, i % 100


def model_for(gpu: bool) -> nn.Module:
    c = 64 if gpu else 8
    return nn.Sequential(
        nn.Conv2d(3, c, 3, stride=2, padding=1),
        nn.BatchNorm2d(c),
        nn.ReLU(),
        nn.Conv2d(c, 2 * c, 3, stride=2, padding=1),
        nn.BatchNorm2d(2 * c),
        nn.ReLU(),
        nn.Conv2d(2 * c, 4 * c, 3, stride=2, padding=1),
        nn.BatchNorm2d(4 * c),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4 * c, 100),
    )


def main() -> None:
    args = parse_args(__doc__, iters=120)
    dev = pick_device(args.device)
    gpu = dev.type == "cuda"
    batch, size = (64, 96) if gpu else (16, 32)
    cpu_s = 0.002 if gpu else 0.004
    ds = AugmentingDataset(batch * (args.iters + 64), size, cpu_s)
    workers = args.workers or (max(4, (os.cpu_count() or 4) - 2) if args.fix else 4)
    loader = DataLoader(
        ds, batch_size=batch, shuffle=True, num_workers=workers, pin_memory=gpu, drop_last=True
    )
    model = model_for(gpu).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    with Steps("bursty_loader", args, dev, batch) as steps:
        for i, (x, y) in enumerate(loader):
            if i >= args.iters:
                break
            x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            steps.mark()


if __name__ == "__main__":
    main()
