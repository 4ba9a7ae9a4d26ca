"""The DataLoader as the loader knobs and the batch knob change it on the kernel's copies: its
settings read, the arguments a change sets, and a clone built with them.

The user's DataLoader is never iterated: the in-process what-if builds a clone with the same
dataset, sampler and settings, so persistent workers or a half-consumed iterator on the user's
object stay as they were. (A re-run takes the same arguments through ``loader.patch_loader``.)
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from torch.utils.data import DataLoader, IterableDataset

from .loader import LOADER_KEYS, workers_change

_PARAMS = tuple(p for p in inspect.signature(DataLoader.__init__).parameters if p != "self")
# Set by the batch sampler the DataLoader builds from them: rebuilt below, so the batch can change.
_SAMPLING = ("shuffle", "sampler", "batch_sampler", "batch_size", "drop_last")


def workers(dl: Any) -> int:
    """The worker processes ``dl`` loads with (0: the main process)."""
    return int(getattr(dl, "num_workers", 0) or 0)


def batch_of(dl: Any) -> int | None:
    """The batch ``dl`` builds, None where a batch sampler of the user's makes the batches."""
    bs = getattr(dl, "batch_size", None)
    return bs if isinstance(bs, int) and not isinstance(bs, bool) else None


def keeps_workers(dl: Any) -> bool:
    """``dl``'s workers live across epochs: a new iterator reuses them."""
    return bool(getattr(dl, "persistent_workers", False))


def can_resize_batches(dl: DataLoader[Any]) -> bool:
    return batch_of(dl) is not None


def batch_change(n: int) -> dict[str, int]:
    """The DataLoader argument that sets a batch of ``n``."""
    return {"batch_size": n}


def arguments(
    changes: Mapping[str, Any], batch: int | None = None, *, settings: bool = True
) -> dict[str, Any]:
    """The DataLoader arguments a change sets: its loader keys (unless not ``settings``), and
    ``batch_factor`` times ``batch`` (the user's batch) as the batch size where it grows it."""
    out = {k: changes[k] for k in LOADER_KEYS if k in changes} if settings else {}
    factor = int(changes.get("batch_factor", 1))
    if factor > 1 and batch:
        out.update(batch_change(batch * factor))
    return out


def settings(dl: DataLoader[Any]) -> dict[str, Any]:
    """The keyword arguments that rebuild ``dl`` (same dataset, sampler, collate and workers)."""
    kwargs: dict[str, Any] = {
        name: getattr(dl, name) for name in _PARAMS if name not in _SAMPLING and hasattr(dl, name)
    }
    if isinstance(dl.dataset, IterableDataset):
        kwargs.update(batch_size=dl.batch_size, drop_last=dl.drop_last)
    elif dl.batch_size is not None:
        # The BatchSampler was made by the DataLoader: rebuild it, so the batch size can change.
        kwargs.update(sampler=dl.sampler, batch_size=dl.batch_size, drop_last=dl.drop_last)
    else:
        # The user's own batch sampler makes the batches; torch wants batch_size left at its
        # default then (it reads None as a loader of single items).
        kwargs.update(batch_sampler=dl.batch_sampler)
    if kwargs.get("pin_memory_device") == "":
        kwargs.pop("pin_memory_device")
    return kwargs


def clone(
    dl: DataLoader[Any],
    changes: Mapping[str, Any] | None = None,
    *,
    on_workers: int | None = None,
) -> DataLoader[Any]:
    """A DataLoader like ``dl`` with the change's arguments (``arguments``: its batch factor on
    ``dl``'s batch), on ``on_workers`` workers where given."""
    kwargs = settings(dl)
    kwargs.update(arguments(changes or {}, batch_of(dl)))
    if on_workers is not None:
        kwargs.update(workers_change(on_workers))
    if not kwargs.get("num_workers"):
        # Worker-only settings are errors without workers.
        kwargs.update(prefetch_factor=None, persistent_workers=False, multiprocessing_context=None)
    return DataLoader(**kwargs)
