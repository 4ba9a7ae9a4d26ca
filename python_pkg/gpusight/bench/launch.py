"""What a tiny kernel costs: launched one by one from Python (eager), replayed from a CUDA graph,
and what a round trip to the device costs (``torch.cuda.synchronize()``, ``.item()``).

The eager figure is the floor of a step made of many small ops: below it, the GPU waits for Python.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..report import Benchmark
from .device import (
    band,
    cuda_unavailable_reason,
    failed,
    finite,
    release_device_memory,
    resolve_device,
    skipped,
)
from .progress import Progress, Span
from .timer import Clock, time_fn

UNIT = "µs"
LABELS = {
    "launch.eager": "tiny kernel launched from Python (x.add_(1)), per kernel",
    "launch.graph": "tiny kernel replayed from a CUDA graph, per kernel",
    "sync.synchronize": "torch.cuda.synchronize() on an idle device",
    "sync.item": ".item() of a one-element CUDA tensor (copy + sync)",
}


def run(
    *,
    budget_s: float = 4.0,
    quick: bool = False,
    device: Any = None,
    progress: Progress | None = None,
) -> list[Benchmark]:
    reason = cuda_unavailable_reason()
    if reason is not None:
        return [skipped(k, label, UNIT, reason) for k, label in LABELS.items()]
    import torch

    index = resolve_device(device)
    span = Span(progress)
    per = budget_s / len(LABELS)
    kernels = 200 if quick else 1000
    calls = 200 if quick else 1000
    box: dict[str, Any] = {}
    rows: list[Benchmark] = []
    q = quick
    steps: list[tuple[str, Callable[[], Benchmark]]] = [
        ("launch.eager", lambda: _eager(torch, index, box, kernels, per, q, span.sub(0, 0.25))),
        ("launch.graph", lambda: _graph(torch, index, box, kernels, per, q, span.sub(0.25, 0.5))),
        ("sync.synchronize", lambda: _sync(torch, index, calls, per, q, span.sub(0.5, 0.75))),
        ("sync.item", lambda: _item(torch, index, box, calls, per, q, span.sub(0.75, 1))),
    ]
    try:
        with torch.cuda.device(index):
            for bench_id, step in steps:
                try:
                    rows.append(step())
                except Exception as exc:  # e.g. graph capture refused: the other rows still run
                    rows.append(failed(bench_id, LABELS[bench_id], UNIT, exc))
                finally:
                    box.clear()
    finally:
        box.clear()
        release_device_memory()
    return rows


def _row(bench_id: str, timing: Any, per_call: int, params: dict[str, Any]) -> Benchmark:
    stats = timing.stats
    scale = 1e6 / per_call
    return Benchmark(
        id=bench_id,
        label=LABELS[bench_id],
        value=finite(stats.median * scale),
        unit=UNIT,
        spread=band(stats.p10 * scale, stats.p90 * scale),
        repeats=stats.n,
        params={**params, "per_repeat": per_call, "clock": timing.clock},
    )


def _time(
    fn: Callable[[int], object],
    clock: Clock,
    index: int,
    budget: float,
    quick: bool,
    progress: Callable[[float], None],
) -> Any:
    return time_fn(
        fn,
        clock=clock,
        warmup=2,
        repeats=5 if quick else 20,
        min_repeats=3,
        budget_s=budget,
        device=index,
        progress=progress,
    )


def _eager(
    torch: Any, index: int, box: dict[str, Any], n: int, budget: float, quick: bool, span: Span
) -> Benchmark:
    box["x"] = torch.ones(1, device=f"cuda:{index}")

    def launches(i: int) -> object:
        x = box["x"]
        for _ in range(n):
            x.add_(1)
        return None

    # Host clock between synchronizations: what the Python loop costs, the GPU mostly idle.
    timing = _time(launches, "host_sync", index, budget, quick, span.inner("launch eager"))
    return _row("launch.eager", timing, n, {"op": "x.add_(1) on 1 element", "kernels": n})


def _graph(
    torch: Any, index: int, box: dict[str, Any], n: int, budget: float, quick: bool, span: Span
) -> Benchmark:
    box["x"] = torch.ones(1, device=f"cuda:{index}")
    # Warm up on a side stream before capture, as torch's CUDA-graph notes ask.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            box["x"].add_(1)
    torch.cuda.current_stream().wait_stream(side)
    box["graph"] = torch.cuda.CUDAGraph()
    with torch.cuda.graph(box["graph"]):
        for _ in range(n):
            box["x"].add_(1)
    torch.cuda.synchronize(index)

    def replay(i: int) -> object:
        box["graph"].replay()
        return None

    timing = _time(replay, "cuda_event", index, budget, quick, span.inner("launch graph"))
    return _row("launch.graph", timing, n, {"op": "x.add_(1) on 1 element", "kernels": n})


def _sync(torch: Any, index: int, n: int, budget: float, quick: bool, span: Span) -> Benchmark:
    def syncs(i: int) -> object:
        for _ in range(n):
            torch.cuda.synchronize(index)
        return None

    timing = _time(syncs, "perf_counter", index, budget, quick, span.inner("sync"))
    return _row("sync.synchronize", timing, n, {"calls": n})


def _item(
    torch: Any, index: int, box: dict[str, Any], n: int, budget: float, quick: bool, span: Span
) -> Benchmark:
    box["y"] = torch.ones(1, device=f"cuda:{index}")

    def items(i: int) -> object:
        y = box["y"]
        for _ in range(n):
            y.item()
        return None

    timing = _time(items, "perf_counter", index, budget, quick, span.inner("item"))
    return _row("sync.item", timing, n, {"calls": n})
