"""A model and its optimizer saved every 6 steps, on the training thread.

``torch.save`` of a state on the GPU copies every tensor to the host and writes it before the
next step can start: the GPU idles for the whole save. Fix: save every 12 steps instead of 6,
the change gpusight's estimate is made for (a crash loses up to 12 steps; the training is
unchanged), the later saves written from a thread. The thread alone gained 1.06x on an H200
(h200-run21): the copy to the host, on the training thread, is most of a save.
"""

from __future__ import annotations

import os
import tempfile
import threading

import torch
import torch.nn.functional as F
from _common import Steps, parse_args, pick_device
from torch import nn

LABEL = "torch.save of model and optimizer every 6 steps on the training thread"
EXPECTED = {"bottleneck": "between_steps", "finding": "code.checkpoint_phase"}
REQUIRES_CUDA = False
SAVE_EVERY = 6


class Mlp(nn.Module):
    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.head = nn.Linear(width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = x + F.gelu(block(x))
        return self.head(x)


def to_host(obj: object) -> object:
    """A copy of a (nested) state with every tensor copied to the host."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: to_host(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(to_host(v) for v in obj)
    return obj


def save_in_background(state: dict[str, object], path: str) -> threading.Thread:
    writer = threading.Thread(target=torch.save, args=(to_host(state), path))
    writer.start()
    return writer


def main() -> None:
    args = parse_args(__doc__, iters=60)
    dev = pick_device(args.device)
    gpu = dev.type == "cuda"
    width, depth, batch = (2048, 12, 512) if gpu else (64, 2, 8)
    torch.manual_seed(0)
    model = Mlp(width, depth).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=gpu)
    x = torch.randn(batch, width, device=dev)
    y = torch.randint(0, 10, (batch,), device=dev)
    folder = tempfile.mkdtemp(prefix="gpusight-scenario-ckpt-")
    path = os.path.join(folder, "last.pt")
    writer: threading.Thread | None = None
    every = 2 * SAVE_EVERY if args.fix else SAVE_EVERY
    try:
        with Steps("checkpoint_every_n", args, dev, batch) as steps:
            for i in range(args.iters):
                loss = F.cross_entropy(model(x), y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                if i % every == every - 1:
                    state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": i}
                    if args.fix:
                        if writer is not None:
                            writer.join()
                        writer = save_in_background(state, path)
                    else:
                        torch.save(state, path)
                steps.mark()
    finally:
        if writer is not None:
            writer.join()
        for name in os.listdir(folder):
            os.remove(os.path.join(folder, name))
        os.rmdir(folder)


if __name__ == "__main__":
    main()
