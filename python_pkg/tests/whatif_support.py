"""Shared by the whatif tests: small real workloads and checksums of everything the user owns.

The checksums read torch's public API (and ``gpusight.bench.flags.snapshot``, written apart from
``gpusight.whatif.restore``), so a restore bug cannot hide behind its own reader.
"""

from __future__ import annotations

import hashlib
import random
import time
from typing import Any

import numpy as np
import torch
from gpusight.bench.flags import snapshot as precision_snapshot
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset


def tensor_bytes(t: torch.Tensor) -> bytes:
    return t.detach().cpu().reshape(-1).contiguous().view(torch.uint8).numpy().tobytes()


def _h(*parts: Any) -> hashlib._Hash:
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else repr(p).encode())
    return h


def model_digest(model: nn.Module) -> str:
    h = _h()
    for name, p in model.named_parameters():
        h.update(f"{name}:{p.dtype}:{tuple(p.shape)}:{p.requires_grad}".encode())
        h.update(tensor_bytes(p))
        h.update(b"grad:" + (tensor_bytes(p.grad) if p.grad is not None else b"none"))
    for name, b in model.named_buffers():
        h.update(f"{name}:{b.dtype}".encode() + tensor_bytes(b))
    for name, m in model.named_modules():
        h.update(f"{name}:{m.training}".encode())
    return h.hexdigest()


def optimizer_digest(opt: torch.optim.Optimizer) -> str:
    sd = opt.state_dict()
    h = _h(sd["param_groups"])
    for idx in sorted(sd["state"]):
        for k in sorted(sd["state"][idx]):
            v = sd["state"][idx][k]
            h.update(f"{idx}.{k}".encode())
            h.update(tensor_bytes(v) if isinstance(v, torch.Tensor) else repr(v).encode())
    return h.hexdigest()


def rng_digest() -> str:
    h = _h(random.getstate())
    st = np.random.get_state()
    h.update(repr(st[0]).encode() + st[1].tobytes() + repr(st[2:]).encode())
    h.update(tensor_bytes(torch.get_rng_state()))
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for s in torch.cuda.get_rng_state_all():
            h.update(tensor_bytes(s))
    return h.hexdigest()


def flags_state() -> dict[str, Any]:
    cudnn = torch.backends.cudnn
    return {
        "precision": precision_snapshot(),
        "cudnn": (cudnn.benchmark, cudnn.deterministic, cudnn.enabled),
        "deterministic": (
            torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled(),
        ),
        "grad": torch.is_grad_enabled(),
        "dtype": torch.get_default_dtype(),
        "device": str(torch.get_default_device()),
        "anomaly": torch.is_anomaly_enabled(),
        "threads": torch.get_num_threads(),
    }


def world(model: nn.Module, opt: torch.optim.Optimizer | None) -> dict[str, Any]:
    """Everything of the user's a diagnosis must leave bit-identical."""
    return {
        "model": model_digest(model),
        "optimizer": optimizer_digest(opt) if opt is not None else None,
        "rng": rng_digest(),
        "flags": flags_state(),
    }


class SmallConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.head = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.bn(self.conv(x))).flatten(1))


def trained_setup(
    n: int = 256, batch_size: int = 8, seed: int = 0
) -> tuple[nn.Module, torch.optim.Optimizer, DataLoader[Any], nn.Module]:
    """A conv net with state worth protecting: Adam moments, gradients, BN stats, a submodule in
    eval mode."""
    torch.manual_seed(seed)
    data = TensorDataset(torch.randn(n, 3, 8, 8), torch.randint(0, 10, (n,)))
    loader = DataLoader(data, batch_size=batch_size, shuffle=True)
    model = SmallConvNet()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    x, y = next(iter(loader))
    loss_fn(model(x), y).backward()
    opt.step()  # leaves moments in the optimizer and gradients on the parameters
    model.bn.eval()
    return model, opt, loader, loss_fn


class SleepyDataset(Dataset[tuple[torch.Tensor, int]]):
    """Each item waits like a file read or decode would: the host, not the model, is the limit."""

    def __init__(self, n: int = 512, delay_s: float = 0.004) -> None:
        self.n = n
        self.delay_s = delay_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(self.delay_s)
        return torch.full((16,), float(i % 7)), i % 4


def slow_worker_start(worker_id: int) -> None:
    """A worker_init_fn that takes as long as opening a dataset's files or connections would."""
    time.sleep(0.15)


class FailingDataset(Dataset[tuple[torch.Tensor, int]]):
    def __init__(self, n: int = 256, bad: int = 37) -> None:
        self.n = n
        self.bad = bad

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        if i == self.bad:
            raise ValueError(f"corrupt record {i}")
        return torch.ones(16), 0
