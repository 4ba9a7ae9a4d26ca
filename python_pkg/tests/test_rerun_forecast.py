"""How long the what-if expects a re-run to take: a batch sweep's runs so far set the pace of its
next one (a launch-bound step does not grow with its batch; a GPU-bound one does)."""

from __future__ import annotations

from typing import Any

import pytest
from gpusight.rerun.driver import Driver, RunResult, sweep_step_ratio
from gpusight.rerun.plan import Arm


def run(step_ms: float, wall_s: float = 6.8, steps: int = 160) -> RunResult:
    report = {"run": {"step_time_ms": step_ms, "steps": steps, "items_per_step": 1}}
    return RunResult("r", {}, ok=True, wall_s=wall_s, report=report)


def never(*_a: Any) -> RunResult:
    raise AssertionError("no run here")


def test_a_flat_sweep_forecasts_a_flat_step() -> None:
    # unbatched_inference on the H200: x4 and x16 no slower than the control (3.19 ms).
    seen = [(4.0, run(3.19)), (16.0, run(3.05))]
    assert sweep_step_ratio(3.19, seen, 64.0) == pytest.approx(1.0)
    d = Driver(never, budget_s=60.0)
    control = run(3.19)
    blind = d.forecast_s(control, Arm("batch", "x64", {"replicate": 64}, slowdown=64.0))
    told = d.forecast_s(control, Arm("batch", "x64", {"replicate": 64}, slowdown=64.0), seen)
    assert blind > 35.0  # the old forecast: 40 s, over what was left of a 60 s budget
    assert told == pytest.approx(control.wall_s)


def test_a_step_that_grows_with_its_batch_is_forecast_to_grow() -> None:
    # GPU-bound: the step doubles with the batch.
    seen = [(2.0, run(2.0)), (4.0, run(4.0))]
    assert sweep_step_ratio(1.0, seen, 16.0) == pytest.approx(16.0)
    # One run in: the line through the control's point and it.
    assert sweep_step_ratio(1.0, [(4.0, run(2.5))], 16.0) == pytest.approx(8.5)


def test_the_forecast_stays_between_the_largest_step_seen_and_k_times_the_control() -> None:
    # Never below a step already seen (a step that fell at the last point does not fall on).
    assert sweep_step_ratio(1.0, [(4.0, run(3.0)), (16.0, run(2.0))], 64.0) == 2.0
    # Never above k times the control's step (a steep start does not run away).
    assert sweep_step_ratio(1.0, [(2.0, run(8.0))], 4.0) == 4.0
    # The sweep's runs in any order.
    a = sweep_step_ratio(1.0, [(16.0, run(4.0)), (4.0, run(2.0))], 64.0)
    assert a == sweep_step_ratio(1.0, [(4.0, run(2.0)), (16.0, run(4.0))], 64.0)


def test_a_failed_control_is_said_as_failed_not_as_the_budget() -> None:
    from gpusight.rerun.driver import Driver

    def runner(label: str, changes: dict[str, Any], profile: bool, timeout_s: float) -> RunResult:
        if label.startswith("baseline"):
            base = run(5.0)
            base.facts = {"cuda": False, "breakdown_ms": {"compute": 5.0}}
            return base
        return RunResult(label, changes, ok=False, wall_s=1.0,
                         error="crashed: the script exited with 1: OSError: disk full")  # fmt: skip

    out = Driver(runner, budget_s=600.0).what_if()
    assert out.control is not None and not out.control.ok
    assert out.noise_note.startswith("within-run only (the control run failed: crashed")
    assert "budget" not in out.noise_note
