"""A re-run's time per step counts the GPU work still queued after its last measured step.

A GPU-bound step's host timestamps run ahead of the GPU by the launch queue's depth: the watch
starts the measured steps with the queue empty and records how long the GPU still ran after the
last one (``run.end_drain_ms``); the what-if's time per step is that whole window. On the CPU
nothing is queued: no drain is reported and the time per step is the steady mean.
"""

from __future__ import annotations

import pytest
import torch
from gpusight.report_schema import ReportValidationError, validate
from gpusight.rerun.driver import RunResult
from gpusight.watch.session import Watch


def _report(run: dict[str, object]) -> dict[str, object]:
    return {"schema_version": "1.2", "kind": "watch", "run": run}


def test_the_window_runs_from_an_empty_queue_to_a_drained_gpu() -> None:
    # The host ran ahead of a 20 ms GPU step: two short steps while the queue filled, then the
    # GPU's pace, and 40 ms of work still queued at the end.
    times = [2.0, 2.0, 16.0, *[20.0] * 17]
    run = {"steps": 20, "step_time_ms": 20.0, "step_times_ms": times, "end_drain_ms": 40.0,
           "items_per_step": 64}  # fmt: skip
    res = RunResult("arm", {}, True, 9.0, _report(run), {})
    assert res.drained_mean_ms == (sum(times) + 40.0) / 20
    assert res.step_ms is not None and abs(res.step_ms - 20.0) < 1e-9
    assert res.items_per_s(None) == 64 / 20.0 * 1000


def test_no_drain_leaves_the_steady_mean() -> None:
    run = {"steps": 3, "step_time_ms": 4.0, "step_times_ms": [1.0, 4.0, 4.0]}
    res = RunResult("arm", {}, True, 9.0, _report(run), {})
    assert res.drained_mean_ms is None
    assert res.step_ms == 4.0


def _cpu_report() -> dict[str, object]:
    model = torch.nn.Linear(8, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w = Watch(steps=6, warmup=2, profile_steps=0, label="cpu")
    with w:
        for _ in range(12):
            opt.zero_grad()
            model(torch.randn(4, 8)).sum().backward()
            opt.step()
    return w.report.to_dict()


def test_a_cpu_watch_reports_no_drain_and_stays_valid() -> None:
    data = _cpu_report()
    assert "end_drain_ms" not in data["run"]
    validate(data)


def test_the_schema_takes_a_drain_and_refuses_a_negative_one() -> None:
    data = _cpu_report()
    data["run"]["end_drain_ms"] = 0.5  # type: ignore[index]
    validate(data)
    data["run"]["end_drain_ms"] = -1.0  # type: ignore[index]
    with pytest.raises(ReportValidationError, match="end_drain_ms"):
        validate(data)
