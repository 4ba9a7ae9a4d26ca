"""A conv net under bf16 autocast in NCHW layout: Tensor Core convolutions want NHWC.

Fix: ``channels_last`` for the model and the inputs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _common import Steps, parse_args, pick_device
from torch import nn

LABEL = "conv net under bf16 autocast without channels_last"
EXPECTED = {"bottleneck": "compute", "finding": "load.channels_last"}
REQUIRES_CUDA = True


def block(c: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(c, c, 3, padding=1, bias=False),
        nn.BatchNorm2d(c),
        nn.ReLU(),
        nn.Conv2d(c, c, 3, padding=1, bias=False),
        nn.BatchNorm2d(c),
        nn.ReLU(),
    )


def main() -> None:
    args = parse_args(__doc__)
    dev = pick_device(args.device)
    gpu = dev.type == "cuda"
    batch, size, c = (64, 128, 128) if gpu else (2, 32, 8)
    torch.backends.cudnn.benchmark = True
    model = nn.Sequential(
        nn.Conv2d(3, c, 3, stride=2, padding=1, bias=False),
        nn.BatchNorm2d(c),
        nn.ReLU(),
        block(c),
        block(c),
        nn.Conv2d(c, 2 * c, 3, stride=2, padding=1, bias=False),
        nn.BatchNorm2d(2 * c),
        nn.ReLU(),
        block(2 * c),
        block(2 * c),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(2 * c, 100),
    ).to(dev)
    x = torch.randn(batch, 3, size, size, device=dev)
    y = torch.randint(0, 100, (batch,), device=dev)
    if args.fix:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with Steps("conv_nchw_amp", args, dev, batch) as steps:
        for _ in range(args.iters):
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=gpu):
                loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            steps.mark()


if __name__ == "__main__":
    main()
