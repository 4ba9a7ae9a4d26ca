"""``nn.DataParallel`` on one GPU beside a DataLoader that decodes in the main process.

The wrapper costs a little each step (a replica, scatter and gather); the loader, 1 ms an item
with ``num_workers=0``, costs most of the step. The verdict must be the loader. Fix: worker
processes, pinned (the wrapper stays: it is the smaller cost, and a finding of its own).
"""

from __future__ import annotations

import os
import time

import torch
import torch.nn.functional as F
from _common import Steps, parse_args, pick_device
from torch import nn
from torch.utils.data import DataLoader, Dataset

LABEL = "DataParallel on one GPU beside a main-process loader (1 ms an item)"
EXPECTED = {"bottleneck": "input_pipeline", "finding": "load.input_bound"}
REQUIRES_CUDA = False


class Images(Dataset[tuple[torch.Tensor, int]]):
    def __init__(self, n: int, side: int) -> None:
        self.n, self.side = n, side

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(0.001)  # reading and decoding a JPEG
        g = torch.Generator().manual_seed(i)
        return torch.rand(3, self.side, self.side, generator=g), i % 100


class SmallConvNet(nn.Module):
    def __init__(self, classes: int) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.BatchNorm2d(128), nn.ReLU(),
        )  # fmt: skip
        self.fc = nn.Linear(128, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x).mean((2, 3)))


def main() -> None:
    args = parse_args(__doc__)
    dev = pick_device(args.device)
    gpu = dev.type == "cuda"
    batch, side = (64, 96) if gpu else (8, 16)
    ds = Images(batch * (args.iters + 2), side)
    workers = args.workers or (min(12, os.cpu_count() or 2) if args.fix else 0)
    loader = DataLoader(
        ds,
        batch_size=batch,
        num_workers=workers,
        pin_memory=gpu and workers > 0,
        persistent_workers=workers > 0,
    )
    model: nn.Module = SmallConvNet(100).to(dev)
    if gpu:
        model = nn.DataParallel(model)  # the smaller cost, planted in both runs
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    with Steps("dataparallel_slow_loader", args, dev, batch) as steps:
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
