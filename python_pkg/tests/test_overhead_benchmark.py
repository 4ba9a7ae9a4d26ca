"""benchmarks/cost/overhead.py's logic, without timing: result parsing, ABBA order, sizing, summary,
and that a scenario call puts ``sys.argv`` back. Speed targets live in the benchmark itself."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest
from bench_support import BENCHMARKS, load_benchmark


@pytest.fixture(scope="module")
def ov() -> ModuleType:
    return load_benchmark("cost.overhead")


def test_last_result_line_wins_and_noise_is_ignored(ov: ModuleType) -> None:
    first = {"scenario": "a", "median_step_ms": 1.5}
    last = {"scenario": "a", "median_step_ms": 2.25}
    out = "\n".join(
        [
            "loading...",
            "SCENARIO_RESULT " + json.dumps(first),
            "epoch 1 done",
            "SCENARIO_RESULT " + json.dumps(last),
            "bye",
        ]
    )
    assert ov.scenario_result(out) == last
    assert ov.scenario_result("no result here\n") is None
    assert ov.scenario_result("SCENARIO_RESULT {not json") is None
    assert ov.scenario_result("SCENARIO_RESULT [1, 2]") is None


def test_rounds_are_abba(ov: ModuleType) -> None:
    order = ov.abba(4)
    assert [m for _, m in order] == [
        "bare", "watched", "watched", "bare", "bare", "watched", "watched", "bare",
    ]  # fmt: skip
    assert [r for r, _ in order] == [0, 0, 1, 1, 2, 2, 3, 3]
    # Each round holds one of each, so the medians compare like with like.
    for r in range(4):
        assert sorted(m for rr, m in order if rr == r) == ["bare", "watched"]
    assert ov.abba(0) == []
    # More rounds continue the pattern where it left off.
    assert ov.abba(2, first=4) == [(4, "bare"), (4, "watched"), (5, "watched"), (5, "bare")]
    assert ov.abba(4) + ov.abba(2, first=4) == ov.abba(6)


def test_paired_overhead_compares_each_round_with_itself(ov: ModuleType) -> None:
    # The machine slows down from round to round; within a round watched costs 2 %.
    runs = [
        (0, "bare", 10.0), (0, "watched", 10.2),
        (1, "watched", 15.3), (1, "bare", 15.0),
        (2, "bare", 20.0), (2, "watched", 20.4),
        (3, "watched", 9.0),  # its bare run is missing: left out
    ]  # fmt: skip
    assert ov.paired_pct(runs) == pytest.approx(2.0)
    assert ov.paired_pct([]) is None


def test_timed_steps_fill_the_target_within_bounds(ov: ModuleType) -> None:
    assert ov.timed_steps(2.0, 0.5) == 250
    assert ov.timed_steps(0.01, 0.5) == ov.MAX_TIMED
    assert ov.timed_steps(650.0, 0.5) == ov.MIN_TIMED
    assert ov.timed_steps(0.0, 0.5) == ov.MAX_TIMED
    assert ov.timed_steps(float("nan"), 0.5) == ov.MAX_TIMED


def test_argv_asks_for_the_cpu_only_without_cuda(ov: ModuleType) -> None:
    assert ov.scenario_argv("s.py", 30, 5, cuda=True) == ["s.py", "--iters", "30", "--warmup", "5"]
    assert ov.scenario_argv("s.py", 30, 5, cuda=False)[-2:] == ["--device", "cpu"]


def test_summary_overhead_noise_and_self(ov: ModuleType) -> None:
    s = ov.summarize([10.0, 10.5, 9.5, 10.0], [10.2, 10.3, 10.1, 10.4], [0.5, None, 0.7])
    assert s["bare_ms"] == 10.0
    assert s["watched_ms"] == pytest.approx(10.25)
    assert s["overhead_pct"] == pytest.approx(2.5)
    assert s["noise_pct"] == pytest.approx(10.0)  # (10.5 - 9.5) / 10
    assert s["self_pct"] == pytest.approx(0.6)
    empty = ov.summarize([], [], [])
    assert empty["overhead_pct"] is None and empty["self_pct"] is None


def test_table_lists_every_scenario_and_its_status(ov: ModuleType) -> None:
    rows = [
        {"scenario": "tiny_batch", "bare_ms": 1.0, "watched_ms": 1.01, "overhead_pct": 1.0},
        {"scenario": "healthy", "status": "skipped (needs CUDA)"},
    ]
    text = ov.table(rows)
    assert "tiny_batch" in text and "1.00" in text
    assert "skipped (needs CUDA)" in text


def test_scenario_call_restores_argv_and_captures_stdout(ov: ModuleType) -> None:
    before = list(sys.argv)
    with pytest.raises(RuntimeError), ov.scenario_call(["s.py", "--iters", "3"]) as out:
        assert sys.argv == ["s.py", "--iters", "3"]
        print("SCENARIO_RESULT " + json.dumps({"median_step_ms": 1.0}))
        raise RuntimeError("the scenario failed")
    assert sys.argv == before
    assert ov.scenario_result(out.getvalue()) == {"median_step_ms": 1.0}


def test_changed_names_what_differs(ov: ModuleType) -> None:
    assert ov.changed({"a": 1, "b": 2}, {"a": 1, "b": 3, "c": 0}) == ["b", "c"]
    assert ov.changed({"a": 1}, {"a": 1}) == []


def test_a_scenario_runs_bare_and_watched_in_process_and_nothing_stays_patched(
    ov: ModuleType,
) -> None:
    import torch

    scenarios = str(BENCHMARKS / "scenarios")
    sys.path.insert(0, scenarios)
    try:
        import unbatched_inference

        runner = ov.Runner(torch, cuda=False, gpusight_warmup=1, scenario_warmup=3)
        path = Path(unbatched_inference.__file__)
        before = ov.restorable(torch)
        row = ov.measure_scenario(runner, unbatched_inference, path, iters=8, rounds=1)
        row["iters"] = 8
        ov.more_rounds(runner, unbatched_inference, path, row, rounds=1)
    finally:
        sys.path.remove(scenarios)
    assert ov.changed(before, ov.restorable(torch)) == []
    assert "restore_problems" not in row
    # The warm-up round, one round, then one more that continues the ABBA pattern.
    assert [(r["round"], r["mode"]) for r in row["runs"]] == [
        (-1, "bare"), (-1, "watched"), (0, "bare"), (0, "watched"), (1, "watched"), (1, "bare"),
    ]  # fmt: skip
    assert row["rounds"] == 2 and row["paired_pct"] is not None
    watched = [r for r in row["runs"] if r["mode"] == "watched"]
    # Every step the scenario times (after its 3 warm-up steps) is a measured step of the watch.
    assert all(r["outcome"] == "completed" and r["measured_steps"] >= 5 for r in watched)
    assert all(r["self_pct"] is not None for r in watched)
    assert row["bare_ms"] is not None and row["watched_ms"] is not None


@pytest.mark.parametrize(
    "part", ["no_sampler", "thread_sampler", "no_sync_mode", "no_copy_hook", "minimal"]
)
def test_each_ablation_switches_its_part_off_and_puts_it_back(ov: ModuleType, part: str) -> None:
    import torch
    from gpusight.watch import session

    sampler, gpu_sampler, sync, wrap = (
        session.NvmlSampler,
        session.gpu_sampler,
        session.Watch._maybe_enable_sync_mode,
        session.Watch._wrap_copy,
    )
    to = torch.Tensor.to
    with ov.ablated(part):
        with session.Watch(warmup=0, profile_steps=0) as w:
            torch.ones(2).to("cpu")
            thread = w._sampler is not None and w._sampler._thread is not None
            wrapped = torch.Tensor.to is not to
        # On a GPU the watch asks gpu_sampler (this machine has none: asked here directly).
        gpu = session.gpu_sampler((0,), 0.1, 0.0, labels=[0])
        kind = type(gpu).__name__
        gpu.stop()
        if part in ("no_sampler", "minimal"):
            assert not thread and kind == "Idle"
        else:
            assert thread
            assert kind == ("NvmlSampler" if part == "thread_sampler" else "ProcessSampler")
        assert wrapped == (part not in ("no_copy_hook", "minimal"))
    assert (session.NvmlSampler, session.Watch._maybe_enable_sync_mode) == (sampler, sync)
    assert session.gpu_sampler is gpu_sampler and "GPUSIGHT_SAMPLER" not in os.environ
    assert session.Watch._wrap_copy == wrap and torch.Tensor.to is to


def test_paired_ratio_is_the_median_of_each_rounds_ratio(ov: ModuleType) -> None:
    assert ov.paired_ratio([2.0, 3.3, 1.0], [2.0, 3.0, 0.5]) == pytest.approx(1.1)
    with pytest.raises(ValueError):
        ov.paired_ratio([1.0], [1.0, 2.0])
