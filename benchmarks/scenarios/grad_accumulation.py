"""Gradient accumulation over 16 micro-batches, ``loss.item()`` read on every one of them.

Each ``.item()`` waits for the GPU to finish the micro-batch before the host may queue the next
one. On an H200 that wait cost nothing: the ``--fix`` (the loss accumulated on the GPU, read once
per optimizer step: the same training, the same logged number) ran 0.99x at micro-batches of 4
and 0.96x at 64 (h200-run21), the host waiting for work the GPU does anyway. So the watch must
not make the sync the bottleneck: at 64 sequences of 256 a micro-batch the GPU sets the pace,
and the sync finding is there at 1.0x. ``--batch N`` sets the micro-batch (64 on a GPU, 2 on the
CPU by default); ``--fix`` keeps it and only moves the read.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _common import Steps, parse_args, pick_device
from torch import nn

LABEL = "gradient accumulation (16 micro-batches) with loss.item() per micro-batch"
EXPECTED = {"bottleneck": "compute", "finding": "code.host_sync"}
REQUIRES_CUDA = True
MICRO = 16


class Encoder(nn.Module):
    def __init__(self, d: int, layers: int, classes: int) -> None:
        super().__init__()
        block = nn.TransformerEncoderLayer(d, 8, 4 * d, dropout=0.0, batch_first=True)
        self.blocks = nn.TransformerEncoder(block, layers)
        self.head = nn.Linear(d, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(x).mean(1))


def main() -> None:
    args = parse_args(__doc__, iters=20)
    dev = pick_device(args.device)
    gpu = dev.type == "cuda"
    d, layers, micro_batch, seq = (512, 4, 64, 256) if gpu else (32, 1, 2, 8)
    micro_batch = args.batch or micro_batch
    torch.manual_seed(0)
    model = Encoder(d, layers, 10).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=gpu)
    x = torch.randn(MICRO, micro_batch, seq, d, device=dev)
    y = torch.randint(0, 10, (MICRO, micro_batch), device=dev)
    amp = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=gpu)
    logged: list[float] = []
    with Steps("grad_accumulation", args, dev, MICRO * micro_batch) as steps:
        for _ in range(args.iters):
            running = torch.zeros((), device=dev)
            total = 0.0
            for m in range(MICRO):
                with amp:
                    loss = F.cross_entropy(model(x[m]), y[m]) / MICRO
                loss.backward()
                if args.fix:
                    running += loss.detach()
                else:
                    total += loss.item()  # the planted sync, once per micro-batch
            opt.step()
            opt.zero_grad(set_to_none=True)
            logged.append(running.item() if args.fix else total)
            steps.mark()


if __name__ == "__main__":
    main()
