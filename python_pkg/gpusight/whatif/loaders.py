"""Batches and DataLoaders: walk a batch's tensors, clone a DataLoader with other settings.

The user's DataLoader is never iterated: gpusight builds a clone with the same dataset, sampler and
settings (so persistent workers or a half-consumed iterator on the user's object stay as they were).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, IterableDataset

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


def to_device(
    batch: Batch, device: torch.device, *, non_blocking: bool, channels_last: bool = False
) -> Batch:
    def move(t: torch.Tensor) -> torch.Tensor:
        t = t.to(device, non_blocking=non_blocking)
        if channels_last and t.dim() == 4 and t.is_floating_point():
            t = t.contiguous(memory_format=torch.channels_last)
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


def _same(a: Any, b: Any) -> bool:
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
