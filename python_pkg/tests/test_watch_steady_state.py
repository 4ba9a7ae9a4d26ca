"""Steady state vs. the host running ahead of the GPU: the numbers of the first H200 run.

``fp32_transformer`` on the H200: after the profiler window's closing sync the host enqueued
four steps at ~12.5 ms while each step's kernels needed ~63 ms of GPU time; then the launch
queue was full and every step took 63 ms. Its 3-step window saw 18 ms host steps, 98.8 %
busy, and only the kernels that ran during those 18 ms: gpusight called 32 ms of each step
launch overhead. These tests hold the method to the physics on plain data (no torch, no GPU).
"""

from __future__ import annotations

from typing import Any

from gpusight.rules.workload import (
    GpuWindow,
    WorkloadEvidence,
    analyse,
    steady_start,
)
from gpusight.watch.report_builder import busy_cross_check
from gpusight.watch.session import warmup_settled
from gpusight.watch.trace_analysis import Alignment, HostRecord, device_paced
from gpusight.watch.trace_analysis import analyse as analyse_trace

H200_STEPS = [14.447, 12.247, 12.591, 12.825, 46.546, 62.981, 63.037, 62.976, 63.096, 63.074]


def test_steady_start_drops_the_queue_filling_steps() -> None:
    # The four queue-filling steps and the partly filled 46.5 ms one after them.
    assert steady_start(H200_STEPS) == 5
    assert steady_start([10.0, 10.5, 9.8, 10.2, 10.1, 9.9]) == 0
    # A slow first step is not a transient of this kind (the median handles it).
    assert steady_start([200.0, 10.0, 10.0, 10.0, 10.0]) == 0
    # Never more than half the steps.
    assert steady_start([1.0, 1.0, 1.0, 1.0, 1.0, 9.0, 9.0, 9.0, 9.0, 9.0]) == 5
    assert steady_start([1.0, 9.0, 9.0]) == 0


def test_a_step_that_slows_down_over_the_run_is_no_transient() -> None:
    # What a CPU loop did (a GAN on this project's CPU machine): 2.9 ms steps early, 5.9 late.
    # Dropping the early ones made the report's step 24 % longer than the loop's own mean.
    drift = [2.9 + 3.0 * i / 299 for i in range(300)]
    assert steady_start(drift) == 0
    # Nor is any leading short step where no GPU ran: the host has no queue to fill.
    assert steady_start(H200_STEPS, on_gpu=False) == 0
    assert steady_start([1.0, 1.0, 1.0, 1.0, 1.0, 9.0, 9.0, 9.0, 9.0, 9.0], on_gpu=False) == 0


def test_device_paced() -> None:
    # The H200 window: 63 ms launched per 18 ms host step, GPU ~180 ms behind at the end.
    assert device_paced(63.0, 18.0, 180.0)
    # Host-bound: the GPU finishes shortly after the host; launched work < host step.
    assert not device_paced(5.0, 18.0, 0.2)
    # Compute-bound in steady state: the host blocks on the queue, host step = GPU step.
    assert not device_paced(63.0, 63.0, 400.0)
    assert not device_paced(0.0, 0.0, 0.0)


def test_warmup_settled() -> None:
    ms = 1_000_000
    assert not warmup_settled([900 * ms, 12 * ms, 12 * ms, 46 * ms])
    assert not warmup_settled([900 * ms, 12 * ms, 46 * ms, 63 * ms])
    assert warmup_settled([900 * ms, 46 * ms, 63 * ms, 63 * ms])
    assert warmup_settled([900 * ms, 12 * ms])  # too few steps to judge: go on
    assert warmup_settled([900 * ms])


def _ev(window: GpuWindow) -> WorkloadEvidence:
    n = len(H200_STEPS)
    return WorkloadEvidence(
        step_mode="optimizer",
        step_times_ms=list(H200_STEPS),
        data_wait_ms=[0.0] * n,
        host_copy_ms=[0.0] * n,
        framework_ms=[12.0] * n,
        cuda_available=True,
        cuda_devices=1,
        window=window,
        tf32_matmul=False,
        gpu_used=True,
        nvml_util_pct=58.0,
    )


def test_kernels_that_take_the_whole_step_are_not_launch_overhead() -> None:
    # What the window now reports for that run: the GPU's own split of the launched work.
    window = GpuWindow(
        steps=3,
        gpu=True,
        split_ms={"compute": 62.5, "launch_overhead": 0.3, "copy": 0.07},
        busy_pct=99.5,
        kernels_per_step=245.0,
        launches_per_step=245.0,
        median_kernel_us=120.0,
        matmul_ms=56.0,
        matmul_fp32_ms=50.5,
        matmul_tensor_core_ms=5.5,
        issued_gpu_ms=62.9,
        device_paced=True,
    )
    result = analyse(_ev(window))
    assert 62.9 <= result.step_time_ms <= 63.1  # the steady step, not the 54.8 ms median
    assert result.gpu_busy_pct is not None and result.gpu_busy_pct > 95.0
    assert result.verdict.bottleneck == "precision"
    ids = {f.id for f in result.findings}
    assert "load.amp_unused" in ids and "load.launch_bound" not in ids


def test_issued_work_overrides_a_host_side_split() -> None:
    # A host-interval split that shows mostly launch overhead, but the work the steps launched
    # needs 62 ms of GPU time per 63 ms step: the GPU sets the pace.
    window = GpuWindow(
        steps=3,
        gpu=True,
        split_ms={"compute": 18.0, "launch_overhead": 0.1},
        busy_pct=98.8,
        matmul_ms=16.2,
        matmul_fp32_ms=14.6,
        matmul_tensor_core_ms=1.6,
        issued_gpu_ms=62.0,
    )
    result = analyse(_ev(window))
    assert result.verdict.bottleneck in ("precision", "compute")
    assert result.verdict.bottleneck != "launch_overhead"


def test_device_paced_by_a_pageable_copy_is_memory_transfer() -> None:
    # H200 run 4, pageable_copy scenario: the GPU-side work each step launched (12.8 ms) is
    # nearly all a pageable host-to-device copy; the kernels take under 1 ms of a 13.9 ms step.
    window = GpuWindow(
        steps=3,
        gpu=True,
        split_ms={"compute": 0.97, "copy": 12.78, "launch_overhead": 0.1},
        busy_pct=5.6,
        issued_gpu_ms=12.8,
    )
    n = 10
    ev = WorkloadEvidence(
        step_mode="optimizer",
        step_times_ms=[13.9] * n,
        data_wait_ms=[0.0] * n,
        host_copy_ms=[0.0] * n,
        framework_ms=[1.0] * n,
        cuda_available=True,
        cuda_devices=1,
        window=window,
        tf32_matmul=False,
        gpu_used=True,
        nvml_util_pct=21.6,
    )
    result = analyse(ev)
    assert result.verdict.bottleneck == "memory_transfer"


def _k(name: str, ts: float, dur: float, corr: int) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "pid": 0,
        "tid": 7,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "stream": 7, "correlation": corr},
    }


def _launch(ts: float, corr: int) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": "cudaLaunchKernel",
        "pid": 1,
        "tid": 100,
        "ts": ts,
        "dur": 5.0,
        "args": {"correlation": corr},
    }


def test_window_counts_the_work_each_step_launched() -> None:
    # Three 2 ms host steps each launch four 1.5 ms kernels (6 ms of GPU work per step): the
    # GPU runs them back to back until 18 ms, long after the host's last step ended at 6 ms.
    ev: list[dict[str, Any]] = []
    corr = 0
    gpu_t = 0.0
    for step in range(3):
        for i in range(4):
            corr += 1
            ev.append(_launch(step * 2000.0 + i * 400.0, corr))
            ev.append(_k("volta_sgemm_128x64_nn", gpu_t + 10.0, 1490.0, corr))
            gpu_t += 1500.0
    ms = 1_000_000
    host = HostRecord(steps=[(0, 2 * ms), (2 * ms, 4 * ms), (4 * ms, 6 * ms)])
    stats = analyse_trace(
        {"traceEvents": ev}, Alignment(perf_ns=0, trace_us=0.0), host, main_tid=100
    )
    assert stats is not None and stats.device_paced
    assert abs(stats.issued_gpu_ms - 5.96) < 0.01 if stats.issued_gpu_ms else False
    assert abs(stats.kernels_per_step - 4.0) < 1e-9
    assert abs(stats.split_ms["compute"] - 5.96) < 0.01
    assert stats.split_ms["launch_overhead"] < 0.1
    assert stats.busy_pct is not None and stats.busy_pct > 99.0
    assert abs(stats.gpu_behind_ms - 12.0) < 0.01


def test_busy_cross_check() -> None:
    assert busy_cross_check(99.0, 99.0, 95.0) is None
    assert busy_cross_check(None, None, 50.0) is None
    note = busy_cross_check(32.5, 98.8, 97.0)
    assert note is not None and "NVML" in note
