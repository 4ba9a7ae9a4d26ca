"""gpusight.bench on a real CUDA device: every GPU row measured, and after an interrupt the
flags, RNG, device memory and pinned host memory are as they were. Skipped without CUDA."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import torch
from gpusight.bench import copies, launch, matmul, run_all
from gpusight.bench.flags import snapshot
from gpusight.bench.nvml import GpuNvml
from gpusight.bench.timer import time_fn

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def _host_current() -> dict[str, Any]:
    stats_fn = getattr(torch.cuda, "host_memory_stats", None)
    if stats_fn is None:
        return {}
    return {k: v for k, v in stats_fn().items() if k.endswith(".current")}


def _interrupt_at(prefix: str, after: float = 0.0) -> Any:
    def progress(stage: str, fraction: float) -> None:
        if stage.startswith(prefix) and fraction > after:
            raise KeyboardInterrupt

    return progress


def _interrupt_on_call(prefix: str, nth: int) -> Any:
    """Ctrl-C at the nth progress call of a stage, wherever the stage falls in the run."""
    seen: list[str] = []

    def progress(stage: str, fraction: float) -> None:
        if stage.startswith(prefix):
            seen.append(stage)
            if len(seen) == nth:
                raise KeyboardInterrupt

    return progress


def test_quick_run_measures_every_gpu_row() -> None:
    flags = snapshot()
    cuda_rng = torch.cuda.get_rng_state()
    rows = run_all(budget_s=8.0, quick=True)
    by_id = {r.id: r for r in rows}
    for bench_id in ("matmul.fp32", "matmul.bf16", "copy.h2d.pinned", "copy.d2d", "launch.eager"):
        row = by_id[bench_id]
        assert row.value is not None and row.value > 0, (bench_id, row.skipped)
    for row in rows:
        assert row.value is not None or row.skipped, row.id
    assert by_id["matmul.bf16"].value > by_id["matmul.fp32"].value  # type: ignore[operator]
    assert by_id["launch.graph"].value < by_id["launch.eager"].value  # type: ignore[operator]
    bf16 = by_id["matmul.bf16"].params or {}
    # A quick run cannot warm the GPU to its sustained rate, and says so.
    assert bf16["regime"] == "burst" and by_id["matmul.bf16"].label.endswith("short burst")
    nvml = GpuNvml(0)
    has_nvml = nvml.handle is not None
    nvml.close()
    if has_nvml:
        assert isinstance(bf16["sm_clock_mhz"], float) and bf16["sm_clock_mhz"] > 0
        assert isinstance(bf16["clock_events"], str) and bf16["nvml_samples"] > 0
    assert "driver_only_us" in (by_id["sync.synchronize"].params or {})
    assert snapshot() == flags
    assert torch.equal(torch.cuda.get_rng_state(), cuda_rng)


def test_interrupted_matmul_restores_flags_and_memory() -> None:
    flags = snapshot()
    torch.cuda.synchronize()
    allocated = torch.cuda.memory_allocated()
    with pytest.raises(KeyboardInterrupt):
        # The second call is the first timed batch: TF32 is switched on at that moment.
        matmul.run(budget_s=4.0, quick=True, progress=_interrupt_on_call("matmul tf32", 2))
    torch.cuda.synchronize()
    assert snapshot() == flags
    assert torch.cuda.memory_allocated() == allocated


def test_interrupted_copies_free_pinned_and_device_memory() -> None:
    threads = set(threading.enumerate())
    host = _host_current()
    torch.cuda.synchronize()
    allocated = torch.cuda.memory_allocated()
    with pytest.raises(KeyboardInterrupt):
        copies.run(budget_s=4.0, quick=True, progress=_interrupt_at("copy h2d pageable"))
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == allocated
    after = _host_current()
    for key, value in host.items():
        if "allocated" in key or "reserved" in key or "segment" in key:
            assert after.get(key, 0) <= value, (key, value, after.get(key))
    assert set(threading.enumerate()) == threads


def test_interrupted_launch_leaves_no_graph_memory() -> None:
    torch.cuda.synchronize()
    allocated = torch.cuda.memory_allocated()
    with pytest.raises(KeyboardInterrupt):
        launch.run(budget_s=2.0, quick=True, progress=_interrupt_at("launch graph", 0.0))
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == allocated


def test_event_clock_agrees_with_host_clock_on_long_kernels() -> None:
    a = torch.randn(4096, 4096, device="cuda")

    def mm(i: int) -> object:
        return a @ a

    events = time_fn(mm, clock="cuda_event", repeats=20, budget_s=2.0)
    host = time_fn(mm, clock="host_sync", repeats=20, budget_s=2.0)
    assert events.stats.median == pytest.approx(host.stats.median, rel=0.2)


def test_timed_batches_keep_the_device_busy() -> None:
    # The host reads NVML between polls while a batch runs; the next batch must already be
    # queued, or the device idles until the host notices (a power-capped GPU turns that idle
    # time into clock, and the "sustained" rate comes out too high).
    a = torch.randn(2048, 2048, device="cuda")  # ~0.3 ms: a batch of 64 lasts ~2 polls
    polls: list[float] = []

    def mm(i: int) -> object:
        return a @ a

    t = time_fn(
        mm,
        clock="cuda_event",
        repeats=1000,
        budget_s=30.0,
        monitor=lambda: polls.append(0.0),
        monitor_interval_s=0.01,
    )
    assert t.stats.n == 1000 and polls
    busy = sum(t.samples_s)
    timed_wall = t.elapsed_s - t.warmup_s
    # The first call runs alone (its length sizes the batches); the rest back to back, apart
    # from the few µs between one call's end event and the next one's begin (H200: 95.9 %
    # busy). Waiting for each batch before enqueuing the next left the device idle for half a
    # 10 ms poll per 22 ms batch on average: about 80 % busy.
    assert busy >= 0.9 * (timed_wall - 2 * t.samples_s[0]), (busy, timed_wall)
