"""A DataLoader that starts its worker processes anew at every epoch (``persistent_workers``
False, a slow ``worker_init_fn``, short epochs) is a phase between the steps of its own
(``load.epoch_start``, issue #54): named with its period and the loop's line, its time out of the
steps' data wait, and ``persistent_workers=True`` as the fix, patched into the user's call. Real
CPU torch, real worker processes."""

from __future__ import annotations

import inspect
import time
from typing import Any

import pytest
import torch
from gpusight.first_fix import first_finding
from gpusight.knobs import by_name
from gpusight.knobs.base import Situation
from gpusight.report import Report
from gpusight.watch.session import Watch
from torch import nn
from torch.utils.data import DataLoader, Dataset

BATCHES = 10


class Words(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    def __len__(self) -> int:
        return BATCHES * 8

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn(32), torch.tensor(i % 4)


def build_vocab(_worker_id: int) -> None:
    time.sleep(0.3)  # a vocabulary built in every worker, at every epoch


def _train(epochs: int = 6, workers: int = 4, keep: bool = False) -> Report:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    init = build_vocab if workers else None
    with Watch(steps=12, warmup=2, profile_steps=0, stop_after_steps=False) as w:
        data = DataLoader(Words(), batch_size=8, num_workers=workers, worker_init_fn=init,
                          persistent_workers=keep)  # fmt: skip
        for _ in range(epochs):
            for x, y in data:  # FOR_LINE
                loss = nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
    assert w.report is not None
    return w.report


def _line_of(marker: str) -> int:
    lines, start = inspect.getsourcelines(_train)
    return start + next(i for i, text in enumerate(lines) if marker in text)


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_workers_started_at_every_epoch_are_a_phase_named_with_its_period_and_fix() -> None:
    report = _train()
    run = report.run or {}
    (phase,) = [p for p in run["phases"] if p["kind"] == "epoch_start"]
    assert phase["period_steps"] == BATCHES
    assert phase["source"]["line"] == _line_of("FOR_LINE")
    assert min(phase["times_ms"]) > 250  # each worker sleeps 0.3 s in its worker_init_fn
    # Out of the steps' own figures: what the steps still wait for is the other workers' first
    # batches (they start together with the first), less than the start-up itself.
    split = run["breakdown_ms"]
    assert split["between_steps"] > split.get("data_wait", 0.0)
    assert report.verdict.bottleneck == "between_steps"
    assert "workers starting anew every 10 steps" in report.verdict.summary
    f = report.finding("load.epoch_start")
    assert f is not None and f.severity in ("warn", "critical")
    said = {e.label: e.value for e in f.evidence}
    assert said["worker processes"] == 4 and said["worker_init_fn"] == "build_vocab"
    assert said["every"] == BATCHES
    assert "persistent_workers=True" in f.fix.text and "build_vocab" in f.fix.text
    assert f.fix.patch is not None and "persistent_workers=True" in f.fix.patch
    assert f.fix.snippet_id == "phase.keep_workers" and f.fix.code
    compile(f.fix.code, "<snippet>", "exec")
    # What every surface says to do first (the rest of each epoch's start-up, the other
    # workers' first batches, is still data wait in the steps).
    first = first_finding(report)
    assert first is not None and first.id == "load.epoch_start"


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
@pytest.mark.parametrize("loader", [{"keep": True}, {"workers": 0}])
def test_workers_kept_or_none_start_no_epoch_phase(loader: dict[str, Any]) -> None:
    report = _train(epochs=3, **loader)
    kinds = [p["kind"] for p in (report.run or {}).get("phases", [])]
    assert "epoch_start" not in kinds
    assert report.finding("load.epoch_start") is None


def test_the_loader_knob_measures_kept_workers_for_the_epoch_start_finding() -> None:
    facts = {
        "cuda": True,
        "loader": {"num_workers": 4, "persistent_workers": False, "prefetch_factor": 2},
        "epochs_seen": 3,
        "finding_ids": ["load.epoch_start"],
        "breakdown_ms": {"compute": 10.0, "data_wait": 0.2, "between_steps": 30.0},
    }
    knob = by_name("loader")
    assert knob is not None
    (group,) = knob.groups(Situation.of(facts))
    arms = {a.label: a for a in group.arms}
    kept = arms["DataLoader persistent_workers=True"]
    assert kept.finding_id == "load.epoch_start"
    # The steps hardly wait for data: pinning and prefetching are not what this run needs.
    assert list(arms) == ["DataLoader persistent_workers=True"]
    facts["finding_ids"] = []
    assert knob.groups(Situation.of(facts)) == []


def test_a_reruns_noise_counts_the_epoch_start_once_a_block() -> None:
    """The re-run's within-run noise (2 x the standard error of block means) takes blocks of
    whole epochs where the epoch start is a phase: blocks of 6 steps that held an epoch start or
    not read the mean step ±52 % uncertain (here), and a 40x kept-workers gain as noise."""
    from gpusight.rerun.driver import RunResult

    xs = [420.0 if i % BATCHES == 0 else 5.0 for i in range(50)]
    run = {"step_times_ms": xs, "phases": [{"kind": "epoch_start", "period_steps": BATCHES}]}
    with_phase = RunResult("control", {}, True, 1.0, {"run": run})
    assert with_phase.noise_pct() < 2.0
    without = RunResult("control", {}, True, 1.0, {"run": {"step_times_ms": xs}})
    assert without.noise_pct() > 20.0


def test_a_rerun_whose_window_held_epoch_starts_does_not_add_them_again() -> None:
    """Short epochs: the measured window holds epoch starts (phases), and its mean step pays
    them; spreading the loader's start over the epoch on top of it counted them twice (a kept
    workers' re-run read 52.8x on this machine where its step went from about 48 ms to 1.7)."""
    from gpusight.rerun.driver import RunResult

    facts = {"loader": {"epoch_start_ms": 420.0, "batches_per_epoch": BATCHES}}
    run = {"step_time_ms": 47.0, "steps": 40, "breakdown_ms": {"data_wait": 3.0}}
    once = RunResult("control", {}, True, 1.0, {"run": run}, facts)
    assert once.epoch_share_ms == pytest.approx((420.0 - 3.0) / BATCHES)  # start before the window
    held = RunResult("control", {}, True, 1.0,
                     {"run": {**run, "phases": [{"kind": "epoch_start", "period_steps": 10}]}},
                     facts)  # fmt: skip
    assert held.epoch_share_ms == 0.0 and held.step_ms == pytest.approx(47.0)
