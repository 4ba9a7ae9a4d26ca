"""Timing a call the way a caller waits for it: :class:`Latency` (repeated timings and their
quantiles), :class:`Pair` (a what-if measured interleaved with its baseline), :func:`measure`
and :func:`interleaved`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..bench.timer import quantile, time_fn

REPEATS = 200
MIN_REPEATS = 5


@dataclass
class Latency:
    """Repeated timings of one call (ms), with the batch it carried."""

    batch: int
    samples_ms: list[float]

    @property
    def p50(self) -> float:
        return quantile(self.samples_ms, 0.5)

    @property
    def p99(self) -> float:
        return quantile(self.samples_ms, 0.99)

    @property
    def p10(self) -> float:
        return quantile(self.samples_ms, 0.1)

    @property
    def p90(self) -> float:
        return quantile(self.samples_ms, 0.9)

    @property
    def throughput(self) -> float:
        """Samples per second at the median latency."""
        return 1000.0 * self.batch / self.p50 if self.p50 > 0 else 0.0


@dataclass
class Pair:
    """A what-if measured interleaved with the baseline: (baseline, variant) samples."""

    base: Latency
    variant: Latency

    @property
    def speedup(self) -> float:
        return self.base.p50 / self.variant.p50 if self.variant.p50 > 0 else 0.0


def measure(fn: Callable[[], object], batch: int, device: torch.device, budget_s: float) -> Latency:
    """Time ``fn`` with the one timer: host clock around each call, the device synced after it
    (the latency a caller waits for its answer)."""
    timing = time_fn(
        lambda i: fn(),
        clock="host_sync" if device.type == "cuda" else "perf_counter",
        warmup=2,
        repeats=REPEATS,
        min_repeats=MIN_REPEATS,
        budget_s=max(budget_s, 1e-3),
        device=device if device.type == "cuda" else None,
    )
    return Latency(batch, [s * 1000.0 for s in timing.samples_s])


def interleaved(
    base: Callable[[], object],
    variant: Callable[[], object],
    batch: int,
    device: torch.device,
    budget_s: float,
    rounds: int = 2,
) -> Pair:
    """Baseline and variant in alternating blocks, so that drift (clocks, heat) hits both."""
    b: list[float] = []
    v: list[float] = []
    block = budget_s / (2 * rounds)
    for _ in range(rounds):
        v += measure(variant, batch, device, block).samples_ms
        b += measure(base, batch, device, block).samples_ms
    return Pair(Latency(batch, b), Latency(batch, v))
