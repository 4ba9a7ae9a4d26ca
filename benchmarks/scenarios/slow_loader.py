"""Slow input pipeline: every item is "decoded" (1 ms of blocking I/O) in the main process.

The DataLoader runs with num_workers=0, so the GPU waits for each batch. Fix: worker
processes, pinned memory, batches kept in flight.
"""

from __future__ import annotations

import os
import time

import torch
from _common import Steps, parse_args, pick_device
from torch import nn
from torch.utils.data import DataLoader, Dataset

LABEL = "slow DataLoader: 1 ms per item in the main process (num_workers=0)"
EXPECTED = {"bottleneck": "input_pipeline", "finding": "load.input_bound"}
REQUIRES_CUDA = False


class DecodingDataset(Dataset[tuple[torch.Tensor, int]]):
    def __init__(self, n: int, shape: tuple[int, ...], delay_s: float) -> None:
        self.n, self.shape, self.delay_s = n, shape, delay_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(self.delay_s)  # reading and decoding a file
        g = torch.Generator().manual_seed(i)
        return torch.rand(self.shape, generator=g), i % 10


def main() -> None:
    args = parse_args(__doc__)
    dev = pick_device(args.device)
    gpu = dev.type == "cuda"
    batch = 32
    shape = (3, 64, 64) if gpu else (3, 16, 16)
    ds = DecodingDataset(batch * args.iters, shape, delay_s=0.001)
    if args.workers and not args.fix:
        # The fix's first part alone, at a what-if's worker count.
        loader = DataLoader(ds, batch_size=batch, num_workers=args.workers)
    elif args.fix:
        workers = args.workers or min(16, os.cpu_count() or 2)
        loader = DataLoader(
            ds,
            batch_size=batch,
            num_workers=workers,
            pin_memory=gpu,
            persistent_workers=True,
            prefetch_factor=4,
        )
    else:
        loader = DataLoader(ds, batch_size=batch, num_workers=0)
    dim = shape[0] * shape[1] * shape[2]
    model = nn.Sequential(nn.Flatten(), nn.Linear(dim, 1024), nn.ReLU(), nn.Linear(1024, 10)).to(
        dev
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    with Steps("slow_loader", args, dev, batch) as steps:
        for x, y in loader:
            x, y = x.to(dev, non_blocking=args.fix), y.to(dev, non_blocking=args.fix)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            steps.mark()


if __name__ == "__main__":
    main()
