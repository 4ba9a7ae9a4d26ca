"""A precision change that loses on the baseline's batch, tried again on top of the winning batch
(rerun/stacking.py): the driver's decisions, on runs whose step times a model of a launch-bound
step sets (``Steps``), and the rows the report makes of them."""

from __future__ import annotations

from typing import Any

import pytest
from gpusight.report import Report
from gpusight.rerun.driver import Driver, Outcome, RunResult
from gpusight.rerun.results import apply

# Launch-bound at batch 8: 7 ms of launches, 3 ms of compute that grows with the batch.
FACTS = {
    "cuda": True,
    "step_mode": "optimizer",
    "items_per_step": 8,
    "finding_ids": ["load.launch_bound", "load.amp_unused", "cfg.tf32_disabled"],
    "breakdown_ms": {"launch_overhead": 7.0, "compute": 3.0},
    "loader": {"batch_size": 8, "batches_per_step": 1},
    "model": {"param_devices": ["cuda"], "autocast": False},
}
# Casts add launches and halve the compute: a loss at batch 8, a gain at batch 512.
CASTS = (1.4, 0.5)


class Steps:
    """Each run's step: launches plus compute per item, each knob scaling them; every run takes
    ``wall_s`` of the budget (the driver's clock follows it)."""

    def __init__(self, knobs: dict[str, tuple[float, float]], compute_per_item: float = 0.375):
        self.knobs = knobs
        self.per_item = compute_per_item
        self.clock = 0.0
        self.calls: list[dict[str, Any]] = []

    def __call__(self, label: str, changes: dict[str, Any], profile: bool, t: float) -> RunResult:
        self.calls.append(changes)
        self.clock += 10.0
        b = int(changes.get("batch_size") or 8)
        launch, compute = 7.0, self.per_item * b
        for key, (lm, cm) in self.knobs.items():
            if changes.get(key):
                launch, compute = launch * lm, compute * cm
        report = {"run": {"step_time_ms": launch + compute, "steps": 20, "items_per_step": b}}
        return RunResult(label, changes, ok=True, wall_s=10.0, report=report, facts=FACTS)


def _what_if(
    steps: Steps, monkeypatch: pytest.MonkeyPatch, budget: float = 600.0, **kw: Any
) -> tuple[Outcome, list[str]]:
    import gpusight.rerun.driver as driver_mod

    monkeypatch.setattr(driver_mod.time, "monotonic", lambda: steps.clock)
    said: list[str] = []
    out = Driver(steps, budget_s=budget, progress=said.append, **kw).what_if()
    return out, said


def _report(out: Outcome) -> Report:
    rep = Report(kind="watch", machine={"platform": "x", "python": "3", "cpu_count": 2,
                                        "gpus": []})  # fmt: skip
    apply(rep, out)
    rep.validate()
    return rep


def _together_groups(out: Outcome) -> set[str]:
    assert out.together is not None
    return {a.group for a in out.together[0]}


def test_bf16_that_loses_alone_wins_on_top_of_the_winning_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    steps = Steps({"autocast": CASTS})
    out, said = _what_if(steps, monkeypatch, only=frozenset({"batch", "autocast"}))
    plan = next(s for s in said if s.startswith("plan: "))
    assert "autocast again on the winning batch if it loses alone" in plan
    alone = next(r for a, r in out.arms if a.group == "autocast" and not a.stacked_on)
    assert alone is not None and alone.step_ms == pytest.approx(9.8 + 1.5)  # 0.88x: it lost
    top, res = next((a, r) for a, r in out.arms if a.stacked_on)
    assert top.stacked_on == "DataLoader batch_size=512"
    assert top.changes == {"batch_size": 512, "autocast": "bfloat16"}
    assert res is not None and res.ok
    assert _together_groups(out) == {"batch", "autocast"}
    # The batch and bf16 alone won: the run on top of the batch is their combined run.
    assert out.together is not None and out.together[1] is res
    assert sum(1 for c in steps.calls if c.get("autocast") and c.get("batch_size")) == 1

    rep = _report(out)
    row = next(w for w in rep.what_if if (w.params or {}).get("stacked_on"))
    assert row.change.endswith("on top of DataLoader batch_size=512")
    # Its headline: over the batch winner's run (199 ms), not over the control.
    assert row.speedup == pytest.approx(199.0 / (9.8 + 96.0), rel=1e-3)
    tog = next(w for w in rep.what_if if w.change.startswith("all winners together"))
    assert tog.speedup == pytest.approx(10.0 / ((9.8 + 96.0) * 8 / 512), rel=1e-3)
    assert (tog.params or {}).get("measured_in") == top.label
    assert (tog.params or {}).get("winners") == "batch,autocast"
    assert "all winners together" in rep.verdict.summary
    f = rep.finding("load.amp_unused")
    assert f is not None and f.impact.basis == "measured"
    assert f.impact.text.startswith("Measured end to end on top of DataLoader batch_size=512")


def test_bf16_that_loses_both_ways_is_no_winner(monkeypatch: pytest.MonkeyPatch) -> None:
    # Casts that cost as much as they save, whatever the batch.
    out, _ = _what_if(Steps({"autocast": (1.0, 1.0)}), monkeypatch,
                      only=frozenset({"batch", "autocast"}))  # fmt: skip
    _top, res = next((a, r) for a, r in out.arms if a.stacked_on)
    assert res is not None and res.ok
    assert out.together is None  # the batch is the only winner
    rep = _report(out)
    row = next(w for w in rep.what_if if (w.params or {}).get("stacked_on"))
    assert row.speedup == pytest.approx(1.0)
    assert "all winners together" not in rep.verdict.summary
    assert "DataLoader batch_size=512" in rep.verdict.summary


def test_no_batch_winner_no_second_try(monkeypatch: pytest.MonkeyPatch) -> None:
    # A step all compute, growing with its batch: no batch point gains; bf16 loses alone.
    steps = Steps({"autocast": (1.4, 0.99)}, compute_per_item=100.0)
    out, _ = _what_if(steps, monkeypatch, only=frozenset({"batch", "autocast"}))
    assert any(a.group == "batch" and r is not None and r.ok for a, r in out.arms)
    assert any(a.group == "autocast" and r is not None and r.ok for a, r in out.arms)
    assert out.together is None
    assert not any(a.stacked_on for a, _ in out.arms)
    assert not any(c.get("autocast") and c.get("batch_size") for c in steps.calls)


def test_a_second_try_that_does_not_fit_keeps_the_budget_for_the_winners_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # bf16 wins alone, TF32 loses alone. Runs: baseline, control, 3 batch points, autocast,
    # tf32 (70 s); TF32 on top of the batch and the combined run need ~15 s each: 22 s left.
    steps = Steps({"autocast": (1.0, 0.6), "tf32": CASTS})
    out, said = _what_if(steps, monkeypatch, budget=92.0,
                         only=frozenset({"batch", "autocast", "tf32"}))  # fmt: skip
    assert "tf32 again on the winning batch if it loses alone" in next(
        s for s in said if s.startswith("plan: ")
    )
    top, res = next((a, r) for a, r in out.arms if a.stacked_on)
    assert res is None and top.group == "tf32"
    assert top.skipped and "kept for the winners together" in top.skipped
    assert _together_groups(out) == {"batch", "autocast"}
    assert out.together is not None and out.together[1] is not None and out.together[1].ok
    rep = _report(out)
    row = next(w for w in rep.what_if if (w.params or {}).get("stacked_on"))
    assert row.skipped == top.skipped
    assert any("tf32" in n and "kept for the winners together" in n for n in rep.notes)


def test_a_second_try_that_wins_joins_a_combined_run_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # bf16 wins alone, TF32 wins only on top of the batch: all three in one more run.
    steps = Steps({"autocast": (1.0, 0.6), "tf32": CASTS})
    out, _ = _what_if(steps, monkeypatch, only=frozenset({"batch", "autocast", "tf32"}))
    assert _together_groups(out) == {"batch", "autocast", "tf32"}
    assert out.together is not None and out.together[1] is not None
    assert out.together[1].changes == {"batch_size": 512, "autocast": "bfloat16", "tf32": True}
    assert out.together_from is None


def test_the_combined_run_is_forecast_at_the_winning_batchs_measured_pace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Launch-bound: batch 512 (x64) steps in 12 ms against the control's 7. Forecast blind (64x
    # the control's step) the combined run needs ~26 s, more than the 20 s left after six runs;
    # at the batch run's pace ~10 s.
    steps = Steps({"autocast": (0.8, 1.0)}, compute_per_item=0.01)
    out, _ = _what_if(steps, monkeypatch, budget=80.0, only=frozenset({"batch", "autocast"}))
    assert _together_groups(out) == {"batch", "autocast"}
    assert out.together is not None and out.together[1] is not None and out.together[1].ok
    assert out.together[1].changes == {"batch_size": 512, "autocast": "bfloat16"}


def test_progress_is_the_share_of_the_planned_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The notebook's what-if bar moves by runs made over runs planned, not by the budget's
    seconds: a what-if that ends early in its budget still reaches its end."""
    import gpusight.rerun.driver as driver_mod

    steps = Steps({"autocast": CASTS})
    monkeypatch.setattr(driver_mod.time, "monotonic", lambda: steps.clock)
    shares: list[tuple[str, float]] = []
    d = Driver(steps, budget_s=6000.0, only=frozenset({"autocast"}))
    d.progress = lambda text: shares.append((text, d.share_done()))
    out = d.what_if()
    plan = next(i for i, (t, _) in enumerate(shares) if t.startswith("plan: "))
    # Before the plan: two runs planned; after it: the control, one arm, a second control.
    assert shares[plan][1] == pytest.approx(2 / 4)
    made = [s for t, s in shares[plan:] if ": " in t and t.startswith("what-if ")]
    assert made == sorted(made) and made[-1] >= 0.75
    assert out.runs == steps.calls.__len__() == 4
    # Far under the budget's seconds: its share of the budget would read 40 of 6000 s.
    assert steps.clock / 6000.0 < 0.01


def test_bf16_too_small_a_share_alone_is_not_run_alone_but_on_top_of_the_winning_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kernels 2 % of the step at batch 8: bf16 alone can gain at most 1.02x (Amdahl), under the
    least gain that counts, so it is not run alone; the batch grows the kernels' share, and on
    top of the winning batch it is measured (and wins)."""
    import gpusight.rerun.driver as driver_mod

    facts = {**FACTS, "breakdown_ms": {"launch_overhead": 9.8, "compute": 0.2}}
    steps = Steps({"autocast": CASTS})
    monkeypatch.setattr(driver_mod.time, "monotonic", lambda: steps.clock)

    def run(label: str, changes: dict[str, Any], profile: bool, t: float) -> RunResult:
        res = steps(label, changes, profile, t)
        res.facts = facts
        return res

    out = Driver(run, budget_s=600.0, only=frozenset({"batch", "autocast"})).what_if()
    alone = next(a for a, _ in out.arms if a.group == "autocast" and not a.stacked_on)
    assert alone.skipped is not None and "at most 1.02x" in alone.skipped
    assert not any(c.get("autocast") and not c.get("batch_size") for c in steps.calls)
    top, res = next((a, r) for a, r in out.arms if a.stacked_on)
    assert top.changes == {"batch_size": 512, "autocast": "bfloat16"}
    assert res is not None and res.ok
    assert _together_groups(out) == {"batch", "autocast"}


class Compiling(Steps):
    """As ``Steps``, a compiled run taking 40 s more: its compiling."""

    def __call__(self, label: str, changes: dict[str, Any], profile: bool, t: float) -> RunResult:
        res = super().__call__(label, changes, profile, t)
        if changes.get("compile"):
            self.clock += 40.0
            res.wall_s += 40.0
        return res


def test_a_winner_too_costly_to_run_again_is_left_out_of_the_combined_run_which_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As hf_trainer_defaults on the H100: compiling won after the batch and bf16, and all
    # three together (another compile, ~70 s) no longer fit; the others together still do.
    steps = Compiling({"autocast": (1.0, 0.6), "compile": (0.5, 1.0)})
    out, _ = _what_if(steps, monkeypatch, budget=170.0,
                      only=frozenset({"batch", "autocast", "compile"}))  # fmt: skip
    alone = next(r for a, r in out.arms if a.changes == {"compile": "default"})
    assert alone is not None and alone.ok  # it ran, and won
    assert _together_groups(out) == {"batch", "autocast"}
    assert [a.group for a in out.left_out] == ["compile"]
    assert out.together is not None and out.together[1] is not None and out.together[1].ok
    assert out.together[1].changes == {"batch_size": 512, "autocast": "bfloat16"}
    assert steps.clock <= 170.0
    row = next(w for w in _report(out).what_if if (w.params or {}).get("group") == "together")
    assert row.change.startswith("the winners together but torch.compile(model) (over the budget)")
    assert row.speedup and not row.skipped
    assert row.params is not None and row.params["left_out"] == "compile"
    assert row.params["winners"] == "batch,autocast"
    # Where not even two of them fit, the row is the whole set's, not run, as before.
    steps = Compiling({"autocast": (1.0, 0.6), "compile": (0.5, 1.0)})
    out, _ = _what_if(steps, monkeypatch, budget=60.0,
                      only=frozenset({"batch", "autocast", "compile"}))  # fmt: skip
    assert out.together is not None and out.together[1] is None and not out.left_out
    row = next(w for w in _report(out).what_if if (w.params or {}).get("group") == "together")
    assert row.change.startswith("all winners together: ") and row.skipped == "over the budget"


def test_the_winners_that_fit_leave_out_the_costliest_never_the_batch_they_won_on() -> None:
    from gpusight.rerun.plan import Arm
    from gpusight.rerun.stacking import fitting

    batch = Arm("batch", "batch 512", {"batch_size": 512}, None, slowdown=2.0)
    bf16 = Arm("autocast", "bf16", {"autocast": "bfloat16"}, None)
    tf32 = Arm("tf32", "TF32", {"tf32": True}, None)
    comp = Arm("compile", "compile", {"compile": "default"}, None, extra_s=60.0)

    def need(ws: list[Arm]) -> float:
        return 10.0 * max(a.slowdown for a in ws) + max(a.extra_s for a in ws)

    assert fitting([batch, bf16, comp], need, 100.0) == ([batch, bf16, comp], [])
    assert fitting([batch, bf16, tf32, comp], need, 30.0) == ([batch, bf16, tf32], [comp])
    # The batch alone is over what is left, and bf16 won on top of it: the batch is never
    # left out, so no combined run fits.
    assert fitting([batch, bf16, tf32], need, 15.0) == ([], [batch, bf16, tf32])
    assert fitting([bf16, tf32, comp], need, 15.0) == ([bf16, tf32], [comp])
