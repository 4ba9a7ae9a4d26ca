"""What a what-if row says it measured (rerun/results.py), on outcomes made of plain runs."""

from __future__ import annotations

from gpusight.report import Report
from gpusight.rerun.driver import Outcome, RunResult
from gpusight.rerun.plan import Arm
from gpusight.rerun.results import apply


def _result(label: str, changes: dict[str, object], step_ms: float, **injected: int) -> RunResult:
    run = {"steps": 20, "step_time_ms": step_ms, "items_per_step": 32,
           "step_times_ms": [step_ms] * 20}  # fmt: skip
    return RunResult(label, changes, True, 5.0, {"run": run}, {"injected": injected})


def _moved(**injected: int) -> Report:
    arm = Arm("to_device", "model and batches on the GPU", {"to_device": "cuda"}, "code.cpu_model")
    out = Outcome(baseline=_result("baseline", {}, 20.0), control=None, noise_pct=1.0)
    out.arms = [(arm, _result("moved", arm.changes, 5.0, to_device=1, **injected))]
    rep = Report(kind="watch", machine={"platform": "x", "python": "3", "cpu_count": 2,
                                        "gpus": []})  # fmt: skip
    apply(rep, out)
    rep.validate()
    return rep


def test_a_moved_model_whose_outputs_came_back_says_the_fix_gains_more() -> None:
    f = _moved(outputs_back=20).finding("code.cpu_model")
    assert f is not None and f.impact.basis == "measured" and f.impact.speedup == 4.0
    assert "copied back to the CPU every step" in f.impact.text


def test_a_moved_model_whose_outputs_stayed_says_nothing_more() -> None:
    f = _moved().finding("code.cpu_model")
    assert f is not None and f.impact.speedup == 4.0
    assert "copied back" not in f.impact.text
