"""The model wrapped in ``nn.DataParallel`` (it wraps even on one GPU).

DataParallel replicates the model every step and drives all GPUs from one Python thread;
PyTorch recommends DistributedDataParallel. On one GPU it only adds overhead. Fix: no
wrapper (one GPU) or DDP with one process per GPU.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _common import Steps, parse_args, pick_device
from torch import nn

LABEL = "model wrapped in nn.DataParallel"
EXPECTED = {"bottleneck": "device_placement", "finding": "code.dataparallel"}
REQUIRES_CUDA = True


def main() -> None:
    args = parse_args(__doc__)
    dev = pick_device(args.device)
    gpu = dev.type == "cuda"
    width, batch = (2048, 1024) if gpu else (64, 16)
    model: nn.Module = nn.Sequential(
        nn.Linear(width, width), nn.GELU(), nn.Linear(width, width), nn.GELU(), nn.Linear(width, 10)
    ).to(dev)
    if not args.fix and gpu:
        model = nn.DataParallel(model)  # the planted wrapper
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=gpu)
    x = torch.randn(batch, width, device=dev)
    y = torch.randint(0, 10, (batch,), device=dev)
    with Steps("dataparallel", args, dev, batch) as steps:
        for _ in range(args.iters):
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=gpu):
                loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            steps.mark()


if __name__ == "__main__":
    main()
