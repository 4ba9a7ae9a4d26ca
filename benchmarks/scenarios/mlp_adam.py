"""Launch-bound training: an MLP of 19 small modules (residual blocks), Adam, batch 32.

About 90 small kernels a step (forward, backward, Adam's foreach updates) with little work in
each, so the host's launch rate sets the pace; every module call and the optimizer step go
through torch's hook machinery, which is what a watch that hooks them could slow down
(``benchmarks/watch_cost.py``). Fix: a batch of 2048 (the same launches, 64x the work).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _common import Steps, compiled, parse_args, pick_device
from torch import nn

LABEL = "MLP of 19 small modules, Adam, batch 32: launch-bound"
EXPECTED = {"bottleneck": "launch_overhead", "finding": "load.small_batch"}
REQUIRES_CUDA = True


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.act(self.fc(x))


class Net(nn.Module):
    def __init__(self, width: int, depth: int = 6, classes: int = 10) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def main() -> None:
    args = parse_args(__doc__, iters=200)
    dev = pick_device(args.device)
    width = 512 if dev.type == "cuda" else 64
    batch = args.batch or (2048 if args.fix else 32)
    model = compiled(Net(width).to(dev), args)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    xs = torch.randn(8, batch, width, device=dev)
    ys = torch.randint(0, 10, (8, batch), device=dev)
    with Steps("mlp_adam", args, dev, batch) as steps:
        for i in range(args.iters):
            loss = F.cross_entropy(model(xs[i % 8]), ys[i % 8])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            steps.mark()


if __name__ == "__main__":
    main()
