"""The whole dataset kept on the GPU, batches indexed there: no loading, no host copies.

Measured only in the kernel (``gpusight.diagnose``), on the user's dataset: a re-run of a script
cannot move the script's dataset. It applies where the dataset fits in half the free device
memory and its items are fixed (the same index gives the same item twice: a copy kept on the
device would otherwise freeze the augmentation).
"""

from __future__ import annotations

from typing import Any

from .base import Arm, Knob, Local, LocalRow, Situation
from .loader import NOT_A_DATALOADER

FINDING = "load.memory_headroom"
MEMORY_SHARE = 0.5
"""Of free device memory the dataset may take."""


def dataset_bytes(ctx: Local) -> int | None:
    """The dataset's size on the device, from a cached batch's bytes per item (None: unknown)."""
    from .tensors import batch_len, batch_nbytes

    b = ctx.batches[0] if ctx.batches else None
    n = batch_len(b) if b is not None else None
    try:
        total = len(ctx.loader.dataset)
    except (TypeError, AttributeError):
        return None
    if not n:
        return None
    return int(batch_nbytes(b) / n * total)


def _same(a: Any, b: Any) -> bool:
    import torch

    from .tensors import tensors_of

    ta, tb = tensors_of(a), tensors_of(b)
    if len(ta) != len(tb):
        return False
    if not ta:
        return bool(a == b)
    pairs = zip(ta, tb, strict=True)
    return all(x.shape == y.shape and x.dtype == y.dtype and torch.equal(x, y) for x, y in pairs)


def items_deterministic(dataset: Any, probes: int = 2) -> bool | None:
    """Does fetching the same index twice give the same item? None when it cannot be told.

    Random augmentation (a random crop, flip or noise per fetch) gives different items: caching
    such a dataset would freeze it. The fetches draw from the global RNGs the augmentation uses
    (Python's, NumPy's, torch's); their states are put back afterwards.
    """
    import random

    import numpy as np
    import torch
    from torch.utils.data import IterableDataset

    try:
        n = len(dataset)
    except TypeError:
        return None
    if n < 1 or isinstance(dataset, IterableDataset):
        return None
    states = (random.getstate(), np.random.get_state(), torch.get_rng_state())
    try:
        for i in sorted({0, n // 2, n - 1})[:probes]:
            if not _same(dataset[i], dataset[i]):
                return False
        return True
    except Exception:
        return None
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])


def frozen_augmentation(dataset: Any) -> str | None:
    """Why caching would freeze the dataset's items (None: a copy kept on the device is what
    the loader would give)."""
    same = items_deterministic(dataset)
    if same is False:
        return (
            "the dataset gives a different item each time the same index is fetched (random "
            "augmentation): a copy kept on the GPU would freeze the augmentation"
        )
    if same is None:
        return "cannot tell whether the dataset's items are fixed (fetching an item failed)"
    return None


class DatasetOnDevice(Knob):
    name = "dataset_on_device"
    findings = (FINDING,)
    rerun = False

    ROW = LocalRow("dataset_on_gpu", "dataset kept on the GPU", FINDING, "loader",
                   input_bound=True)  # fmt: skip

    def not_planned(self, s: Situation) -> str:
        return (
            "measured only in the kernel (gpusight.diagnose): a re-run cannot move the "
            "script's dataset to the GPU"
        )

    def local_rows(self) -> tuple[LocalRow, ...]:
        return (self.ROW,)

    def local_arm_of(self, row: LocalRow, ctx: Local) -> Arm | str:
        if not ctx.cuda:
            return "no CUDA device"
        if not ctx.dataloader:
            return NOT_A_DATALOADER
        size = dataset_bytes(ctx)
        if size is None:
            return "the dataset has no length: cannot tell whether it fits on the GPU"
        frozen = frozen_augmentation(ctx.loader.dataset)
        if frozen:
            return frozen
        free, _ = ctx.torch.cuda.mem_get_info(ctx.device)
        if size > MEMORY_SHARE * free:
            return (
                f"the dataset ({size / 1e9:.1f} GB) does not fit in half the free GPU memory "
                f"({free / 1e9:.1f} GB)"
            )
        return Arm(self.name,
                   "whole dataset kept on the GPU, batches indexed there (no loading, no copies)",
                   {"source": "device"}, FINDING)  # fmt: skip

    def local_params(self, arm: Arm, ctx: Local) -> dict[str, Any]:
        free, _ = ctx.torch.cuda.mem_get_info(ctx.device)
        return {"dataset_gb": round((dataset_bytes(ctx) or 0) / 1e9, 2),
                "free_gb": round(free / 1e9, 1)}  # fmt: skip

    def local_outcome(self, row: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        keep: dict[str, Any] = {k: row[k] for k in ("dataset_gb", "free_gb") if k in row}
        return keep, [
            "Keeping the dataset on the GPU keeps its items as they are now: the same index gave "
            "the same item twice (no random augmentation was seen); any added later must run on "
            "the GPU."
        ]
