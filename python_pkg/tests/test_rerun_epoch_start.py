"""A what-if run's time per step counts the DataLoader's start once per epoch.

Found on the H200 with the example notebook's what-if: 112 workers measured 73x over their
steady steps, but the cell (one epoch of 128 batches) ran 10-24x faster: starting 112 workers
and waiting for their first batches happens before the measured steps, and every epoch pays it.
Here the same on the CPU: a one-epoch loop with many workers, its wall time from outside, and
the what-if's time per step (``RunResult.step_ms``) against the report's steady step.
"""

from __future__ import annotations

import time

import pytest
import torch
from gpusight.rerun.driver import RunResult
from gpusight.rerun.facts import from_watch
from gpusight.watch.session import Watch
from torch.utils.data import DataLoader
from watch_support import SlowDataset, small_model

BATCHES = 24
BATCH = 8
pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")


def _one_epoch(workers: int, persistent: bool = False) -> tuple[RunResult, float]:
    model = small_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    ds = SlowDataset(n=BATCHES * BATCH, sleep_s=0.002)
    loader = DataLoader(
        ds, batch_size=BATCH, num_workers=workers, persistent_workers=persistent and workers > 0
    )
    w = Watch(steps=None, warmup=2, profile_steps=0, label="epoch")
    with w:
        # The epoch's own wall time: not the watch's start or its report (in a fresh process
        # the report's first build imports its modules, which once doubled this figure).
        t0 = time.perf_counter()
        for x, y in loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        wall = time.perf_counter() - t0
    facts = from_watch(w, wall)
    return RunResult("run", {}, True, wall, w.report.to_dict(), facts), wall


def test_an_epochs_loader_start_is_in_the_time_per_step() -> None:
    res, wall = _one_epoch(workers=6)
    ld = (res.facts or {})["loader"]
    assert ld["batches_per_epoch"] == BATCHES
    assert ld["epoch_start_ms"] > 0
    steady = float(res.run["step_time_ms"])
    assert res.step_ms is not None and res.epoch_share_ms > 0
    # The epoch's wall time from outside: the steady steps alone miss the workers' start.
    per_step = 1000 * wall / BATCHES
    assert abs(res.step_ms - per_step) < abs(steady - per_step)
    assert res.step_ms >= 0.5 * per_step


def test_persistent_workers_start_once_not_per_epoch() -> None:
    res, _ = _one_epoch(workers=2, persistent=True)
    assert res.epoch_share_ms == 0.0
    assert res.step_ms == float(res.run["step_time_ms"])


def test_the_facts_hold_what_each_knob_plans_by() -> None:
    """The loader's settings the knobs change, and each knob's ``model_facts``, as the watch
    saw them (the registry says which: the facts name none of them)."""
    from gpusight.knobs import LOADER_KEYS, REGISTRY

    res, _ = _one_epoch(workers=2, persistent=True)
    facts = res.facts or {}
    ld = facts["loader"]
    assert {k: ld[k] for k in LOADER_KEYS} == {
        "num_workers": 2, "pin_memory": False, "persistent_workers": True,
        "prefetch_factor": 2, "batch_size": BATCH,
    }  # fmt: skip
    model = facts["model"]
    wanted = {k for knob in REGISTRY for k, _ in knob.model_facts}
    assert wanted >= {"channels_last", "autocast", "batch_size"} and wanted <= set(model)
    assert model["batch_size"] == BATCH and model["autocast"] is False
    assert model["channels_last"] is not True  # a Linear model has no layout to change
