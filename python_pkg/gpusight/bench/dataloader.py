"""DataLoader throughput: samples/s across num_workers, then prefetch_factor, pin_memory and
persistent_workers around the best, each configuration bounded in time and the sweep as a whole.

A configuration whose worker crashes (a Dataset raising inside a worker, /dev/shm too small) ends
with its error recorded; the sweep goes on. Given a DataLoader, the sweep reuses its dataset,
batch size, collate_fn, sampler and worker settings on loaders of its own: the user's loader, its
sampler and generator are never iterated, and the global RNG states are restored afterwards.
Worker processes and pin-memory threads are shut down on every exit, Ctrl-C included.
"""

from __future__ import annotations

import copy
import os
import random
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..report import Benchmark
from .device import finite
from .progress import Progress, Span

SHM_HINT = "if /dev/shm is small, use --shm-size or num_workers=0"
DEFAULT_BATCH_SIZE = 64
UNIT = "samples/s"


@dataclass(frozen=True)
class LoaderConfig:
    num_workers: int
    pin_memory: bool = False
    persistent_workers: bool = False
    prefetch_factor: int | None = None
    """None: DataLoader's default (2 per worker when num_workers > 0)."""

    def label(self) -> str:
        parts = [f"num_workers={self.num_workers}"]
        if self.prefetch_factor is not None:
            parts.append(f"prefetch_factor={self.prefetch_factor}")
        if self.pin_memory:
            parts.append("pin_memory=True")
        if self.persistent_workers:
            parts.append("persistent_workers=True")
        return ", ".join(parts)

    @property
    def effective_prefetch(self) -> int | None:
        if self.num_workers == 0:
            return None
        return self.prefetch_factor if self.prefetch_factor is not None else 2


@dataclass
class ConfigResult:
    """One configuration's measurement. ``samples_per_s`` is the steady rate (first batch of each
    epoch left out); ``restart_s`` the wait for the first batch of the second epoch."""

    config: LoaderConfig
    samples_per_s: float | None = None
    samples: int = 0
    batches: int = 0
    epochs: int = 0
    first_batch_s: float | None = None
    restart_s: float | None = None
    elapsed_s: float = 0.0
    budget_s: float = 0.0
    error: str | None = None
    skipped: str | None = None


def available_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def worker_counts(cpus: int) -> list[int]:
    """0, 1, 2, 4, ... up to ``cpus``, and ``cpus`` itself."""
    counts = [0]
    n = 1
    while n <= cpus:
        counts.append(n)
        n *= 2
    if counts[-1] != cpus and cpus > 0:
        counts.append(cpus)
    return counts


def crash_message(exc: BaseException, num_workers: int) -> str:
    """A one-line account of what ended a configuration, with what to do about it."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    head = lines[0] if lines else ""
    tail = lines[-1] if len(lines) > 1 else ""
    if head.startswith("Caught ") and tail:
        # A worker's exception, re-raised in the main process with its traceback as the message.
        where = head[len("Caught ") :].rstrip(".")
        where = where.split(" in ", 1)[1] if " in " in where else where
        summary = f"{tail} (in {where})"
    else:
        summary = f"{type(exc).__name__}: {head}" if head else type(exc).__name__
    summary = summary[:300]
    if num_workers > 0:
        return f"worker crashed: {summary} — {SHM_HINT}"
    return f"dataset raised: {summary}"


def _clone_generator(gen: Any) -> Any:
    import torch

    if not isinstance(gen, torch.Generator):
        return gen
    clone = torch.Generator(device=gen.device)
    clone.set_state(gen.get_state())
    return clone


def _copy_sampler(sampler: Any) -> Any:
    """A shallow copy with its own generator (and inner sampler), so iterating it leaves the
    user's sampler as it was. A sampler that cannot be copied is used as is."""
    try:
        clone = copy.copy(sampler)
    except Exception:
        return sampler
    if getattr(clone, "generator", None) is not None:
        try:
            clone.generator = _clone_generator(clone.generator)
        except Exception:
            pass
    inner = getattr(clone, "sampler", None)
    if inner is not None and inner is not clone:
        try:
            clone.sampler = _copy_sampler(inner)
        except Exception:
            pass
    return clone


@dataclass
class _Source:
    """What every benchmark DataLoader is built from."""

    dataset: Any
    batch_size: int | None
    batched: bool
    kwargs: dict[str, Any] = field(default_factory=dict)
    sampler: Any = None
    batch_sampler: Any = None
    notes: list[str] = field(default_factory=list)
    """What the sweep could not honour (e.g. a batch_size next to the loader's batch_sampler)."""

    def build(self, config: LoaderConfig, hang_timeout_s: float) -> Any:
        from torch.utils.data import DataLoader

        kw = dict(self.kwargs)
        if self.batch_sampler is not None:
            kw["batch_sampler"] = _copy_sampler(self.batch_sampler)
        else:
            kw["batch_size"] = self.batch_size
            if self.sampler is not None:
                kw["sampler"] = _copy_sampler(self.sampler)
        if "generator" in kw:
            kw["generator"] = _clone_generator(kw["generator"])
        kw["num_workers"] = config.num_workers
        kw["pin_memory"] = config.pin_memory
        if config.num_workers > 0:
            kw["persistent_workers"] = config.persistent_workers
            if config.prefetch_factor is not None:
                kw["prefetch_factor"] = config.prefetch_factor
            # A hung worker must end its configuration, not the sweep.
            kw["timeout"] = max(float(kw.get("timeout") or 0.0), hang_timeout_s)
        else:
            kw.pop("multiprocessing_context", None)  # refused without workers
            kw["timeout"] = 0
        return DataLoader(self.dataset, **kw)


def _source(obj: Any, batch_size: int | None) -> _Source:
    from torch.utils.data import DataLoader, IterableDataset

    if not isinstance(obj, DataLoader):
        return _Source(
            dataset=obj,
            batch_size=batch_size or DEFAULT_BATCH_SIZE,
            batched=True,
        )
    dl = obj
    iterable = isinstance(dl.dataset, IterableDataset)
    kwargs: dict[str, Any] = {
        "collate_fn": dl.collate_fn,
        "worker_init_fn": dl.worker_init_fn,
        "multiprocessing_context": dl.multiprocessing_context,
        "timeout": dl.timeout,
    }
    if dl.generator is not None:
        kwargs["generator"] = dl.generator
    if getattr(dl, "in_order", True) is False:
        kwargs["in_order"] = False
    src = _Source(dataset=dl.dataset, batch_size=None, batched=True, kwargs=kwargs)
    if dl.batch_size is not None:  # automatic batching over dl.sampler
        src.batch_size = batch_size or dl.batch_size
        kwargs["drop_last"] = dl.drop_last
        if not iterable:
            src.sampler = dl.sampler
    elif dl.batch_sampler is not None:  # the user's own batch sampler
        src.batch_sampler = dl.batch_sampler
        if batch_size is not None:
            src.notes.append("batch_size ignored: the DataLoader has its own batch_sampler")
    else:  # no automatic batching: one item at a time
        src.batched = False
        if not iterable:
            src.sampler = dl.sampler
    return src


def _batch_len(batch: Any, default: int) -> int:
    shape = getattr(batch, "shape", None)
    if shape is not None and len(shape) > 0:
        return int(shape[0])
    if isinstance(batch, (list, tuple)) and batch:
        return _batch_len(batch[0], default)
    if isinstance(batch, dict) and batch:
        return _batch_len(next(iter(batch.values())), default)
    return default


def _shutdown(iterator: Any) -> None:
    stop = getattr(iterator, "_shutdown_workers", None)
    if callable(stop):
        stop()
    # torch closes its index queues but does not wait for their feeder threads, which
    # then outlive the benchmark for a moment; wait briefly so none is left behind.
    for queue in getattr(iterator, "_index_queues", None) or ():
        feeder = getattr(queue, "_thread", None)
        if isinstance(feeder, threading.Thread) and feeder is not threading.current_thread():
            feeder.join(timeout=1.0)


def _save_rng() -> dict[str, Any]:
    import torch

    saved: dict[str, Any] = {"torch": torch.random.get_rng_state(), "random": random.getstate()}
    np = sys.modules.get("numpy")
    if np is not None:
        saved["numpy"] = np.random.get_state()
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        saved["cuda"] = torch.cuda.get_rng_state_all()
    return saved


def _restore_rng(saved: dict[str, Any]) -> None:
    import torch

    torch.random.set_rng_state(saved["torch"])
    random.setstate(saved["random"])
    if "numpy" in saved:
        sys.modules["numpy"].random.set_state(saved["numpy"])
    if "cuda" in saved:
        torch.cuda.set_rng_state_all(saved["cuda"])


def measure(
    source: _Source,
    config: LoaderConfig,
    budget_s: float,
    progress: Callable[[float], None] | None = None,
) -> ConfigResult:
    """Iterate one configuration for ``budget_s``: the first epoch gets 60 % of it, so that a
    second epoch shows the restart cost (what persistent_workers saves)."""
    result = ConfigResult(config=config, budget_s=budget_s)
    default = (source.batch_size or 1) if source.batched else 1
    start = time.perf_counter()
    deadline = start + budget_s
    steady_samples = 0
    steady_time = 0.0
    last_report = start
    loader: Any = None
    iterator: Any = None
    try:
        loader = source.build(config, hang_timeout_s=max(20.0, 5 * budget_s))
        while time.perf_counter() < deadline:
            epoch_end = start + 0.6 * budget_s if result.epochs == 0 else deadline
            epoch_start = time.perf_counter()
            iterator = iter(loader)
            prev: float | None = None
            while True:
                try:
                    batch = next(iterator)
                except StopIteration:
                    break
                now = time.perf_counter()
                n = _batch_len(batch, default) if source.batched else 1
                del batch
                result.batches += 1
                result.samples += n
                if prev is None:
                    if result.epochs == 0:
                        result.first_batch_s = now - epoch_start
                    elif result.restart_s is None:
                        result.restart_s = now - epoch_start
                else:
                    steady_samples += n
                    steady_time += now - prev
                prev = now
                if progress is not None and now - last_report >= 0.1:
                    last_report = now
                    progress(min((now - start) / budget_s, 1.0))
                if now >= epoch_end:
                    break
            result.epochs += 1
            if not config.persistent_workers:
                _shutdown(iterator)
            iterator = None
            if prev is None:
                break  # an empty epoch: nothing more to learn
    except Exception as exc:
        result.error = crash_message(exc, config.num_workers)
    finally:
        _shutdown(iterator)
        if loader is not None:
            _shutdown(getattr(loader, "_iterator", None))
            loader._iterator = None
        result.elapsed_s = time.perf_counter() - start
    if result.error is None:
        if steady_time > 0 and steady_samples > 0:
            result.samples_per_s = steady_samples / steady_time
        elif result.samples and result.elapsed_s > 0:
            result.samples_per_s = result.samples / result.elapsed_s
    if progress is not None:
        progress(1.0)
    return result


def _best(results: Sequence[ConfigResult]) -> ConfigResult | None:
    ok = [r for r in results if r.samples_per_s is not None]
    return max(ok, key=lambda r: r.samples_per_s or 0.0) if ok else None


def sweep(
    loader_or_dataset: Any,
    *,
    budget_s: float = 30.0,
    batch_size: int | None = None,
    progress: Progress | None = None,
    config_budget_s: float | None = None,
    num_workers: Sequence[int] | None = None,
    prefetch_factors: Sequence[int] = (4,),
    pin_memory: bool | None = None,
    persistent_workers: bool = True,
) -> list[ConfigResult]:
    """Measure configurations in stages: num_workers (0, 1, 2, 4, ... CPUs); then, around the
    best, each of ``prefetch_factors``, pin_memory=True (when CUDA is there, unless
    ``pin_memory`` says otherwise) and persistent_workers=True."""
    import torch

    source = _source(loader_or_dataset, batch_size)
    counts = list(num_workers) if num_workers is not None else worker_counts(available_cpus())
    try_pin = pin_memory if pin_memory is not None else torch.cuda.is_available()
    planned = len(counts) + len(prefetch_factors) + int(bool(try_pin)) + int(persistent_workers)
    span = Span(progress)
    start = time.perf_counter()
    results: list[ConfigResult] = []

    def run(config: LoaderConfig) -> ConfigResult:
        left = budget_s - (time.perf_counter() - start)
        share = left / max(planned - len(results), 1)
        per = min(config_budget_s, share) if config_budget_s is not None else share
        done = len(results) / planned
        sub = span.sub(done, min((len(results) + 1) / planned, 1.0))
        stage = f"loader: {config.label()}"
        sub(stage, 0.0)
        if per < 0.05:
            result = ConfigResult(config, skipped="not run: the time budget was spent")
        else:
            result = measure(source, config, per, sub.inner(stage))
        results.append(result)
        return result

    saved = _save_rng()
    try:
        for n in counts:
            run(LoaderConfig(num_workers=n))
        best = _best(results)
        if best is not None and best.config.num_workers > 0:
            for factor in prefetch_factors:
                if factor != best.config.effective_prefetch:
                    run(replace(best.config, prefetch_factor=factor))
        best = _best(results)
        if try_pin and best is not None:
            run(replace(best.config, pin_memory=True))
        best = _best(results)
        if persistent_workers and best is not None and best.config.num_workers > 0:
            run(replace(best.config, persistent_workers=True))
    finally:
        _restore_rng(saved)
    span("loader: done", 1.0)
    return results


def _config_params(config: LoaderConfig) -> dict[str, Any]:
    return {
        "num_workers": config.num_workers,
        "pin_memory": config.pin_memory,
        "persistent_workers": config.persistent_workers,
        "prefetch_factor": config.effective_prefetch,
    }


def _point(x: float, r: ConfigResult) -> dict[str, Any]:
    label = r.error or r.skipped or r.config.label()
    return {"x": x, "y": finite(r.samples_per_s), "label": label}


def _errors(results: Sequence[ConfigResult]) -> dict[str, Any]:
    return {f"error: {r.config.label()}": r.error for r in results if r.error}


def _base_results(results: Sequence[ConfigResult]) -> list[ConfigResult]:
    """The num_workers sweep's points: no other setting changed."""
    return [
        r
        for r in results
        if r.config.prefetch_factor is None
        and not r.config.pin_memory
        and not r.config.persistent_workers
    ]


def _num_workers_row(
    base: list[ConfigResult], first_error: str | None, common: dict[str, Any]
) -> Benchmark:
    best_base = _best(base)
    return Benchmark(
        id="loader.num_workers",
        label="DataLoader samples/s by num_workers",
        value=finite(best_base.samples_per_s) if best_base else None,
        unit=UNIT,
        repeats=len(base),
        params={
            **common,
            "best_num_workers": best_base.config.num_workers if best_base else None,
            **_errors(base),
        },
        skipped=None if best_base else f"every configuration failed: {first_error}",
        series=[_point(r.config.num_workers, r) for r in base],
    )


def _setting_row(
    flag: str, points: list[tuple[float, ConfigResult]], why_not: str, common: dict[str, Any]
) -> Benchmark:
    """The row of one setting's values (``points``: value, result), its best in the params."""
    measured = [(x, r) for x, r in points if r.samples_per_s is not None]
    top = max(measured, key=lambda p: p[1].samples_per_s or 0.0) if measured else None
    return Benchmark(
        id=f"loader.{flag}",
        label=f"DataLoader samples/s by {flag}",
        value=finite(top[1].samples_per_s) if top else None,
        unit=UNIT,
        repeats=len(points),
        params={
            **common,
            f"best_{flag}": top[0] if top else None,
            **_errors([r for _, r in points]),
        },
        skipped=None if len(points) > 1 and top else why_not,
        series=[_point(x, r) for x, r in points] or None,
    )


def _prefetch_row(
    results: Sequence[ConfigResult], best_base: ConfigResult | None, common: dict[str, Any]
) -> Benchmark:
    if best_base is not None and best_base.config.num_workers > 0:
        w = best_base.config.num_workers
        pf = [
            r
            for r in results
            if r.config.num_workers == w
            and not r.config.pin_memory
            and not r.config.persistent_workers
        ]
        return _setting_row(
            "prefetch_factor",
            sorted(((float(r.config.effective_prefetch or 2), r) for r in pf), key=lambda p: p[0]),
            "no other prefetch_factor was measured",
            common,
        )
    return Benchmark(
        id="loader.prefetch_factor",
        label="DataLoader samples/s by prefetch_factor",
        value=None,
        unit=UNIT,
        skipped="the best num_workers is 0: prefetch_factor applies to worker processes",
    )


def _pin_memory_row(
    results: Sequence[ConfigResult], best_all: ConfigResult | None, common: dict[str, Any]
) -> Benchmark:
    pinned = [r for r in results if r.config.pin_memory and not r.config.persistent_workers]
    if pinned:
        twin = [r for r in results if r.config == replace(pinned[0].config, pin_memory=False)]
        return _setting_row(
            "pin_memory",
            [(0.0, r) for r in twin] + [(1.0, pinned[0])],
            "pin_memory=False was not measured alongside",
            common,
        )
    return Benchmark(
        id="loader.pin_memory",
        label="DataLoader samples/s by pin_memory",
        value=None,
        unit=UNIT,
        skipped="no CUDA device: pin_memory has no effect"
        if not results or best_all is not None
        else "no configuration ran",
    )


def _persistent_row(results: Sequence[ConfigResult], common: dict[str, Any]) -> Benchmark:
    """The wait for an epoch's first batch after the first epoch, with and without."""
    persistent = [r for r in results if r.config.persistent_workers]
    if not persistent:
        return Benchmark(
            id="loader.persistent_workers",
            label="DataLoader wait for the first batch of an epoch after the first",
            value=None,
            unit="ms",
            skipped="the best num_workers is 0: persistent_workers applies to worker processes",
        )
    p = persistent[0]
    twin = [r for r in results if r.config == replace(p.config, persistent_workers=False)]
    without = twin[0].restart_s if twin else None
    return Benchmark(
        id="loader.persistent_workers",
        label="DataLoader wait for the first batch of an epoch after the first",
        value=finite(p.restart_s * 1e3) if p.restart_s is not None else None,
        unit="ms",
        repeats=1,
        params={
            **common,
            "restart_ms_without": finite(without * 1e3) if without is not None else None,
            "samples_per_s": finite(p.samples_per_s),
            **_errors([p]),
        },
        skipped=(
            None
            if p.restart_s is not None
            else (p.error or "the budget allowed only one epoch: no restart to time")
        ),
        series=[
            {"x": 0, "y": finite(without * 1e3) if without is not None else None},
            {"x": 1, "y": finite(p.restart_s * 1e3) if p.restart_s is not None else None},
        ],
    )


def _best_row(
    results: Sequence[ConfigResult],
    best_all: ConfigResult | None,
    first_error: str | None,
    common: dict[str, Any],
) -> Benchmark:
    best_params: dict[str, Any] = {**common}
    if best_all is not None:
        best_params.update(_config_params(best_all.config))
        best_params["first_batch_ms"] = (
            finite(best_all.first_batch_s * 1e3) if best_all.first_batch_s is not None else None
        )
        best_params["configurations"] = len(results)
        best_params["failed"] = sum(1 for r in results if r.error)
    return Benchmark(
        id="loader.best",
        label="DataLoader, best configuration measured",
        value=finite(best_all.samples_per_s) if best_all else None,
        unit=UNIT,
        repeats=best_all.batches if best_all else None,
        params=best_params,
        skipped=None if best_all else f"every configuration failed: {first_error}",
    )


def to_benchmarks(results: Sequence[ConfigResult], batch_size: int | None) -> list[Benchmark]:
    """Rows loader.num_workers, loader.prefetch_factor, loader.pin_memory,
    loader.persistent_workers and loader.best (the best configuration in its params)."""
    base = _base_results(results)
    best_all = _best(results)
    first_error = next((r.error for r in results if r.error), None)
    common: dict[str, Any] = {"batch_size": batch_size}
    return [
        _num_workers_row(base, first_error, common),
        _prefetch_row(results, _best(base), common),
        _pin_memory_row(results, best_all, common),
        _persistent_row(results, common),
        _best_row(results, best_all, first_error, common),
    ]


def loader(
    loader_or_dataset: Any,
    budget_s: float = 30.0,
    batch_size: int | None = None,
    progress: Progress | None = None,
    *,
    config_budget_s: float | None = None,
    num_workers: Sequence[int] | None = None,
    prefetch_factors: Sequence[int] = (4,),
    pin_memory: bool | None = None,
    persistent_workers: bool = True,
) -> list[Benchmark]:
    """Benchmark a DataLoader (or a Dataset) across worker settings within ``budget_s`` seconds.

    Returns Benchmark rows: ``loader.num_workers`` (samples/s per worker count, as series),
    ``loader.prefetch_factor``, ``loader.pin_memory``, ``loader.persistent_workers`` (epoch
    restart wait, ms) and ``loader.best`` (the best configuration in its params). A crashing
    configuration is recorded on its point (label) and in params as ``error: <config>``.
    """
    results = sweep(
        loader_or_dataset,
        budget_s=budget_s,
        batch_size=batch_size,
        progress=progress,
        config_budget_s=config_budget_s,
        num_workers=num_workers,
        prefetch_factors=prefetch_factors,
        pin_memory=pin_memory,
        persistent_workers=persistent_workers,
    )
    rows = to_benchmarks(results, _effective_batch_size(loader_or_dataset, batch_size))
    notes = _source(loader_or_dataset, batch_size).notes
    if notes:
        for row in rows:
            row.params = {**(row.params or {}), "note": "; ".join(notes)}
    return rows


def _effective_batch_size(obj: Any, batch_size: int | None) -> int | None:
    if batch_size is not None:
        return batch_size
    from torch.utils.data import DataLoader

    if isinstance(obj, DataLoader):
        return obj.batch_size
    return DEFAULT_BATCH_SIZE


__all__ = [
    "ConfigResult",
    "LoaderConfig",
    "crash_message",
    "loader",
    "measure",
    "sweep",
    "to_benchmarks",
    "worker_counts",
]
