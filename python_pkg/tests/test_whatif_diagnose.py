"""gpusight.diagnose on the CPU with real torch: the num_workers sweep on a real DataLoader, the
report contract, the budget, progress, a loader that raises, and the ``%gpusight diagnose`` line."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from gpusight.report_schema import validate
from gpusight.whatif import LoaderError, diagnose
from torch import nn
from torch.utils.data import DataLoader
from whatif_support import FailingDataset, SleepyDataset, trained_setup, world


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _mlp() -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def test_more_workers_measurably_speed_up_a_loader_that_waits_on_io() -> None:
    # Each item sleeps 4 ms (a file read): 32 ms a batch in the main process, and two worker
    # processes wait in parallel, on any number of cores.
    model, opt = _mlp()
    loader = DataLoader(SleepyDataset(delay_s=0.004), batch_size=8, shuffle=True)
    before = world(model, opt)
    report = diagnose(
        model,
        loader,
        loss_fn=nn.CrossEntropyLoss(),
        optimizer=opt,
        steps=4,
        budget_s=20,
        experiments=["num_workers"],
    )
    report.validate()
    row = next(w for w in report.what_if if w.finding_id == "load.input_bound")
    assert row.skipped is None, row.skipped
    assert row.speedup is not None and row.speedup > 1.3
    assert row.params is not None and row.params["num_workers"] >= 2
    assert row.series and row.series[0]["label"] == "yours"
    finding = report.finding("load.input_bound")
    assert finding is not None and finding.impact.basis == "measured"
    assert finding.impact.speedup == pytest.approx(row.speedup)
    assert (
        finding.fix.code is not None
        and f"num_workers={row.params['num_workers']}" in finding.fix.code
    )
    compile(finding.fix.code, "<fix>", "exec")
    assert report.verdict.bottleneck == "input_pipeline"
    combo = report.what_if[-1]
    assert combo.change.startswith("all winners together") and combo.fix is not None
    assert combo.fix.code is not None
    compile(combo.fix.code, "<combined>", "exec")
    assert world(model, opt) == before
    assert multiprocessing.active_children() == []


def test_report_is_schema_valid_and_says_why_each_gpu_experiment_was_skipped() -> None:
    model, opt, loader, loss_fn = trained_setup()
    report = diagnose(
        model,
        loader,
        loss_fn=loss_fn,
        optimizer=opt,
        steps=3,
        budget_s=6,
        experiments=["pin_memory", "autocast", "tf32", "cudnn_benchmark", "dataset_on_gpu"],
    )
    data = report.to_dict()
    validate(data)
    assert data["kind"] == "diagnose"
    skipped = {w["change"]: w["skipped"] for w in data["what_if"]}
    assert len(skipped) == 5
    assert all(reason and "no CUDA device" in reason for reason in skipped.values())
    assert data["run"]["step_time_ms"] > 0
    assert data["verdict"]["bottleneck"] == "none" and data["findings"] == []


def test_channels_last_is_skipped_for_a_model_without_convolutions() -> None:
    model, opt = _mlp()
    data = torch.utils.data.TensorDataset(torch.randn(64, 16), torch.randint(0, 4, (64,)))
    report = diagnose(
        model,
        DataLoader(data, batch_size=8),
        loss_fn=nn.CrossEntropyLoss(),
        optimizer=opt,
        steps=3,
        budget_s=4,
        experiments=["channels_last"],
    )
    assert report.what_if[0].skipped == "the model has no 2-d convolutions"


def test_budget_is_kept_and_what_does_not_fit_is_skipped_as_budget_exhausted() -> None:
    model, opt, loader, loss_fn = trained_setup()
    t0 = time.perf_counter()
    report = diagnose(model, loader, loss_fn=loss_fn, optimizer=opt, steps=3, budget_s=1.5)
    wall = time.perf_counter() - t0
    report.validate()
    assert wall < 1.5 + 2.0  # the baseline always runs; everything after it stays in budget
    reasons = [w.skipped or "" for w in report.what_if]
    assert any("budget exhausted" in r for r in reasons)
    compile_row = next(w for w in report.what_if if w.change == "torch.compile")
    assert compile_row.skipped is not None and "budget exhausted" in compile_row.skipped


def test_progress_reports_stages_and_a_fraction_that_only_grows() -> None:
    model, opt, loader, loss_fn = trained_setup()
    calls: list[tuple[str, float]] = []
    diagnose(
        model,
        loader,
        loss_fn=loss_fn,
        optimizer=opt,
        steps=3,
        budget_s=4,
        progress=lambda stage, fraction: calls.append((stage, fraction)),
        experiments=["channels_last"],
    )
    fractions = [f for _, f in calls]
    assert fractions == sorted(fractions) and 0.0 <= fractions[0] and fractions[-1] == 1.0
    stages = [s for s, _ in calls]
    assert stages[-1] == "done"
    assert any(s.startswith("baseline") for s in stages)
    assert any(s.startswith("what-if: channels_last") for s in stages)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_loader_that_raises_is_a_loader_error_with_batch_experiment_and_cause(
    workers: int,
) -> None:
    model, opt = _mlp()
    loader = DataLoader(FailingDataset(bad=37), batch_size=8, num_workers=workers)
    before = world(model, opt)
    with pytest.raises(LoaderError) as err:
        diagnose(model, loader, loss_fn=nn.CrossEntropyLoss(), optimizer=opt, steps=4, budget_s=5)
    e = err.value
    assert e.batch_index == 37 // 8  # the batch holding item 37
    assert e.experiment == "your step with your loader"
    assert isinstance(e.__cause__, ValueError) and "corrupt record 37" in str(e.__cause__)
    assert f"batch {37 // 8}" in str(e) and "corrupt record 37" in str(e)
    assert world(model, opt) == before
    assert multiprocessing.active_children() == []


def test_a_generator_is_refused_before_anything_runs() -> None:
    model, opt = _mlp()
    batches = ((torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(10))
    with pytest.raises(TypeError, match="one-shot"):
        diagnose(model, batches, loss_fn=nn.CrossEntropyLoss(), optimizer=opt)
    assert len(list(batches)) == 10  # not a batch was taken


def test_a_list_of_batches_and_a_model_that_returns_its_loss() -> None:
    class WithLoss(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(16, 1)

        def forward(self, x: torch.Tensor, y: torch.Tensor) -> Any:
            return SimpleNamespace(loss=((self.lin(x).squeeze(1) - y) ** 2).mean())

    torch.manual_seed(0)
    model = WithLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = [(torch.randn(8, 16), torch.randn(8), None) for _ in range(6)]
    batches = [{"x": x, "y": y} for x, y, _ in batches]
    report = diagnose(
        model, batches, optimizer=opt, steps=3, budget_s=4, experiments=["num_workers"]
    )
    assert report.what_if[0].skipped is not None and "not a torch.utils.data.DataLoader" in (
        report.what_if[0].skipped
    )
    assert report.run is not None and report.run["step_time_ms"] > 0


def test_the_line_magic_resolves_names_and_options() -> None:
    from gpusight.jupyter.diagnose_magic import run_diagnose
    from IPython.core.error import UsageError

    model, opt, loader, loss_fn = trained_setup()
    shell = SimpleNamespace(
        user_ns={"net": model, "train": SimpleNamespace(dl=loader), "o": opt, "lf": loss_fn}
    )
    stages: list[str] = []
    report = run_diagnose(
        "diagnose net train.dl --optimizer o --loss lf --steps 3 --budget 4 --only channels_last",
        shell,
        progress=lambda s, f: stages.append(s),
    )
    assert report.kind == "diagnose" and any("channels_last" in s for s in stages)
    assert report.what_if[0].change.startswith("model and 4-d inputs")
    with pytest.raises(UsageError, match="'nett' is not defined"):
        run_diagnose("nett train.dl", shell)
    with pytest.raises(UsageError, match="train has no attribute 'loader'"):
        run_diagnose("net train.loader", shell)
    with pytest.raises(UsageError, match="unknown experiments"):
        run_diagnose("net train.dl --only warp_drive", shell, progress=lambda s, f: None)
    with pytest.raises(UsageError, match="usage"):
        run_diagnose("net", shell)
