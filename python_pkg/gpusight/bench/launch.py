"""What a tiny kernel costs: launched one by one from Python (eager), replayed from a CUDA graph,
and what a round trip to the device costs (``torch.cuda.synchronize()``, ``.item()``).

The eager figure is the floor of a step made of many small ops: below it, the GPU waits for Python.

Each row is one defined quantity (also in its params, ``definition``), per call or per kernel:

- ``launch.eager``: host time per ``x.add_(1)`` (one element) launched from a Python loop of N,
  the device keeping up; host clock around the loop and a final synchronize, divided by N.
- ``launch.graph``: time per kernel while a CUDA graph of N such kernels is replayed back to back
  (the steady state of a loop that replays a captured step): CUDA events around R replays,
  divided by R x N. It is a throughput, so it includes whatever paces the replays: the device
  running the kernels, or the host submitting a large graph if that is slower (events around
  a single replay would show the device's part only, and read lower when the host is the
  limit). A replay that starts cold (after other work, an L2 flush) takes longer: that is a
  different quantity.
- ``sync.synchronize``: host time of one ``torch.cuda.synchronize()``, written as user code
  writes it (no argument, the benchmarked GPU current), on an idle device: torch's Python
  wrapper (which looks up the current device) plus the driver's round trip. Host clock around
  N back-to-back calls, divided by N. ``driver_only_us`` in the params is the C++ call alone.
- ``sync.item``: host time of ``.item()`` on a one-element CUDA tensor, idle device (a
  device-to-host copy and a stream synchronisation); host clock around N calls, divided by N.

Each timed sample is one block of N calls; the value is the median over blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
# Replays per timed call of launch.graph: enough that the gap between replays counts.
GRAPH_REPLAYS = 10
LABELS = {
    "launch.eager": "tiny kernel launched from Python (x.add_(1)), per kernel",
    "launch.graph": "tiny kernel replayed from a CUDA graph, per kernel",
    "sync.synchronize": "torch.cuda.synchronize() on an idle device, per call",
    "sync.item": ".item() of a one-element CUDA tensor (copy + sync), per call",
}
DEFINITIONS = {
    "launch.eager": (
        "host time per x.add_(1) launched from a Python loop of N, device keeping up; "
        "host clock around the loop and a final synchronize, / N"
    ),
    "launch.graph": (
        "time per kernel replaying a CUDA graph of N x.add_(1) kernels back to back "
        "(steady-state throughput, device or host submission, whichever paces it); CUDA "
        "events around R replays, / (R x N)"
    ),
    "sync.synchronize": (
        "host time of one torch.cuda.synchronize() (no argument, Python wrapper + driver "
        "round trip) on an idle device; host clock around N back-to-back calls, / N"
    ),
    "sync.item": (
        "host time of y.item() on a one-element CUDA tensor, idle device; host clock "
        "around N back-to-back calls, / N"
    ),
}


def run(
    *,
    budget_s: float = 4.0,
    quick: bool = False,
    device: Any = None,
    progress: Progress | None = None,
    only: Sequence[str] | None = None,
) -> list[Benchmark]:
    """Rows launch.eager, launch.graph, sync.synchronize and sync.item (``only``: a subset)."""
    wanted = [k for k in LABELS if only is None or k in only]
    reason = cuda_unavailable_reason()
    if reason is not None:
        return [skipped(k, LABELS[k], UNIT, reason) for k in wanted]
    import torch

    index = resolve_device(device)
    span = Span(progress)
    per = budget_s / max(len(wanted), 1)
    kernels = 200 if quick else 1000
    calls = 200 if quick else 1000
    box: dict[str, Any] = {}
    rows: list[Benchmark] = []
    q = quick
    parts = {k: span.sub(i / len(wanted), (i + 1) / len(wanted)) for i, k in enumerate(wanted)}
    runners: dict[str, Callable[[], Benchmark]] = {
        "launch.eager": lambda: _eager(torch, index, box, kernels, per, q, parts["launch.eager"]),
        "launch.graph": lambda: _graph(torch, index, box, kernels, per, q, parts["launch.graph"]),
        "sync.synchronize": lambda: _sync(torch, index, calls, per, q, parts["sync.synchronize"]),
        "sync.item": lambda: _item(torch, index, box, calls, per, q, parts["sync.item"]),
    }
    steps = [(k, runners[k]) for k in wanted]
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
        params={
            **params,
            "per_repeat": per_call,
            "clock": timing.clock,
            "definition": DEFINITIONS[bench_id],
        },
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
        graph = box["graph"]
        for _ in range(GRAPH_REPLAYS):
            graph.replay()
        return None

    timing = _time(replay, "cuda_event", index, budget, quick, span.inner("launch graph"))
    return _row(
        "launch.graph",
        timing,
        n * GRAPH_REPLAYS,
        {
            "op": "x.add_(1) on 1 element",
            "kernels": n,
            "replays": f"{GRAPH_REPLAYS} back to back per timed call",
        },
    )


def _sync(torch: Any, index: int, n: int, budget: float, quick: bool, span: Span) -> Benchmark:
    # As user code calls it: no argument. run() made `index` the current device, so this is
    # the benchmarked GPU; with an argument, torch skips the current-device lookup (cheaper,
    # and not what a training loop pays).
    synchronize = torch.cuda.synchronize

    def syncs(i: int) -> object:
        for _ in range(n):
            synchronize()
        return None

    timing = _time(syncs, "perf_counter", index, budget * 0.8, quick, span.inner("sync"))
    params: dict[str, Any] = {"calls": n, "stmt": "torch.cuda.synchronize()"}
    driver = getattr(torch._C, "_cuda_synchronize", None)
    if driver is not None:  # the C++ call alone: what is left once Python is taken out

        def driver_syncs(i: int) -> object:
            for _ in range(n):
                driver()
            return None

        alone = time_fn(driver_syncs, warmup=1, repeats=5, min_repeats=3, budget_s=budget * 0.2)
        params["driver_only_us"] = finite(alone.stats.median * 1e6 / n)
    return _row("sync.synchronize", timing, n, params)


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
    return _row("sync.item", timing, n, {"calls": n, "stmt": "y.item()"})
