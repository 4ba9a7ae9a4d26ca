"""Tiny batch: an MLP trained 8 samples at a time.

Each step launches the same few dozen small kernels whatever the batch, so the host's
launch overhead, not the GPU, sets the pace. Fix: a batch of 1024 (same launches, 128x work).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _common import Steps, compiled, parse_args, pick_device
from torch import nn

LABEL = "tiny batch (8) on an MLP: launch-bound"
EXPECTED = {"bottleneck": "launch_overhead", "finding": "load.small_batch"}
REQUIRES_CUDA = True


def build(
    dev: torch.device, fix: bool = False, batch: int | None = None
) -> tuple[nn.Module, torch.optim.Optimizer, torch.Tensor, torch.Tensor]:
    """Model, optimizer and 16 batches on the device; also ``cost/parts.py``'s."""
    width, depth = (1024, 6) if dev.type == "cuda" else (64, 3)
    batch = batch or (1024 if fix else 8)
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(width, 10)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    xs = torch.randn(16, batch, width, device=dev)
    ys = torch.randint(0, 10, (16, batch), device=dev)
    return model, opt, xs, ys


def main() -> None:
    args = parse_args(__doc__, iters=60)
    dev = pick_device(args.device)
    model, opt, xs, ys = build(dev, args.fix, args.batch)
    model = compiled(model, args)
    with Steps("tiny_batch", args, dev, xs.shape[1]) as steps:
        for i in range(args.iters):
            loss = F.cross_entropy(model(xs[i % 16]), ys[i % 16])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            steps.mark()


if __name__ == "__main__":
    main()
