"""A host sync every step: ``loss.item()`` for logging, then a 5 ms blocking logger call.

``.item()`` waits for the GPU to finish the step, so the logger call that follows cannot
overlap with GPU work: the GPU idles for it every step. Fix: keep the running loss on the GPU
and read it every 50 steps; the logger call then overlaps with the queued GPU work.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F
from _common import Steps, parse_args, pick_device
from torch import nn

LABEL = ".item() every step followed by a blocking 5 ms logger call"
EXPECTED = {"bottleneck": "host_sync", "finding": "code.host_sync"}
REQUIRES_CUDA = True


def log_metrics(step: int, value: float | None) -> None:
    """Stands in for a metrics client that blocks on I/O for a few ms."""
    time.sleep(0.005)


def main() -> None:
    args = parse_args(__doc__)
    dev = pick_device(args.device)
    gpu = dev.type == "cuda"
    # about 7 ms of GPU work per step on an H200, against the logger's 5 ms
    width, depth, batch = (4096, 8, 4096) if gpu else (64, 2, 16)
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.GELU()]
    model = nn.Sequential(*layers, nn.Linear(width, 10)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=gpu)
    x = torch.randn(batch, width, device=dev)
    y = torch.randint(0, 10, (batch,), device=dev)
    running = torch.zeros((), device=dev)
    with Steps("item_per_step", args, dev, batch) as steps:
        for i in range(args.iters):
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=gpu):
                loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if args.fix:
                running += loss.detach()
                value = running.item() / 50 if i % 50 == 49 else None
                log_metrics(i, value)
            else:
                log_metrics(i, loss.item())  # the planted sync
            steps.mark()


if __name__ == "__main__":
    main()
