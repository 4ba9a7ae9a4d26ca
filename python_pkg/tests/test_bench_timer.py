"""gpusight.bench.timer: statistics against numpy, warm-up left out, the budget kept."""

from __future__ import annotations

import random
import time

import numpy as np
import pytest
from gpusight.bench.timer import Rotation, Timing, quantile, rate, summarize, time_fn


@pytest.mark.parametrize("n", [1, 2, 5, 10, 101])
def test_quantiles_match_numpy(n: int) -> None:
    rng = random.Random(n)
    values = [rng.lognormvariate(0, 1) for _ in range(n)]
    stats = summarize(values)
    assert stats.median == pytest.approx(float(np.median(values)))
    assert stats.p10 == pytest.approx(float(np.percentile(values, 10)))
    assert stats.p90 == pytest.approx(float(np.percentile(values, 90)))
    assert stats.mean == pytest.approx(float(np.mean(values)))
    assert (stats.min, stats.max, stats.n) == (min(values), max(values), n)
    for q in (0.0, 0.25, 0.333, 0.75, 1.0):
        assert quantile(values, q) == pytest.approx(float(np.quantile(values, q)))


def test_known_values() -> None:
    stats = summarize([5.0, 1.0, 4.0, 2.0, 3.0])
    assert (stats.median, stats.p10, stats.p90) == pytest.approx((3.0, 1.4, 4.6))
    assert stats.noise_pct == pytest.approx(100 * 3.2 / 3.0)


def test_bad_input_says_so() -> None:
    with pytest.raises(ValueError, match="no timings"):
        summarize([])
    with pytest.raises(ValueError, match="within"):
        quantile([1.0], 1.5)
    with pytest.raises(ValueError, match="at least 1"):
        time_fn(lambda i: None, repeats=0)


def test_rate_band_is_slow_to_fast() -> None:
    stats = summarize([1.0, 2.0, 2.0, 2.0, 4.0])
    value, (lo, hi) = rate(8.0, stats)
    assert value == 4.0
    assert lo < value < hi
    assert lo == pytest.approx(8.0 / stats.p90)
    assert hi == pytest.approx(8.0 / stats.p10)


def test_throughput_counts_slow_calls_the_median_leaves_out() -> None:
    # A clock that dips on every fourth call: the median sees only the fast calls.
    samples = (1.0, 1.0, 1.0, 2.0) * 5
    timing = Timing(
        samples_s=samples,
        stats=summarize(samples),
        warmup=0,
        clock="cuda_event",
        elapsed_s=25.0,
        budget_s=30.0,
        hit_budget=False,
    )
    at_median, _ = timing.rate(10.0)
    value, (lo, hi) = timing.throughput(10.0)
    assert at_median == 10.0
    assert value == pytest.approx(10.0 * len(samples) / sum(samples))  # 8.0: all the time counted
    assert value < at_median
    assert lo <= value <= hi


def test_warmup_calls_are_left_out() -> None:
    calls: list[int] = []

    def fn(i: int) -> None:
        calls.append(i)
        time.sleep(0.05 if i < 2 else 0.001)

    timing = time_fn(fn, warmup=2, repeats=8, min_repeats=8, budget_s=10.0)
    assert timing.warmup == 2
    assert len(timing.samples_s) == 8
    assert max(timing.samples_s) < 0.03  # neither slow warm-up call is in the samples
    assert calls == list(range(10))  # one running index across warm-up and timed calls


def test_warmup_seconds_extend_warmup() -> None:
    timing = time_fn(lambda i: time.sleep(0.005), warmup=1, warmup_s=0.06, repeats=3)
    assert timing.warmup >= 5
    # How long the warm-up lasted is kept: a benchmark labels its regime by it.
    assert 0.06 <= timing.warmup_s < 0.06 + 0.03
    assert timing.elapsed_s > timing.warmup_s


def test_monitor_is_only_for_device_batches() -> None:
    calls: list[int] = []
    timing = time_fn(lambda i: None, repeats=5, monitor=lambda: calls.append(1))
    assert timing.stats.n == 5 and calls == []  # host clocks have no batch in flight


def test_budget_is_kept() -> None:
    start = time.perf_counter()
    timing = time_fn(lambda i: time.sleep(0.02), warmup=1, repeats=1000, budget_s=0.3)
    elapsed = time.perf_counter() - start
    assert timing.hit_budget
    assert elapsed < 0.3 + 0.05
    assert 3 <= timing.stats.n < 1000


def test_min_repeats_beat_a_tiny_budget() -> None:
    timing = time_fn(
        lambda i: time.sleep(0.01), warmup=1, repeats=50, min_repeats=4, budget_s=0.001
    )
    assert timing.stats.n == 4


def test_warmup_takes_at_most_half_the_budget() -> None:
    timing = time_fn(lambda i: time.sleep(0.01), warmup=100, repeats=3, budget_s=0.2)
    assert timing.warmup < 15
    assert timing.stats.n == 3


def test_progress_can_interrupt() -> None:
    seen: list[float] = []

    def progress(fraction: float) -> None:
        seen.append(fraction)
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        time_fn(lambda i: None, warmup=0, repeats=10, progress=progress)
    assert seen == pytest.approx([0.1, 0.2, 0.3])


def test_rotation_cycles_through_sets() -> None:
    rot = Rotation(["a", "b", "c"])
    assert [rot(i) for i in range(7)] == ["a", "b", "c", "a", "b", "c", "a"]
    assert len(rot) == 3
    with pytest.raises(ValueError):
        Rotation([])
