"""The user's world is left bit-identical: weights, buffers, gradients, training modes, optimizer
state, RNG (Python, numpy, torch) and torch flags, after a normal diagnosis, a raising step, a
(simulated) OOM and Ctrl-C. Checksums are sha256 over tensor bytes (see whatif_support)."""

from __future__ import annotations

import multiprocessing
import random
import time
from typing import Any

import numpy as np
import pytest
import torch
from gpusight.whatif import DiagnoseError, OutOfMemoryDuringDiagnosis, StepError, diagnose
from gpusight.whatif.arms import Arm, Workload, planned
from gpusight.whatif.restore import Snapshot, read_flags
from gpusight.whatif.runner import run_block
from thread_support import one_thread  # noqa: F401 (autouse: one torch thread)
from torch import nn
from whatif_support import SmallConvNet, flags_state, precision_snapshot, trained_setup, world


@pytest.fixture
def seeded() -> None:
    random.seed(1)
    np.random.seed(1)
    torch.manual_seed(1)


def test_snapshot_puts_back_everything_changed_in_place(seeded: None) -> None:
    model, opt, loader, _ = trained_setup()
    before = world(model, opt)
    snap = Snapshot.capture(model, opt, loader=loader)

    with torch.no_grad():
        model.conv.weight.add_(1.0)
        model.bn.running_mean.add_(1.0)
    model.head.weight.grad = None
    assert model.conv.weight.grad is not None
    model.conv.weight.grad.zero_()
    model.train()
    model.head.bias.requires_grad_(False)
    opt.param_groups[0]["lr"] = 0.5
    next(iter(opt.state.values()))["exp_avg"].mul_(3)
    random.random()
    np.random.rand()
    torch.rand(3)
    torch.set_float32_matmul_precision("high")
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.set_grad_enabled(False)
    torch.set_default_dtype(torch.float64)
    torch.set_anomaly_enabled(True)
    assert world(model, opt) != before

    changed = snap.restore()
    assert world(model, opt) == before
    assert torch.get_default_dtype() == torch.float32 and torch.is_grad_enabled()
    for what in ("model weights", "model buffers", "model gradients", "model training mode"):
        assert what in changed
    assert "optimizer hyperparameters" in changed and "optimizer state" in changed
    assert any(c.startswith("torch flag") for c in changed)


def test_snapshot_restores_nothing_when_nothing_changed() -> None:
    model, opt, loader, _ = trained_setup()
    snap = Snapshot.capture(model, opt, loader=loader)
    versions = [p._version for p in model.parameters()]
    assert snap.restore() == []
    # Untouched tensors are not even written to.
    assert [p._version for p in model.parameters()] == versions


def test_tf32_table_in_a_mixed_legacy_and_new_state_comes_back_exactly() -> None:
    # torch >= 2.9: a table entry set through the new API while the legacy switch says otherwise
    # makes the legacy getters raise; a restore must neither trip on it nor "fix" it.
    snap_outer = Snapshot.capture(nn.Linear(2, 2))
    try:
        if hasattr(torch._C, "_set_fp32_precision_setter"):
            torch._C._set_fp32_precision_setter("cuda", "matmul", "tf32")
            torch._C._set_fp32_precision_setter("cuda", "conv", "none")
        before = precision_snapshot()
        snap = Snapshot.capture(nn.Linear(2, 2))
        torch.set_float32_matmul_precision("medium")
        torch.backends.cudnn.allow_tf32 = False
        assert precision_snapshot() != before
        snap.restore()
        assert precision_snapshot() == before
    finally:
        snap_outer.restore()


def test_arm_flags_are_set_only_while_its_steps_run_even_when_a_step_raises() -> None:
    model, opt, loader, loss_fn = trained_setup()
    before = flags_state()
    calls = {"n": 0}
    seen: dict[str, Any] = {}

    def step(m: nn.Module, batch: Any, o: Any) -> None:
        seen.update(read_flags())
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("boom in the step")

    work = Workload(model, loader, loss_fn, opt, step, torch.device("cpu"), [next(iter(loader))])
    arm = Arm(work, planned("tf32 + benchmark", tf32=True, cudnn_benchmark=True))
    with pytest.raises(Exception, match="boom"):
        run_block(arm, steps=3, warmup=0)
    arm.close()
    assert seen["float32_matmul_precision"] == "high" and seen["cudnn.benchmark"] is True
    assert flags_state() == before


def test_diagnose_leaves_the_world_bit_identical(seeded: None) -> None:
    model, opt, loader, loss_fn = trained_setup()
    before = world(model, opt)
    report = diagnose(
        model,
        loader,
        loss_fn=loss_fn,
        optimizer=opt,
        steps=3,
        budget_s=8,
        experiments=["batch_size", "channels_last", "num_workers"],
    )
    report.validate()
    assert world(model, opt) == before
    assert not any("Restored" in n for n in report.notes)  # nothing of the user's was touched
    assert multiprocessing.active_children() == []


def test_a_raising_loss_gives_a_step_error_and_leaves_the_world_as_found(seeded: None) -> None:
    model, opt, loader, _ = trained_setup()
    before = world(model, opt)
    calls = {"n": 0}

    def loss_fn(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        calls["n"] += 1
        if calls["n"] == 3:
            raise ValueError("label 11 out of range")
        return nn.functional.cross_entropy(out, y)

    with pytest.raises(StepError, match="label 11 out of range") as err:
        diagnose(model, loader, loss_fn=loss_fn, optimizer=opt, steps=3, budget_s=5)
    assert isinstance(err.value.__cause__, ValueError)
    assert err.value.experiment == "your step with your loader"
    assert world(model, opt) == before


class ViewsItsInput(SmallConvNet):
    """Its forward flattens its input with view(), which fails on channels_last inputs."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.view(x.shape[0], -1).view(x.shape))


def test_a_step_that_fails_only_with_a_change_skips_that_experiment(seeded: None) -> None:
    _, _, loader, loss_fn = trained_setup()
    model = ViewsItsInput()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    before = world(model, opt)
    report = diagnose(
        model, loader, loss_fn, opt, steps=3, budget_s=5, experiments=["channels_last"]
    )
    # The change is made where a re-run makes it, at the model's call: the forward fails.
    row = next(w for w in report.what_if if w.finding_id == "load.channels_last")
    assert row.skipped is not None and "fails with your code" in row.skipped
    assert world(model, opt) == before


def _oom_step(limit: int, fixed_cost_s: float = 0.0) -> Any:
    """A simulated OOM: raises torch.OutOfMemoryError for batches larger than ``limit``.

    ``fixed_cost_s`` is a per-step cost independent of the batch (like launch overhead on a GPU),
    so that a doubled batch is clearly faster per sample and the sweep goes on to the OOM."""

    def step_fn(m: nn.Module, batch: Any, o: torch.optim.Optimizer | None) -> None:
        x, y = batch
        if x.shape[0] > limit:
            raise torch.OutOfMemoryError(f"simulated: CUDA out of memory (batch {x.shape[0]})")
        time.sleep(fixed_cost_s)
        loss = nn.functional.cross_entropy(m(x), y)
        assert o is not None
        o.zero_grad()
        loss.backward()
        o.step()

    return step_fn


def test_simulated_oom_stops_the_batch_sweep_and_restores(seeded: None) -> None:
    model, opt, loader, _ = trained_setup(batch_size=8)
    before = world(model, opt)
    report = diagnose(
        model,
        loader,
        optimizer=opt,
        step_fn=_oom_step(limit=16, fixed_cost_s=0.01),
        steps=3,
        budget_s=10,
        experiments=["batch_size"],
    )
    row = next(w for w in report.what_if if w.finding_id == "load.small_batch")
    assert row.skipped is None and row.series is not None
    sizes = [p["x"] for p in row.series if p.get("label") != "out of memory"]
    assert max(sizes) == 16  # 16 ran, the next size hit the (simulated) OOM and the sweep stopped
    # The next size is 32 or, after a big gain, 64: the point marked is the one that was tried.
    oom = [p["x"] for p in row.series if p.get("label") == "out of memory"]
    assert len(oom) == 1 and oom[0] in (32, 64)
    assert world(model, opt) == before


def test_simulated_oom_in_the_baseline_is_a_clear_error(seeded: None) -> None:
    model, opt, loader, _ = trained_setup(batch_size=8)
    before = world(model, opt)
    with pytest.raises(OutOfMemoryDuringDiagnosis, match="copy of your") as err:
        diagnose(model, loader, optimizer=opt, step_fn=_oom_step(limit=4), steps=3, budget_s=5)
    assert isinstance(err.value.__cause__, torch.OutOfMemoryError)
    assert world(model, opt) == before


def test_ctrl_c_from_the_progress_callback_restores_everything(seeded: None) -> None:
    model, opt, loader, loss_fn = trained_setup()
    before = world(model, opt)
    stages: list[str] = []

    def progress(stage: str, fraction: float) -> None:
        stages.append(stage)
        if stage.startswith("what-if: batch size") and len(stages) > 12:
            torch.set_float32_matmul_precision("high")  # as if an experiment had a flag set
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        diagnose(
            model,
            loader,
            loss_fn=loss_fn,
            optimizer=opt,
            steps=3,
            budget_s=20,
            progress=progress,
            experiments=["batch_size"],
        )
    assert any(s.startswith("what-if: batch size") for s in stages)
    assert world(model, opt) == before


def test_a_step_fn_that_trains_the_users_own_model_is_refused_and_undone(seeded: None) -> None:
    model, opt, loader, loss_fn = trained_setup()
    before = world(model, opt)

    def global_step(m: nn.Module, batch: Any, o: Any) -> None:
        x, y = batch
        opt.zero_grad()  # the user's optimizer, not the copy it was given
        loss_fn(model(x), y).backward()
        opt.step()

    with pytest.raises(DiagnoseError, match="must train the model and optimizer it is given"):
        diagnose(model, loader, optimizer=opt, step_fn=global_step, steps=3, budget_s=5)
    assert world(model, opt) == before


def test_batchnorm_running_stats_changed_without_a_version_bump_are_restored() -> None:
    # BatchNorm updates running_mean/var in place from C++ (and under no_grad) without bumping
    # the buffers' version counters: the snapshot must compare them by value.
    model = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 2))
    snap = Snapshot.capture(model)
    digest = world(model, None)
    bn = model[1]
    assert isinstance(bn, nn.BatchNorm1d)
    with torch.no_grad():
        model(torch.randn(16, 4))
        assert bn.running_var is not None
        bn.running_var.data.mul_(3.0)  # .data: a write no version counter sees
    assert world(model, None) != digest
    assert snap.touched() == ["model weights"]
    changed = snap.restore()
    assert "model buffers" in changed
    assert world(model, None) == digest
    assert snap.restore() == []


def test_a_step_fn_that_trains_the_users_batchnorm_model_is_refused_and_undone(
    seeded: None,
) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))
    loader = [(torch.randn(8, 8), torch.randint(0, 3, (8,))) for _ in range(4)]
    before = world(model, None)

    def users_model_step(m: nn.Module, batch: Any, o: Any) -> None:
        x, _y = batch
        with torch.no_grad():
            model(x)  # the user's model, not the copy: BatchNorm's running stats move

    with pytest.raises(DiagnoseError, match="must train the model and optimizer it is given"):
        diagnose(model, loader, step_fn=users_model_step, steps=2, budget_s=5)
    assert world(model, None) == before


def test_writes_through_data_are_seen_and_undone() -> None:
    # ``p.data`` has its own version counter: writes through it move none of the parameter's.
    model = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2))
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(3, 4)).sum().backward()
    opt.step()
    snap = Snapshot.capture(model, opt)
    digest = world(model, opt)
    first = next(model.parameters())
    version = first._version
    first.data.add_(1.0)
    assert first._version == version  # the hole: no counter moved
    model[2].weight.data = torch.zeros(3, 3)  # replaced, another shape
    exp_avg = opt.state[first]["exp_avg"]
    exp_avg.data.mul_(2.0)
    assert snap.touched() == ["model weights", "optimizer state"]
    changed = snap.restore()
    assert "model weights" in changed and "optimizer state" in changed
    assert world(model, opt) == digest
    assert model[2].weight.shape == (2, 6)
    assert snap.restore() == [] and snap.touched() == []


def test_a_step_fn_that_writes_the_users_weights_through_data_is_refused_and_undone(
    seeded: None,
) -> None:
    model, opt, loader, loss_fn = trained_setup()
    before = world(model, opt)

    def data_step(m: nn.Module, batch: Any, o: Any) -> None:
        x, y = batch
        loss_fn(m(x), y).backward()
        with torch.no_grad():
            for p in model.parameters():  # the user's global model, not the copy ``m``
                p.data.add_(-0.01 * torch.ones_like(p))

    with pytest.raises(DiagnoseError, match="must train the model and optimizer it is given"):
        diagnose(model, loader, optimizer=opt, step_fn=data_step, steps=3, budget_s=5)
    assert world(model, opt) == before
