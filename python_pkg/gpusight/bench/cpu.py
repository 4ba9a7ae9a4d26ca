"""CPU matmul throughput (fp32): the one benchmark that runs on every machine with torch.

Defined as ``2 n^3 / t``, t the median wall time of ``torch.mm`` on n x n fp32 inputs rotated
between two sets, with torch's intra-op thread count as the process has it
(``torch.get_num_threads()``, recorded as ``threads``): what the user's own CPU work gets.
"""

from __future__ import annotations

from typing import Any

from ..report import Benchmark
from .device import band, failed, finite, skipped
from .progress import Progress, Span
from .timer import time_fn

BENCH_ID = "cpu.matmul.fp32"
LABEL = "CPU matmul fp32"
UNIT = "GFLOP/s"


def run(
    *, budget_s: float = 2.0, quick: bool = False, progress: Progress | None = None, n: int = 0
) -> list[Benchmark]:
    try:
        import torch
    except ImportError:
        return [skipped(BENCH_ID, LABEL, UNIT, "torch is not installed")]
    span = Span(progress)
    threads = int(torch.get_num_threads())
    n = n or (512 if quick else 1024)
    sets = 2  # 2 x 2 x 4 MiB at n=1024: past most per-core caches
    box: dict[str, Any] = {}
    try:
        gen = torch.Generator().manual_seed(7)  # private: the user's RNG stays as it was
        for s in range(sets):
            box[f"a{s}"] = torch.randn(n, n, generator=gen)
            box[f"b{s}"] = torch.randn(n, n, generator=gen)

        def mm(i: int) -> object:
            s = i % sets
            return torch.mm(box[f"a{s}"], box[f"b{s}"])

        timing = time_fn(
            mm,
            clock="perf_counter",
            warmup=2,
            repeats=5 if quick else 20,
            min_repeats=3,
            budget_s=budget_s,
            progress=span.inner("cpu matmul"),
        )
    except Exception as exc:
        return [failed(BENCH_ID, LABEL, UNIT, exc)]
    finally:
        box.clear()
    value, (lo, hi) = timing.rate(2.0 * n**3 / 1e9)
    return [
        Benchmark(
            id=BENCH_ID,
            label=LABEL,
            value=finite(value),
            unit=UNIT,
            ceiling=None,
            ceiling_source=None,
            spread=band(lo, hi),
            repeats=timing.stats.n,
            params={
                "n": n,
                "threads": threads,
                "sets": sets,
                "clock": timing.clock,
                "definition": f"2*n^3 / median wall time of torch.mm, {threads} intra-op threads",
            },
        )
    ]
