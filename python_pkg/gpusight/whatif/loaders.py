"""Loaders as the kernel's what-if handles them: what kind, their generators, their workers'
shutdown and failures.

A clone with a change's DataLoader arguments is ``knobs/dataloader.py``'s; a batch's tensors are
walked in ``knobs/tensors.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader


def is_dataloader(obj: object) -> bool:
    return isinstance(obj, DataLoader)


def loader_generators(loader: object) -> list[torch.Generator]:
    """The torch.Generators a loader or its samplers draw from (their state is the user's)."""
    found: list[torch.Generator] = []
    candidates = [loader]
    for attr in ("sampler", "batch_sampler"):
        sub = getattr(loader, attr, None)
        if sub is not None:
            candidates.append(sub)
            inner = getattr(sub, "sampler", None)
            if inner is not None:
                candidates.append(inner)
    for c in candidates:
        g = getattr(c, "generator", None)
        if isinstance(g, torch.Generator) and all(g is not f for f in found):
            found.append(g)
    return found


def shutdown(it: Iterator[Any] | None) -> None:
    """Stop a DataLoader iterator's workers now, not whenever the garbage collector runs."""
    stop = getattr(it, "_shutdown_workers", None)
    if callable(stop):
        stop()


def is_reiterable(obj: object) -> bool:
    """False for one-shot iterators (generators): iterating them would eat the user's batches.

    Decided without calling ``iter()``: a DataLoader's iterator draws its seed from the RNG.
    """
    return isinstance(obj, Iterable) and not isinstance(obj, Iterator)


def worker_failure(exc: BaseException) -> bool:
    """Errors of the worker machinery (killed, pickling, shared memory), not the dataset's."""
    text = str(exc)
    # Not "Caught ValueError in DataLoader worker process 0": that is the dataset's own error.
    markers = (
        "exited unexpectedly",
        "is killed by signal",
        "Can't pickle",
        "Can't get attribute",
        "cannot pickle",
        "shared memory",
        "Too many open files",
        "bus error",
    )
    return isinstance(exc, (RuntimeError, OSError, AttributeError, TypeError)) and any(
        m in text for m in markers
    )
