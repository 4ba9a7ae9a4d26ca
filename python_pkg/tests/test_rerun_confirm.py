"""The winners are judged again once the control has run again, before they are combined
(``rerun/confirm.py``): the H100's hf_trainer_defaults (run42) had its first control run slow
(37.2 ms a step, then 26.5 and 31.0), and TF32, which changed nothing, read as a winner
against it and ran in the combined row."""

from __future__ import annotations

from typing import Any

import pytest
from gpusight.rerun.driver import RunResult
from test_rerun_stacking import CASTS, Steps, _report, _together_groups, _what_if


class SlowFirstControl(Steps):
    """As ``Steps``, the first control run ``slow`` times slower than the script is, and the
    profiled baseline too where ``baseline_too`` (then nothing tells the control is slow before
    the arms run)."""

    def __init__(
        self, knobs: dict[str, tuple[float, float]], slow: float, baseline_too: bool = True
    ) -> None:
        super().__init__(knobs)
        self.slow = slow
        self.baseline_too = baseline_too
        self.controls = 0
        self.order: list[str] = []

    def __call__(self, label: str, changes: dict[str, Any], profile: bool, t: float) -> RunResult:
        res = super().__call__(label, changes, profile, t)
        self.order.append("control" if not changes and not profile else label)
        if not changes and not profile:
            self.controls += 1
        if (profile and self.baseline_too) or (not changes and not profile and self.controls == 1):
            res.report["run"]["step_time_ms"] *= self.slow
        return res


def test_a_change_that_won_only_against_a_slow_control_is_left_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # TF32 changes nothing; the batch wins; bf16 wins on top of the winning batch.
    steps = SlowFirstControl({"autocast": CASTS, "tf32": (1.0, 1.0)}, slow=1.3)
    out, said = _what_if(steps, monkeypatch, only=frozenset({"batch", "autocast", "tf32"}))
    assert steps.controls >= 2  # the control ran again before the winners were combined
    assert _together_groups(out) == {"batch", "autocast"}
    assert any("TF32" in s and "left out of the winners together" in s for s in said), said
    rep = _report(out)
    tf32 = next(r for r in rep.what_if if r.change.startswith("TF32") and "on top" not in r.change)
    assert tf32.speedup is not None and tf32.speedup == pytest.approx(1.0, abs=0.05)
    together = next(r for r in rep.what_if if r.change.startswith("all winners together"))
    assert "TF32" not in together.change


def test_winners_that_hold_against_every_control_are_all_combined(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    steps = SlowFirstControl({"autocast": CASTS, "tf32": (0.7, 1.0)}, slow=1.0)
    out, said = _what_if(steps, monkeypatch, only=frozenset({"batch", "autocast", "tf32"}))
    assert _together_groups(out) == {"batch", "autocast", "tf32"}
    assert not any("left out of the winners together" in s for s in said)


def test_a_control_slower_than_the_profiled_baseline_is_run_again_before_any_arm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The baseline, profiled, is the slower run as a rule: a control slower still is run again
    at once, so that no arm is judged against it."""
    steps = SlowFirstControl({"autocast": CASTS, "tf32": (1.0, 1.0)}, slow=1.3,
                             baseline_too=False)  # fmt: skip
    out, said = _what_if(steps, monkeypatch, only=frozenset({"batch", "autocast", "tf32"}))
    first_arm = next(i for i, x in enumerate(steps.order[1:], 1) if x != "control")
    assert steps.order[1:first_arm] == ["control"] * (first_arm - 1) and first_arm >= 3
    assert any("the control ran slower than the profiled baseline" in s for s in said)
    assert not any("left out of the winners together" in s for s in said)  # none won falsely
    assert _together_groups(out) == {"batch", "autocast"}


class SlowArm(Steps):
    """As ``Steps``, the TF32 run taking ``wall`` seconds (its forecast is the control's 10 s),
    stopped at the driver's timeout as a real run is."""

    def __init__(self, knobs: dict[str, tuple[float, float]], wall: float) -> None:
        super().__init__(knobs)
        self.wall = wall
        self.timeouts: list[float] = []

    def __call__(self, label: str, changes: dict[str, Any], profile: bool, t: float) -> RunResult:
        if not changes.get("tf32"):
            return super().__call__(label, changes, profile, t)
        self.timeouts.append(t)
        took = min(self.wall, t)
        self.clock += took
        if took < self.wall:
            stopped = f"stopped after {t:.0f} s"
            return RunResult(label, changes, ok=False, wall_s=took, error=stopped)
        return super().__call__(label, changes, profile, t)


def test_an_arm_past_its_forecast_is_stopped_before_the_winners_combined_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """hf_t5_seq2seq on the H100 (run42): torch.compile ran past its forecast with two winners
    in, the budget ran out in it, and their combined row was not run."""
    # The batch wins, bf16 wins alone (it halves the compute at no launch cost), TF32 runs long.
    steps = SlowArm({"autocast": (1.0, 0.5)}, wall=60.0)
    out, _ = _what_if(steps, monkeypatch, budget=110.0,
                      only=frozenset({"batch", "autocast", "tf32"}))  # fmt: skip
    assert steps.timeouts and steps.timeouts[0] < 60.0
    tf32 = next(r for a, r in out.arms if a.group == "tf32")
    assert tf32 is not None and not tf32.ok
    assert "the rest kept for the winners together" in (tf32.error or "")
    assert _together_groups(out) == {"batch", "autocast"}
    assert out.together is not None and out.together[1] is not None and out.together[1].ok
