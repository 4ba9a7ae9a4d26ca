"""The DataLoader's other settings run on the winning workers in a re-run (``Knob.stacks_on``),
as the kernel's what-if runs them (issue #53: on the H200 tv_transforms_loader's pin_memory was
tried only on the script's 0 workers, where it loses, and its row missed --fix by 39 %).

The driver's decisions on runs whose step a model of a loader-bound step sets (``Steps``): the
loader's time divided among the workers, a pageable copy that pinning hides only where workers
feed the pin thread."""

from __future__ import annotations

from typing import Any

import pytest
from gpusight.knobs import Situation, by_name
from gpusight.report import Report
from gpusight.rerun import stacking
from gpusight.rerun.driver import Driver, Outcome, RunResult
from gpusight.rerun.results import apply

LOAD_MS, COPY_MS, COMPUTE_MS = 60.0, 5.0, 5.0
FACTS = {
    "cuda": True,
    "step_mode": "optimizer",
    "items_per_step": 16,
    "cpu_count": 8,
    "epochs_seen": 1,
    "finding_ids": ["load.input_bound", "code.pageable_copy"],
    "breakdown_ms": {"data_wait": LOAD_MS, "compute": COPY_MS + COMPUTE_MS},
    "loader": {"batch_size": 16, "batches_per_step": 1, "num_workers": 0, "pin_memory": False},
    "model": {"param_devices": ["cuda"], "autocast": False},
}


class Steps:
    """Each run's step from its DataLoader settings; every run takes 10 s of the budget."""

    def __init__(self) -> None:
        self.clock = 0.0
        self.calls: list[dict[str, Any]] = []

    def __call__(self, label: str, changes: dict[str, Any], profile: bool, t: float) -> RunResult:
        self.calls.append(changes)
        self.clock += 10.0
        w = int(changes.get("num_workers") or 0)
        load = LOAD_MS / max(1, w)
        pinned = changes.get("pin_memory")
        copy = 0.0 if pinned and w else COPY_MS + (1.0 if pinned else 0.0)
        report = {"run": {"step_time_ms": load + copy + COMPUTE_MS, "steps": 20,
                          "items_per_step": 16}}  # fmt: skip
        return RunResult(label, changes, ok=True, wall_s=10.0, report=report, facts=FACTS)


def _what_if(monkeypatch: pytest.MonkeyPatch) -> tuple[Outcome, list[str], Steps]:
    import gpusight.rerun.driver as driver_mod

    steps = Steps()
    monkeypatch.setattr(driver_mod.time, "monotonic", lambda: steps.clock)
    said: list[str] = []
    only = frozenset({"workers", "loader"})
    out = Driver(steps, budget_s=900.0, progress=said.append, only=only).what_if()
    return out, said, steps


def test_the_loader_settings_are_planned_again_on_the_winning_workers() -> None:
    loader = by_name("loader")
    assert loader is not None and loader.stacks_on == "workers"
    group = loader.groups(Situation.of(FACTS))[0]
    # On the script's 0 workers: pinning alone (prefetching needs workers).
    assert [a.changes for a in group.arms] == [{"pin_memory": True}]
    workers = by_name("workers")
    assert workers is not None
    won = workers.groups(Situation.of(FACTS))[0].arms[0]  # num_workers=2, as if it had won
    again, base = stacking.on_winner(group, [won], FACTS)
    assert base is won
    # The sweep's workers are kept across epochs, as the finding's fix builds the loader.
    kept = {"num_workers": 2, "persistent_workers": True}
    assert [a.changes for a in again.arms] == [
        {**kept, "pin_memory": True},
        {**kept, "prefetch_factor": 4},
    ]
    assert all(a.stacked_on == won.label for a in again.arms)
    # No winner to stack on: the group as planned.
    assert stacking.on_winner(group, [], FACTS) == (group, None)


def test_pinning_that_loses_on_no_workers_wins_on_the_winning_workers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out, said, steps = _what_if(monkeypatch)
    plan = next(s for s in said if s.startswith("plan: "))
    assert "loader (1; planned again on the winning workers if one wins)" in plan
    workers = [a for a, r in out.arms if a.group == "workers" and r is not None]
    assert workers and all(a.stacked_on is None for a in workers)
    stacked = [(a, r) for a, r in out.arms if a.group == "loader"]
    assert stacked and all(a.stacked_on for a, _ in stacked)
    won_w = stacked[0][0].changes["num_workers"]
    # Pinning ran only with the winning workers, never on the script's 0.
    pins = [c for c in steps.calls if c.get("pin_memory")]
    assert pins and all(c.get("num_workers") == won_w for c in pins)
    pin, pin_run = next((a, r) for a, r in stacked if a.changes.get("pin_memory"))
    assert pin_run is not None and pin_run.ok
    # Judged against the winning workers' run: the copy pinning hides, over that run.
    assert out.together is not None
    assert {a.group for a in out.together[0]} == {"workers", "loader"}
    assert out.together[1] is pin_run  # the run on top of the workers is the combined one

    rep = Report(kind="watch", machine={"platform": "x", "python": "3", "cpu_count": 8,
                                        "gpus": []})  # fmt: skip
    apply(rep, out)
    rep.validate()
    row = next(w for w in rep.what_if if w.change == pin.label)
    load = LOAD_MS / won_w
    assert row.speedup == pytest.approx(
        (load + COPY_MS + COMPUTE_MS) / (load + COMPUTE_MS), rel=1e-3
    )
    kept = f"DataLoader num_workers={won_w}, persistent_workers=True"
    assert (row.params or {}).get("stacked_on") == kept


def test_a_loader_that_plans_nothing_on_no_workers_is_planned_on_the_winning_workers() -> None:
    from gpusight.knobs import plan_groups

    # No GPU to pin for, no workers to prefetch with: nothing on the baseline's loader.
    facts = {**FACTS, "cuda": False}
    loader = by_name("loader")
    assert loader is not None and loader.groups(Situation.of(facts)) == []
    groups = {g.name: g for g in plan_groups(facts)}
    assert groups["loader"].arms == [] and groups["loader"].priority < groups["workers"].priority
    won = groups["workers"].arms[0]
    again, base = stacking.on_winner(groups["loader"], [won], facts)
    assert base is won and [a.changes for a in again.arms] == [
        {
            "num_workers": won.changes["num_workers"],
            "persistent_workers": True,
            "prefetch_factor": 4,
        }
    ]
    # A loader that keeps up: no workers to try, nothing to stack on them.
    quick = {**facts, "breakdown_ms": {"data_wait": 0.1, "compute": 10.0}}
    assert not {"workers", "loader"} & {g.name for g in plan_groups(quick)}


def test_a_runs_noise_takes_whole_rounds_of_its_loaders_workers() -> None:
    """On the H200, tv_transforms_loader's 8- and 14-worker runs measured 32 and 56 steps; blocks
    of 4 and 7 steps, half a round of the workers each, read the mean step ±42 % uncertain, and
    pinning's 1.28x on top of the winning workers as noise (no combined row)."""
    xs = [50.0 if i % 8 == 7 else 1.0 for i in range(32)]  # 8 workers: 7 ready, then a wait
    run = {"step_times_ms": xs}
    rounds = RunResult("arm", {}, True, 1.0, {"run": run}, {"loader": {"num_workers": 8}})
    assert rounds.noise_pct() < 2.0
    halves = RunResult("arm", {}, True, 1.0, {"run": run}, {"loader": {"num_workers": 0}})
    assert halves.noise_pct() > 40.0


def test_a_workers_sweep_that_could_not_clear_the_noise_is_not_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A step that waits 11 % for data gains at most 1.12x from more workers (pyg on the H200:
    four such arms ran inside a ±22 % band and took the budget the batch needed)."""
    from gpusight.rerun import plan as rerun_plan

    facts = {**FACTS, "breakdown_ms": {"data_wait": 11.0, "compute": 89.0}}
    (workers,) = [g for g in rerun_plan.plan(facts) if g.name == "workers"]
    assert workers.bound == pytest.approx(100 / 89)
    assert rerun_plan.hidden_by_noise(workers, 2.0) is None
    why = rerun_plan.hidden_by_noise(workers, 22.0)
    assert why is not None and "at most 1.12x" in why and "must reach 1.28x" in why
    # A band of 100% or more: no gain can clear it (not "a gain must reach infx").
    wide = rerun_plan.hidden_by_noise(workers, 103.0)
    assert wide is not None and "no gain can clear it" in wide and "inf" not in wide

    import gpusight.rerun.driver as driver_mod

    clock = [0.0]
    calls: list[dict[str, Any]] = []

    def runs(label: str, changes: dict[str, Any], profile: bool, t: float) -> RunResult:
        calls.append(changes)
        clock[0] += 10.0
        xs = [10.0 if (i // 5) % 2 else 14.0 for i in range(40)]  # ±13 % within the run
        report = {"run": {"step_time_ms": 12.0, "steps": 40, "items_per_step": 16,
                          "step_times_ms": xs}}  # fmt: skip
        return RunResult(label, changes, ok=True, wall_s=10.0, report=report, facts=facts)

    monkeypatch.setattr(driver_mod.time, "monotonic", lambda: clock[0])
    out = Driver(runs, budget_s=900.0, progress=lambda _s: None,
                 only=frozenset({"workers"})).what_if()  # fmt: skip
    rows = [a for a, _ in out.arms if a.group == "workers"]
    assert rows and all(a.skipped and "inside the noise band" in a.skipped for a in rows)
    assert not any(c.get("num_workers") for c in calls)


class Plateau(Steps):
    """A loader whose workers stop gaining at 8 of 16 cores: the step is then the main process's
    pageable copy and the compute, in turn (tv_transforms_loader on the H100: 45.6 ms a step
    on 8 and on 14 workers). Pinning overlaps the copy but costs the pin thread's CPU, which
    only workers to spare absorb."""

    LOAD, COPY, COMPUTE, PIN = 320.0, 15.0, 28.0, 40.0

    def __call__(self, label: str, changes: dict[str, Any], profile: bool, t: float) -> RunResult:
        self.calls.append(changes)
        self.clock += 10.0
        w = max(1, int(changes.get("num_workers") or 0))
        if changes.get("pin_memory"):
            step = max((self.LOAD + self.PIN) / w, self.COMPUTE)
        else:
            step = max(self.LOAD / w, self.COPY + self.COMPUTE)
        report = {"run": {"step_time_ms": step, "steps": 20, "items_per_step": 16}}
        facts = {**FACTS, "cpu_count": 16}
        return RunResult(label, changes, ok=True, wall_s=10.0, report=report, facts=facts)


def test_pinning_runs_on_the_most_workers_of_a_sweep_that_plateaued(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gpusight.rerun.driver as driver_mod

    steps = Plateau()
    monkeypatch.setattr(driver_mod.time, "monotonic", lambda: steps.clock)
    out = Driver(steps, budget_s=900.0, only=frozenset({"workers", "loader"})).what_if()
    ran = {int(a.changes["num_workers"]) for a, r in out.arms if a.group == "workers" and r}
    assert {8, 14} <= ran  # 8 and 14 workers step alike: 43 ms
    pins = [(a, r) for a, r in out.arms if a.changes.get("pin_memory") and r is not None]
    assert pins and all(a.changes["num_workers"] == 14 for a, _ in pins)
    assert pins[0][0].stacked_on == "DataLoader num_workers=14, persistent_workers=True"
    assert out.together is not None  # pinning won there: 43 ms -> 28 ms
    assert {"num_workers": 14, "pin_memory": True}.items() <= _together_changes(out).items()


def _together_changes(out: Outcome) -> dict[str, Any]:
    assert out.together is not None
    merged: dict[str, Any] = {}
    for arm in out.together[0]:
        merged.update(arm.changes)
    return merged


def test_the_workers_stacked_on_are_the_most_within_the_noise_of_the_best() -> None:
    from gpusight.knobs.base import Arm, Group

    workers = by_name("workers")
    assert workers is not None

    def group(*points: tuple[int, float]) -> Group:
        g = Group("workers", 50.0)
        g.measured = [(Arm("workers", f"{w}", {"num_workers": w}), gain) for w, gain in points]
        return g

    h100 = group((2, 1.47), (4, 3.01), (8, 6.15), (14, 6.10))  # tv_transforms_loader, ±27 %
    base = workers.stack_base(h100, 26.8, 16)
    assert base is not None and base.changes == {"num_workers": 14}
    base = workers.stack_base(h100, 0.0, 16)  # 6.10x is within 5 % of 6.15x
    assert base is not None and base.changes == {"num_workers": 14}
    # More workers that measurably lose (oversubscribed cores): the best stays the base.
    worse = group((4, 3.0), (8, 6.0), (14, 4.0))
    base = workers.stack_base(worse, 3.0, 16)
    assert base is not None and base.changes == {"num_workers": 8}
    assert workers.stack_base(group(), 3.0, 16) is None
    # Past the cores, within the noise of the best (the H100's run31, ±14.5 %): the pin thread
    # needs a core, so the settings stack on the most workers that leave it one.
    run31 = group((2, 1.51), (4, 2.53), (8, 5.16), (14, 6.78), (28, 6.17))
    base = workers.stack_base(run31, 14.5, 16)
    assert base is not None and base.changes == {"num_workers": 14}
    # Only a point past the cores comes near the best: the best it is.
    past = group((2, 1.9), (4, 3.6), (28, 7.0))
    base = workers.stack_base(past, 3.0, 4)
    assert base is not None and base.changes == {"num_workers": 28}


def test_the_combined_rows_label_names_the_settings_it_ran() -> None:
    from gpusight.rerun.plan import Arm, combine, together_label
    from gpusight.rerun.stacking import on_top

    workers = Arm("workers", "DataLoader num_workers=14", {"num_workers": 14})
    base = Arm("workers", "DataLoader num_workers=28", {"num_workers": 28})
    pin = on_top(Arm("loader", "DataLoader pin_memory=True", {"pin_memory": True}), base)
    winners = [workers, pin]
    # The run takes the pinning arm's 28 workers: the label does not say 14.
    assert combine(winners) == {"num_workers": 28, "pin_memory": True}
    assert together_label(winners) == (
        "all winners together: DataLoader pin_memory=True on top of DataLoader num_workers=28"
    )
    bf16 = Arm("autocast", "bf16 autocast", {"autocast": "bfloat16"})
    assert together_label([workers, bf16]) == (
        "all winners together: DataLoader num_workers=14, bf16 autocast"
    )
