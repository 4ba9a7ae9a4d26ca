"""The one timer every benchmark uses: warm-up, repetitions, median and noise band, a time budget.

Device work is asynchronous, so a GPU region is timed with CUDA events (``clock="cuda_event"``), or
with the host clock between two ``torch.cuda.synchronize()`` calls (``"host_sync"``: what the host
waits, launch cost included). CPU work uses ``time.perf_counter`` (``"perf_counter"``).

With ``clock="cuda_event"`` the warm-up enqueues calls in chunks of about 20 ms of device work
between synchronisations, so that the device stays loaded as in the timed part: a warm-up meant
to bring a GPU to its power-limited steady state must not let it idle between calls.

The statistics are pure functions, so they are tested on any machine. ``fn`` receives the running
call index, so that a benchmark can rotate among several input sets (see :class:`Rotation`): when
the inputs of one call fit in the L2 cache, repeating it over one buffer measures the cache.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

Clock = Literal["cuda_event", "host_sync", "perf_counter"]
T = TypeVar("T")

# Events enqueued per round trip: enough to keep the device busy, few enough to check the budget.
_EVENT_BATCH = 64
# Device work enqueued per warm-up chunk (cuda_event clock): the device idles only for the host's
# round trip between chunks, and the warm-up overshoots its time by at most this much.
_WARMUP_CHUNK_S = 0.02


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile with linear interpolation between order statistics (numpy's default)."""
    if not values:
        raise ValueError("quantile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be within [0, 1], got {q}")
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass(frozen=True)
class Stats:
    """Summary of repeated timings (seconds): median, the p10-p90 band, and the extremes."""

    median: float
    p10: float
    p90: float
    mean: float
    min: float
    max: float
    n: int

    @property
    def noise_pct(self) -> float:
        """Width of the p10-p90 band as a percentage of the median."""
        return 100.0 * (self.p90 - self.p10) / self.median if self.median > 0 else 0.0


def summarize(values: Sequence[float]) -> Stats:
    if not values:
        raise ValueError("no timings to summarize")
    vals = [float(v) for v in values]
    return Stats(
        median=quantile(vals, 0.5),
        p10=quantile(vals, 0.1),
        p90=quantile(vals, 0.9),
        mean=sum(vals) / len(vals),
        min=min(vals),
        max=max(vals),
        n=len(vals),
    )


def rate(work: float, stats: Stats) -> tuple[float, tuple[float, float]]:
    """Work per second at the median time, with its band: [work/p90, work/p10] (slow, fast)."""
    if stats.median <= 0:
        raise ValueError("median time must be positive")
    lo = work / stats.p90 if stats.p90 > 0 else math.inf
    hi = work / stats.p10 if stats.p10 > 0 else math.inf
    return work / stats.median, (lo, hi)


@dataclass(frozen=True)
class Timing:
    """What one call of :func:`time_fn` measured. ``samples_s`` excludes the warm-up calls."""

    samples_s: tuple[float, ...]
    stats: Stats
    warmup: int
    clock: Clock
    elapsed_s: float
    budget_s: float
    hit_budget: bool
    warmup_s: float = 0.0
    """Seconds the warm-up calls took (host clock, device synchronised at the end)."""

    def rate(self, work: float) -> tuple[float, tuple[float, float]]:
        return rate(work, self.stats)

    def throughput(self, work: float) -> tuple[float, tuple[float, float]]:
        """Work per second over all timed calls (``work / mean``), with the median's band.

        For calls run back to back this is the sustained rate: when the device's clock swings
        (a power-capped GPU), slow calls are as real as fast ones, and the median would leave
        them out.
        """
        if self.stats.mean <= 0:
            raise ValueError("mean time must be positive")
        _, band = rate(work, self.stats)
        return work / self.stats.mean, band


class Rotation(Generic[T]):
    """Cycle through input sets by call index: ``Rotation(sets)(i) -> sets[i % len(sets)]``."""

    def __init__(self, sets: Sequence[T]) -> None:
        if not sets:
            raise ValueError("Rotation needs at least one set")
        self.sets = list(sets)

    def __call__(self, index: int) -> T:
        return self.sets[index % len(self.sets)]

    def __len__(self) -> int:
        return len(self.sets)


def time_fn(
    fn: Callable[[int], object],
    *,
    clock: Clock = "perf_counter",
    warmup: int = 3,
    warmup_s: float = 0.0,
    repeats: int = 30,
    min_repeats: int = 3,
    budget_s: float = 1.0,
    device: Any = None,
    progress: Callable[[float], None] | None = None,
    monitor: Callable[[], object] | None = None,
    monitor_interval_s: float = 0.01,
) -> Timing:
    """Time ``fn(i)``: ``warmup`` calls (and at least ``warmup_s`` seconds of them) left out,
    then up to ``repeats`` timed calls, stopping early once ``budget_s`` (warm-up included) would
    be exceeded, but never with fewer than ``min_repeats``. Warm-up never takes more than half
    the budget. ``progress(fraction)`` is called after each timed call or batch of calls; an
    exception it raises (KeyboardInterrupt, say) ends the timing.

    ``monitor()`` (``cuda_event`` clock only) is called about every ``monitor_interval_s`` while
    a batch of timed calls runs on the device: the moment to read the GPU's clocks and power
    under the load being timed, with the host otherwise idle.
    """
    if repeats < 1 or min_repeats < 1:
        raise ValueError("repeats and min_repeats must be at least 1")
    min_repeats = min(min_repeats, repeats)
    sync: Callable[[], None] = _no_sync
    if clock in ("cuda_event", "host_sync"):
        sync = _cuda_sync(device)
    start = time.perf_counter()
    sync()
    calls = 0
    warmed = 0
    per_call: float | None = None
    while True:
        elapsed = time.perf_counter() - start
        if warmed >= warmup and elapsed >= warmup_s:
            break
        if warmed >= 1 and elapsed >= budget_s * 0.5:
            break
        chunk = 1
        if clock == "cuda_event" and per_call is not None:
            chunk = max(1, min(_EVENT_BATCH, int(_WARMUP_CHUNK_S / max(per_call, 1e-7))))
        t0 = time.perf_counter()
        for _ in range(chunk):
            fn(calls)
            calls += 1
        sync()  # so that the host clock sees the device's time, and warm-up ends before timing
        per_call = (time.perf_counter() - t0) / chunk
        warmed += chunk
    warmup_elapsed = time.perf_counter() - start

    if clock == "cuda_event":
        samples, calls, hit = _time_events(
            fn,
            calls,
            start,
            repeats,
            min_repeats,
            budget_s,
            device,
            progress,
            monitor,
            monitor_interval_s,
        )
    else:
        samples, calls, hit = _time_host(
            fn, calls, start, repeats, min_repeats, budget_s, sync, progress
        )
    return Timing(
        samples_s=tuple(samples),
        stats=summarize(samples),
        warmup=warmed,
        clock=clock,
        elapsed_s=time.perf_counter() - start,
        budget_s=budget_s,
        hit_budget=hit,
        warmup_s=warmup_elapsed,
    )


def _no_sync() -> None:
    return None


def _cuda_sync(device: Any) -> Callable[[], None]:
    import torch

    def sync() -> None:
        torch.cuda.synchronize(device)

    return sync


def _time_host(
    fn: Callable[[int], object],
    calls: int,
    start: float,
    repeats: int,
    min_repeats: int,
    budget_s: float,
    sync: Callable[[], None],
    progress: Callable[[float], None] | None,
) -> tuple[list[float], int, bool]:
    samples: list[float] = []
    while len(samples) < repeats:
        if len(samples) >= min_repeats:
            # Stop when the next call, at the median so far, would overrun the budget.
            expected = quantile(samples, 0.5)
            if time.perf_counter() - start + expected > budget_s:
                return samples, calls, True
        t0 = time.perf_counter()
        fn(calls)
        sync()
        samples.append(time.perf_counter() - t0)
        calls += 1
        if progress is not None:
            progress(len(samples) / repeats)
    return samples, calls, False


def _event(torch: Any) -> Any:
    return torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]


def _time_events(
    fn: Callable[[int], object],
    calls: int,
    start: float,
    repeats: int,
    min_repeats: int,
    budget_s: float,
    device: Any,
    progress: Callable[[float], None] | None,
    monitor: Callable[[], object] | None = None,
    monitor_interval_s: float = 0.01,
) -> tuple[list[float], int, bool]:
    """Timed calls in batches of events, two batches in flight: the host waits for the older
    batch while the device runs the newer one, so that the device never idles between batches.
    (Waiting for each batch before enqueuing the next let an H200 idle a few ms per 50 ms of fp8
    products; its power controller spent that slack on clock, and the rate came out ~4 % above
    a continuous load's.)"""
    import torch

    samples: list[float] = []
    pending: deque[list[tuple[Any, Any]]] = deque()
    queued = 0  # calls enqueued whose times are not read yet
    hit = False

    def collect() -> None:
        nonlocal queued
        batch = pending.popleft()
        queued -= len(batch)
        last = batch[-1][1]
        if monitor is not None:
            monitor()
            while not last.query():
                time.sleep(monitor_interval_s)
                monitor()
        last.synchronize()
        samples.extend(begin.elapsed_time(end) / 1e3 for begin, end in batch)
        if progress is not None:
            progress(len(samples) / repeats)

    while len(samples) + queued < repeats:
        if not samples:
            if pending:  # the first call, to learn its length
                collect()
                continue
            want = 1
        else:
            # Enqueue as many calls as the budget holds at the median so far (the calls still
            # in flight take their share first), in batches the device runs back to back.
            per_call = max(quantile(samples, 0.5), 1e-7)
            left = budget_s - (time.perf_counter() - start) - queued * per_call
            done = len(samples) + queued
            want = min(repeats - done, max(min_repeats - done, int(left / per_call)))
            if want <= 0:
                hit = True
                break
        batch = [(_event(torch), _event(torch)) for _ in range(min(want, _EVENT_BATCH))]
        for begin, end in batch:
            begin.record()
            fn(calls)
            end.record()
            calls += 1
        pending.append(batch)
        queued += len(batch)
        if len(pending) > 1:
            collect()
    while pending:
        collect()
    torch.cuda.synchronize(device)
    return samples, calls, hit
