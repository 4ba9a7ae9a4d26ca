"""DataLoaders: clone one with other settings, read its settings and generators.

A batch's tensors are walked in ``knobs/tensors.py``.

The user's DataLoader is never iterated: gpusight builds a clone with the same dataset, sampler and
settings (so persistent workers or a half-consumed iterator on the user's object stay as they were).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, IterableDataset

# --- DataLoader clones --------------------------------------------------------------------------

_LOADER_PARAMS = tuple(p for p in inspect.signature(DataLoader.__init__).parameters if p != "self")


def is_dataloader(obj: object) -> bool:
    return isinstance(obj, DataLoader)


def loader_settings(dl: DataLoader[Any]) -> dict[str, Any]:
    """The keyword arguments that rebuild ``dl`` (same dataset, sampler, collate and workers)."""
    kwargs: dict[str, Any] = {}
    for name in _LOADER_PARAMS:
        if name in ("shuffle", "sampler", "batch_sampler", "batch_size", "drop_last"):
            continue
        if hasattr(dl, name):
            kwargs[name] = getattr(dl, name)
    if isinstance(dl.dataset, IterableDataset):
        kwargs["batch_size"] = dl.batch_size
        kwargs["drop_last"] = dl.drop_last
    elif dl.batch_size is not None:
        # The BatchSampler was made by the DataLoader: rebuild it, so the batch size can change.
        kwargs["sampler"] = dl.sampler
        kwargs["batch_size"] = dl.batch_size
        kwargs["drop_last"] = dl.drop_last
    else:
        kwargs["batch_sampler"] = dl.batch_sampler
        kwargs["batch_size"] = None
    if kwargs.get("pin_memory_device") == "":
        kwargs.pop("pin_memory_device")
    return kwargs


def clone_loader(dl: DataLoader[Any], **overrides: Any) -> DataLoader[Any]:
    kwargs = loader_settings(dl)
    kwargs.update(overrides)
    if kwargs.get("num_workers", 0) == 0:
        # Worker-only settings are errors without workers.
        kwargs["prefetch_factor"] = None
        kwargs["persistent_workers"] = False
        kwargs["multiprocessing_context"] = None
    return DataLoader(**kwargs)


def can_resize_batches(dl: DataLoader[Any]) -> bool:
    return dl.batch_size is not None


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
