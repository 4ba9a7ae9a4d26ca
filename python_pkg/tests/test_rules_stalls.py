"""Stalls in a step-time series (rules/stalls.py) and how the watch's rules use them."""

from __future__ import annotations

import pytest
from gpusight.rules.stalls import find_stalls, workers_to_keep_up
from gpusight.rules.workload import (
    GpuWindow,
    LoaderInfo,
    WorkloadEvidence,
    analyse,
    breakdown,
    step_time,
)

# The public ResNet-18 loop with 4 workers that the median fooled (ms per step, H200).
BURSTY = [53.0, 53.0, 58.0, 634.0, 53.0, 53.0, 124.0, 611.0, 53.0, 55.0, 52.0, 620.0] * 3


def test_a_stall_every_num_workers_steps_is_named_with_its_period() -> None:
    waits = [t - 52.0 if t > 100 else 0.02 for t in BURSTY]
    s = find_stalls(BURSTY, waits, [], num_workers=4, prefetch_factor=2)
    assert s is not None
    assert s.period_steps == 4
    assert s.cause == "loader_workers"
    assert 540 <= s.stall_ms <= 590
    assert s.share_pct > 60.0
    # The 124 ms step is slow, but not one of the 600 ms stalls.
    assert 6 not in s.steps and 3 in s.steps and 7 in s.steps
    assert "num_workers=4" in s.text


def test_same_period_without_waiting_for_data_is_host_work() -> None:
    s = find_stalls(BURSTY, [0.0] * len(BURSTY), [], num_workers=4)
    assert s is not None and s.cause == "host" and s.period_steps == 4


def test_stalls_at_epoch_starts() -> None:
    times = ([400.0] + [20.0] * 9) * 4
    waits = ([380.0] + [0.1] * 9) * 4
    s = find_stalls(times, waits, [0, 10, 20, 30], num_workers=8)
    assert s is not None and s.cause == "epoch_start" and s.period_steps == 10


def test_even_steps_and_rare_hiccups_are_not_stalls() -> None:
    assert find_stalls([10.0, 10.4, 9.8, 10.1] * 10) is None
    # One GC pause in 40 steps costs under a tenth of the window.
    assert find_stalls([10.0] * 39 + [40.0]) is None
    # Irregular stalls are found, without a period.
    times = [10.0] * 40
    for i in (3, 5, 17, 30, 31):
        times[i] = 60.0
    s = find_stalls(times)
    assert s is not None and s.period_steps is None


def test_two_of_every_four_steps_is_period_four() -> None:
    # What 4 workers gave on the H200 (bursty_loader): two slow steps, then two fast ones.
    times = [79.4, 82.4, 3.5, 3.2, 54.5, 43.9, 3.2, 3.0, 81.0, 56.2, 2.8, 2.3] * 5
    times[20] = 5.8  # and a little jitter
    waits = [t - 3.0 if t > 10 else 0.01 for t in times]
    s = find_stalls(times, waits, [], num_workers=4)
    assert s is not None and s.period_steps == 4 and s.per_period == 2
    assert s.cause == "loader_workers"
    assert "2 of every 4 steps" in s.text


def test_workers_to_keep_up() -> None:
    # 4 workers, mean step 190 ms, 53 ms without the wait: a batch takes a worker ~760 ms,
    # so ~22 workers with half again to spare; 16 cores cap it at 15.
    got = workers_to_keep_up(4, 190.0, 53.0, 140.0, cpu_count=16)
    assert got is not None
    workers, step = got
    assert workers == 15
    assert step == pytest.approx(max(53.0, 760.0 / 15))
    # Loading in the main process: the wait is the batch's cost.
    assert workers_to_keep_up(0, 100.0, 40.0, 60.0, cpu_count=2) == (2, 40.0)
    assert workers_to_keep_up(0, 0.0, 0.0, 0.0, cpu_count=8) is None


def _bursty_evidence(window_wait_ms: float) -> WorkloadEvidence:
    n = len(BURSTY)
    # The profiler window's three steps fell between stalls: 53 ms, 40 ms of kernels each.
    window = GpuWindow(
        steps=3,
        gpu=True,
        split_ms={"compute": 40.0, "launch_overhead": 5.0, "other_cpu": 8.0},
        data_wait_host_ms=window_wait_ms,
        busy_pct=75.0,
        kernels_per_step=300.0,
        launches_per_step=300.0,
        median_kernel_us=80.0,
    )
    return WorkloadEvidence(
        step_mode="optimizer",
        step_times_ms=list(BURSTY),
        data_wait_ms=[t - 52.0 if t > 100 else 0.02 for t in BURSTY],
        host_copy_ms=[0.0] * n,
        framework_ms=[45.0] * n,
        cuda_available=True,
        cuda_devices=1,
        window=window,
        loader=LoaderInfo(num_workers=4, pin_memory=True, batch_size=256, prefetch_factor=2),
        cpu_count=16,
        gpu_used=True,
        nvml_util_pct=24.0,
    )


def test_a_bursty_loader_is_the_bottleneck_not_the_median_step() -> None:
    ev = _bursty_evidence(window_wait_ms=0.016)
    mean = sum(BURSTY) / len(BURSTY)
    assert step_time(ev) == pytest.approx(mean)
    split = breakdown(ev)
    assert sum(split.values()) == pytest.approx(mean)
    # The window saw no waiting; the run's data wait counts in full, not scaled by it.
    assert split["data_wait"] > 0.6 * mean
    res = analyse(ev)
    assert res.verdict.bottleneck == "input_pipeline"
    assert res.gpu_busy_pct is not None and res.gpu_busy_pct < 30.0
    assert "every 4th step stalls" in res.verdict.summary
    top = res.findings[0]
    assert top.id == "load.input_bound" and top.severity == "critical"
    assert "every 4th step waits" in top.title
    assert "num_workers=15" in (top.fix.code or "")
    assert res.stall is not None and res.stall.period_steps == 4
    # The estimate rests on the loader's rate at 15 workers: bounded by the step without wait.
    assert top.impact.speedup is not None and 2.0 < top.impact.speedup < mean / 50.0


def test_every_other_step_waiting_is_the_loaders_not_the_hosts() -> None:
    # Two workers: half the steps stall, so a median wait would sit between the two kinds of
    # step and hide the loader; the typical wait is the fast steps'.
    times = [100.0, 15.0] * 6
    waits = [85.0, 0.1] * 6
    s = find_stalls(times, waits, [], num_workers=2)
    assert s is not None and s.period_steps == 2
    assert s.cause == "loader_workers" and s.data_share > 0.9
