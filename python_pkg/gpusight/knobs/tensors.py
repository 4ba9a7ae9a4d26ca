"""A batch's tensors: walk them, count them, move, pin and join batches.

What both what-if drivers need of a batch (a tensor, or tuples, lists, namedtuples and dicts of
them): the in-process one (``whatif/``) on its cached batches, the re-run (``rerun/inject``) on the
user's model's inputs. Nothing here iterates a DataLoader.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch

Batch = Any


def map_tensors(batch: Batch, fn: Callable[[torch.Tensor], torch.Tensor]) -> Batch:
    """Apply ``fn`` to every tensor in a batch of tensors, tuples, lists, namedtuples and dicts."""
    if isinstance(batch, torch.Tensor):
        return fn(batch)
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # namedtuple
        return type(batch)(*(map_tensors(b, fn) for b in batch))
    if isinstance(batch, (tuple, list)):
        return type(batch)(map_tensors(b, fn) for b in batch)
    if isinstance(batch, dict):
        if type(batch) is dict:
            return {k: map_tensors(v, fn) for k, v in batch.items()}
        # A mapping class of its own (a framework's model output whose constructor takes
        # fields, a defaultdict): a copy of the same class, its values replaced one by one.
        out = copy.copy(batch)
        for k, v in batch.items():
            out[k] = map_tensors(v, fn)
        return out
    return batch


def tensors_of(batch: Batch) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []

    def grab(t: torch.Tensor) -> torch.Tensor:
        out.append(t)
        return t

    map_tensors(batch, grab)
    return out


def batch_nbytes(batch: Batch) -> int:
    return sum(t.numel() * t.element_size() for t in tensors_of(batch))


def batch_len(batch: Batch) -> int | None:
    """Samples in a batch: the leading size of its first tensor with a dimension."""
    for t in tensors_of(batch):
        if t.dim() > 0:
            return int(t.shape[0])
    return None


def is_pinned(batch: Batch) -> bool:
    ts = [t for t in tensors_of(batch) if t.device.type == "cpu"]
    return bool(ts) and all(t.is_pinned() for t in ts)


def moved(batch: Batch, device: torch.device, *, non_blocking: bool, layout: Any = None) -> Batch:
    """``batch`` on ``device``; its 4-d float tensors in memory format ``layout`` where given."""

    def move(t: torch.Tensor) -> torch.Tensor:
        t = t.to(device, non_blocking=non_blocking)
        if layout is not None and t.dim() == 4 and t.is_floating_point():
            t = t.contiguous(memory_format=layout)
        return t

    return map_tensors(batch, move)


def pin(batch: Batch) -> Batch:
    return map_tensors(batch, lambda t: t.pin_memory() if t.device.type == "cpu" else t)


def concat(batches: list[Batch]) -> Batch:
    """Join batches along the sample dimension (a batch ``len(batches)`` times larger)."""
    first = batches[0]
    leaves = [tensors_of(b) for b in batches]
    it = iter(range(len(leaves[0])))

    def join(t: torch.Tensor) -> torch.Tensor:
        i = next(it)
        if t.dim() == 0:
            return t
        return torch.cat([lv[i] for lv in leaves])

    return map_tensors(first, join)
