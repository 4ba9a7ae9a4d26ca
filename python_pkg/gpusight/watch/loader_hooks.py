"""The DataLoader's wrappers: time blocked waiting for the next batch, the epoch's start (making
the iterator, starting its workers), the loader's settings, and the user's line that built it."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Mapping
from threading import get_ident
from time import perf_counter_ns, thread_time_ns
from typing import Any

from .call_sites import constructor_site
from .collected import LoaderSeen
from .recorder import StepRecord
from .watch_state import WatchState, never_compiling

# Bounds on how far a loader's prefetch stretches the warm-up and a window given in steps.
MAX_LOADER_WARMUP = 32
MAX_LOADER_STEPS = 128
MAX_EPOCH_STARTS = 8
MAX_BATCH_SHAPES = 1024
SHAPED_ITEMS = 16

_is_compiling: Callable[[], bool] = never_compiling
"""``watch_state._is_compiling``, as this module's own global (``session._use_is_compiling``)."""


class LoaderHooks(WatchState):
    """The wrappers of the DataLoader and its iterator."""

    def _wrap_next(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        w = self

        @functools.wraps(orig)
        def __next__(it: Any) -> Any:
            rec = w._rec
            if _is_compiling() or get_ident() != w._tid or rec is None:
                return orig(it)
            w.no_grad.batch_taken()
            # In the main process (no workers) the fetch is the loading itself: the CPU time
            # of this thread meanwhile says whether loading computes or waits (the process's
            # would count other threads: torch's spinning OpenMP threads, the watch's own).
            c0 = thread_time_ns() if getattr(it, "_num_workers", None) == 0 else None
            t0 = perf_counter_ns()
            batch = None
            outer = w._fetching
            w._fetching = True
            try:
                batch = orig(it)
                return batch
            finally:
                w._fetching = outer
                t1 = perf_counter_ns()
                c1 = thread_time_ns() if c0 is not None else None
                cur = rec.current
                cur.data_ns += t1 - t0
                if batch is not None:
                    w._note_shape(cur, batch)
                if rec.recording_window:
                    rec.window.data_wait.append((t0, t1))
                seen = w.collected.loaders.get(id(it))
                if seen is None:
                    w.collected.loaders[id(it)] = seen = _loader_seen(it)
                    w._new_loader(seen)
                if seen.calls + seen.late == 0 or getattr(it, "_num_yielded", 2) == 1:
                    cur.epoch = True  # a first batch: a new epoch (persistent iterators too)
                    w.phases.first_batch(it, t1)
                    if len(seen.epoch_start_ns) < MAX_EPOCH_STARTS:
                        made = w._iter_made_ns.pop(id(it), 0)
                        seen.epoch_start_ns.append(made + t1 - t0)
                elif c0 is not None and c1 is not None:
                    seen.fetch_ns += t1 - t0
                    seen.fetch_cpu_ns += c1 - c0
                # An epoch's end (StopIteration) is no batch; the batches of the steps after
                # the measured ones are counted apart: no record counts those steps.
                if batch is not None:
                    if w._unrecorded:
                        seen.late += 1
                    else:
                        seen.calls += 1
                cur.overhead_ns += perf_counter_ns() - t1 + w.calibration.wrapper_ns

        return __next__

    def _note_shape(self, cur: StepRecord, batch: Any) -> None:
        """Mark the step whose batch has a shape not seen before in the run (the first aside);
        a loader of many shapes (text of every length) is marked up to ``MAX_BATCH_SHAPES``.
        The shape is every tensor's: a seq2seq batch's source and target lengths vary apart,
        and the decoder pays for a new target length as the encoder for a new source."""
        seen = self._batch_shapes
        if len(seen) >= MAX_BATCH_SHAPES:
            return
        shape = batch_shape(batch)
        if shape is None or shape in seen:
            return
        seen.add(shape)
        cur.new_shape = len(seen) > 1

    def _wrap_iter(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        """``iter(loader)``: starting the workers is the loader's time (its epoch start)."""
        w = self

        @functools.wraps(orig)
        def __iter__(dl: Any) -> Any:
            rec = w._rec
            if _is_compiling() or get_ident() != w._tid or rec is None:
                return orig(dl)
            t0 = perf_counter_ns()
            it = orig(dl)
            t1 = perf_counter_ns()
            if not w.no_grad.open:  # else an evaluation's loader (``no_grad_evals.py``)
                w.phases.epoch_begins(it, t0, sys._getframe(1))
            rec.current.data_ns += t1 - t0
            if rec.recording_window:
                rec.window.data_wait.append((t0, t1))
            w._iter_made_ns[id(it)] = t1 - t0
            rec.current.overhead_ns += perf_counter_ns() - t1 + w.calibration.wrapper_ns
            return it

        return __iter__

    def _wrap_loader_init(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        """Remember the user's line that built each DataLoader: a fix changes that call."""
        w = self

        @functools.wraps(orig)
        def __init__(dl: Any, *args: Any, **kwargs: Any) -> None:
            orig(dl, *args, **kwargs)
            if get_ident() != w._tid:
                return
            site = constructor_site(w.sources, (type(dl).__name__, "DataLoader"))
            if site is not None:
                w.collected.loader_sites.setdefault(id(getattr(dl, "dataset", None)), site)

        return __init__

    def _new_loader(self, seen: LoaderSeen) -> None:
        """A loader with workers: cover its prefetched batches and two of its rounds.

        Workers fill ``num_workers x prefetch_factor`` batches ahead while the script starts
        up; steps fed from that store look fast. The warm-up (when it has not ended yet) runs
        past them, and a window given in steps is stretched to two rounds of the workers, so a
        stall every ``num_workers`` steps is in it twice at least.
        """
        rec = self._rec
        if rec is None or not seen.num_workers or self._window is not None:
            return
        ahead = seen.num_workers * (seen.prefetch_factor or 2)
        if rec.completed < rec.warmup and ahead > rec.warmup:
            rec.warmup = min(MAX_LOADER_WARMUP, ahead)
            rec.current.phase = rec.phase_of(rec.current.index)
        if rec.steps is not None and rec.steps < 2 * ahead:
            wanted = min(MAX_LOADER_STEPS, 2 * ahead)
            if wanted > rec.steps:
                self.notes.append(
                    f"measured {wanted} steps instead of {rec.steps}: two rounds of the "
                    f"DataLoader's {seen.num_workers} workers x prefetch "
                    f"{seen.prefetch_factor or 2}"
                )
                rec.steps = wanted


def batch_shape(batch: Any) -> tuple[tuple[int, ...], ...] | None:
    """The shapes of the batch's tensors: the batch itself, or those in its tuple, list or dict
    and one level further (``(inputs, labels)`` with ``inputs`` a dict), ``SHAPED_ITEMS`` at
    most; None where it holds none there (a PyG Batch)."""
    shapes: list[tuple[int, ...]] = []
    for x in _members(batch):
        for y in _members(x) if isinstance(x, (Mapping, tuple, list)) else [x]:
            shape = getattr(y, "shape", None)  # torch.Size and numpy's shapes are tuples
            if isinstance(shape, tuple):
                shapes.append(shape)
            if len(shapes) >= SHAPED_ITEMS:
                return tuple(shapes)
    return tuple(shapes) if shapes else None


def _members(batch: Any) -> list[Any]:
    """A batch's parts: a dict's (Hugging Face's BatchEncoding, a UserDict) values, a tuple's
    or list's items (``SHAPED_ITEMS`` at most), else the batch itself."""
    if isinstance(batch, Mapping):
        return list(batch.values())[:SHAPED_ITEMS]
    if isinstance(batch, (tuple, list)):
        return list(batch[:SHAPED_ITEMS])
    return [batch]


def _loader_seen(it: Any) -> LoaderSeen:
    sampler = getattr(it, "_index_sampler", None)
    batch = getattr(sampler, "batch_size", None)
    try:
        per_epoch: int | None = len(it)
    except Exception:  # an IterableDataset without __len__
        per_epoch = None
    return LoaderSeen(
        batches_per_epoch=per_epoch,
        num_workers=_int_or_none(getattr(it, "_num_workers", None)),
        pin_memory=_bool_or_none(getattr(it, "_pin_memory", None)),
        batch_size=_int_or_none(batch),
        persistent_workers=_bool_or_none(getattr(it, "_persistent_workers", None)),
        prefetch_factor=_int_or_none(getattr(it, "_prefetch_factor", None)),
        dataset_id=id(getattr(it, "_dataset", None)),
        dataset_set_epoch=callable(getattr(getattr(it, "_dataset", None), "set_epoch", None)),
    )


def _int_or_none(v: Any) -> int | None:
    return int(v) if isinstance(v, int) and not isinstance(v, bool) else None


def _bool_or_none(v: Any) -> bool | None:
    return bool(v) if isinstance(v, bool) else None
