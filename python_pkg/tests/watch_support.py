"""Shared pieces for the watch tests: a slow Dataset with its own stopwatch, a snapshot of
everything the watch touches (to prove it is all restored), a small training loop."""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from typing import Any

import torch
from gpusight.watch.recorder import StepRecord
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

SLEEP_S = 0.02


class SlowDataset(Dataset[tuple[torch.Tensor, int]]):
    """Each item sleeps ``sleep_s``; ``spent`` records how long each ``__getitem__`` really took."""

    def __init__(self, n: int = 4096, sleep_s: float = SLEEP_S, dim: int = 32) -> None:
        self.n = n
        self.sleep_s = sleep_s
        self.dim = dim
        self.spent: list[float] = []

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        t = time.perf_counter()
        time.sleep(self.sleep_s)
        x = torch.randn(self.dim)
        self.spent.append(time.perf_counter() - t)
        return x, i % 4


def measured_step(
    ms: float, detail_us: float = 0.0, hooks_us: float = 0.0, recorded: bool = True
) -> StepRecord:
    """A measured step's record of ``ms``: the watch's own time in it is ``hooks_us`` plus
    ``detail_us`` (what recording copies and syncs cost, when ``recorded``)."""
    r = StepRecord(1, "measure", 0, int(ms * 1e6))
    r.detail = recorded
    r.detail_ns = int(detail_us * 1e3)
    r.overhead_ns = int((hooks_us + detail_us) * 1e3)
    return r


def small_model(dim: int = 32) -> nn.Module:
    return nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Linear(64, 4))


def snapshot() -> dict[str, Any]:
    """Identity of everything the watch patches, and torch's flags."""
    from gpusight.watch.machine import torch_flags
    from torch.nn.modules import module as m
    from torch.optim import optimizer as o
    from torch.utils.data import dataloader

    return {
        "Tensor.__dict__": {
            k: v for k, v in vars(torch.Tensor).items() if k in ("to", "cuda", "backward")
        },
        "autograd.backward": torch.autograd.backward,
        "cuda.synchronize": torch.cuda.synchronize,
        "loader.__next__": vars(dataloader._BaseDataLoaderIter)["__next__"],
        "optimizer hooks": (
            len(o._global_optimizer_pre_hooks),
            len(o._global_optimizer_post_hooks),
        ),
        "module hooks": (
            len(m._global_forward_pre_hooks),
            len(m._global_forward_hooks),
            len(m._global_forward_hooks_always_called),
        ),
        "showwarning": warnings.showwarning,
        # Lazy imports (sympy, via the profiler) may add filters of their own; what matters is
        # that no filter of ours stays behind.
        "sync filters": [
            f for f in warnings.filters if f[1] is not None and "synchroniz" in f[1].pattern
        ],
        "profiler": torch._C._autograd._profiler_enabled(),
        "flags": torch_flags(torch),
    }


def module_hooks(model: nn.Module) -> int:
    return sum(len(x._forward_hooks) + len(x._forward_pre_hooks) for x in model.modules())


def train(loader: Any, model: nn.Module, steps: int | None = None) -> Iterator[int]:
    """A plain training loop; yields after each step."""
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    for i, (x, y) in enumerate(loader):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        yield i
        if steps is not None and i + 1 >= steps:
            return


class Classifier(nn.Module):
    """A small transformer encoder classifier: a real model with an evaluation worth timing."""

    def __init__(self) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.enc(x).mean(1))


def train_val_loaders() -> tuple[DataLoader[Any], DataLoader[Any]]:
    """Training and validation loaders of random sequences, batch 8, seeded."""
    g = torch.Generator().manual_seed(0)
    train = TensorDataset(torch.randn(2048, 8, 32, generator=g), torch.randint(0, 10, (2048,)))
    val = TensorDataset(torch.randn(384, 8, 32, generator=g), torch.randint(0, 10, (384,)))
    return DataLoader(train, batch_size=8), DataLoader(val, batch_size=8)
