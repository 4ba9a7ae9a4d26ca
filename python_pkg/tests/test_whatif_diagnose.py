"""gpusight.diagnose on the CPU with real torch: the num_workers sweep on a real DataLoader, the
report contract, the budget, progress, a loader that raises, and the ``%gpusight diagnose`` line."""

from __future__ import annotations

import multiprocessing
import time
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from gpusight.knobs.autocast import WAS_OFF
from gpusight.report_schema import validate
from gpusight.whatif import LoaderError, diagnose
from gpusight.whatif.arms import Arm, Workload, planned
from gpusight.whatif.runner import run_block
from thread_support import one_thread  # noqa: F401 (autouse: one torch thread)
from torch import nn
from torch.utils.data import DataLoader
from whatif_support import (
    FailingDataset,
    SleepyDataset,
    slow_worker_start,
    trained_setup,
    world,
)


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
    # The winners' final run measured the one winner again: no card (code) of its own.
    combo = report.what_if[-1]
    assert combo.change.startswith("all winners together") and combo.fix is None
    assert world(model, opt) == before
    assert multiprocessing.active_children() == []


def test_the_cards_code_runs_in_the_kernel_that_called_diagnose() -> None:
    # The notebook of issue #36: its data was `train_ds`, its loader `train_loader`, and the
    # cards' `DataLoader(dataset, ...)` raised NameError once inserted.
    net, sgd = _mlp()
    train_ds = SleepyDataset(delay_s=0.004)
    train_loader = DataLoader(train_ds, batch_size=8, shuffle=True)
    report = diagnose(net, train_loader, loss_fn=nn.CrossEntropyLoss(), optimizer=sgd,
                      steps=4, budget_s=15, experiments=["num_workers"])  # fmt: skip
    fix = report.finding("load.input_bound").fix  # type: ignore[union-attr]
    assert fix.code is not None and "DataLoader(train_ds, batch_size=8" in fix.code
    assert fix.code.count("train_loader = ") == 1 and fix.unbound_names is None
    ns = {"torch": torch, "train_ds": train_ds, "train_loader": train_loader}
    exec(compile(fix.code, "<card>", "exec"), ns)  # no NameError
    assert ns["train_loader"] is not train_loader and ns["train_loader"].num_workers >= 2


def test_the_dataloader_winners_are_measured_together_in_one_loader() -> None:
    # Items wait 4 ms (a file read) and each worker takes 150 ms to start (its worker_init_fn):
    # two workers win, and so does keeping them across epochs. Both then run in one loader,
    # measured against the user's (num_workers=0), as a row of its own with the loader's code.
    model, opt = _mlp()
    loader = DataLoader(
        SleepyDataset(n=256, delay_s=0.004),
        batch_size=8,
        shuffle=True,
        worker_init_fn=slow_worker_start,
    )
    before = world(model, opt)
    report = diagnose(
        model,
        loader,
        loss_fn=nn.CrossEntropyLoss(),
        optimizer=opt,
        steps=4,
        budget_s=20,
        experiments=["num_workers", "persistent_workers", "loader_combined"],
    )
    assert world(model, opt) == before  # taken now: the snippet run below draws from the RNG
    report.validate()
    sweep, keep, both = report.what_if[:3]
    assert sweep.params and sweep.params["won"], (sweep.skipped, sweep.params)
    assert keep.params and keep.params["won"], (keep.skipped, keep.params)
    w = sweep.params["num_workers"]
    assert keep.params["num_workers"] == w  # persistent workers are measured at the winner's
    assert both.skipped is None, both.skipped
    assert both.finding_id == "load.input_bound"
    assert both.change == f"DataLoader(num_workers={w}, persistent_workers=True), together"
    assert both.params is not None
    assert both.params["num_workers"] == w and both.params["persistent_workers"] is True
    assert both.params["loader_settings"] == "num_workers, persistent_workers"
    assert "pin_memory" not in both.params and both.params["non_blocking"] is False
    assert both.params["against"] == "your loader"
    assert both.speedup is not None and both.speedup > 1.3
    assert both.fix is not None and both.fix.snippet_id == "whatif.loader_combined"
    code = both.fix.code or ""
    assert code.startswith("# The DataLoader winners together:")
    assert "# Keep your other DataLoader arguments as they are: worker_init_fn." in code
    assert (
        f"DataLoader(dataset, batch_size=8, shuffle=True, num_workers={w}, "
        "persistent_workers=True)" in code
    )
    # The measured loader's code runs as written (on a small dataset of the same shapes), in
    # the caller's names: its optimizer is `opt` here.
    assert "opt.step()" in code and "optimizer" not in code
    torch.manual_seed(1)
    data = torch.utils.data.TensorDataset(torch.randn(32, 16), torch.randint(0, 4, (32,)))
    fresh, fresh_opt = _mlp()
    ns: dict[str, Any] = {
        "dataset": data,
        "model": fresh,
        "opt": fresh_opt,
        "loss_fn": nn.CrossEntropyLoss(),
        "device": torch.device("cpu"),
    }
    weight = fresh[0].weight.detach().clone()
    exec(compile(code, "<loader together>", "exec"), ns)
    assert ns["loader"].num_workers == w and ns["loader"].persistent_workers is True
    assert not torch.equal(fresh[0].weight, weight)
    ns["loader"]._iterator._shutdown_workers()  # persistent workers outlive the loop
    # A row, not a winner of its own: the finding keeps it as evidence, the final run of every
    # winner does not count it twice.
    finding = report.finding("load.input_bound")
    assert finding is not None
    assert any(e.label == both.change and e.value == both.speedup for e in finding.evidence)
    combo = report.what_if[-1]
    assert combo.change == "all winners together: " + ", ".join(
        [f"num_workers={w}", "persistent_workers"]
    )
    # Two changes together: a row of its own, with the loop that was measured. It reads names
    # this caller never defined (the dataset, the loss): offered for Copy, and says which.
    assert combo.fix is not None and combo.fix.code is not None
    compile(combo.fix.code, "<combined>", "exec")
    assert combo.fix.unbound_names and "model" not in combo.fix.unbound_names, combo.fix.code
    assert multiprocessing.active_children() == []


def test_a_loader_setting_is_measured_on_top_of_the_num_workers_winner() -> None:
    # What a DataLoader setting (prefetch_factor here; pin_memory on a GPU) is measured against:
    # the sweep's winner (2 workers), not the user's loader without workers.
    from gpusight.knobs import by_name
    from gpusight.report import WhatIf
    from gpusight.whatif.arms import Workload, loader_overrides, planned
    from gpusight.whatif.context import Budget, Context
    from gpusight.whatif.procedures import OnLoader, Outcome

    model, opt = _mlp()
    loader = DataLoader(SleepyDataset(n=256, delay_s=0.002), batch_size=8)
    work = Workload(model, loader, nn.CrossEntropyLoss(), opt, None, torch.device("cpu"))
    ctx = Context(work, Budget(20, None), steps=4, reps=2, cpu_count=2)
    knob = by_name("loader")
    assert knob is not None
    prefetch = OnLoader(knob, next(r for r in knob.local_rows() if r.key == "prefetch_factor"))
    why = prefetch.applies(ctx)
    assert why == "no worker processes (num_workers=0): prefetch_factor is per worker"
    try:
        ctx.loader_base = ctx.build(planned("your step with your loader", source="loader"))
        yours_ms = ctx.baseline_block("loader")  # 16 ms of item reads per batch, one process
        won = planned("num_workers=2", source="loader", num_workers=2)
        sweep = WhatIf("DataLoader(num_workers=2) instead of 0", 16.0, 8.0, 2.0, "load.input_bound")
        ctx.results["num_workers"] = Outcome("num_workers", sweep, won, "load.input_bound")
        out = prefetch.apply(ctx)
        assert ctx.arms == [ctx.loader_base]  # the 2-worker base arm was dropped
    finally:
        ctx.close()
    w = out.what_if
    assert w.change == "DataLoader(prefetch_factor=4) with num_workers=2"
    assert w.params is not None and w.params["num_workers"] == 2 and w.params["repeats"] == 2
    assert w.params["against"] == "num_workers=2 (the sweep's winner)"
    assert out.params["prefetch_factor"] == 4
    # Its baseline read batches with two workers: about half the user's loader's step time.
    assert w.before_ms is not None and w.before_ms < 0.8 * yours_ms
    if out.winner is not None:
        assert loader_overrides(out.winner) == {"num_workers": 2, "prefetch_factor": 4}


def test_a_fast_many_worker_loader_gets_more_whole_rounds_per_block() -> None:
    # Workers deliver in bursts of `w` batches: a block starts anywhere in a round, so a block of
    # two rounds carries up to half a round's error. While rounds are cheap (the sweep measured
    # the step), a block takes more of them; a slow step keeps two.
    from gpusight.report import WhatIf
    from gpusight.whatif.arms import Workload, planned
    from gpusight.whatif.context import MAX_ROUNDS, MIN_ROUNDS, ROUNDS_BLOCK_S, Budget, Context
    from gpusight.whatif.procedures import Outcome

    model, opt = _mlp()
    loader = DataLoader(SleepyDataset(n=64, delay_s=0.0), batch_size=8)
    work = Workload(model, loader, nn.CrossEntropyLoss(), opt, None, torch.device("cpu"))
    ctx = Context(work, Budget(20, None), steps=20, reps=2, cpu_count=16)
    sixteen = planned("num_workers=16", source="loader", num_workers=16)
    assert ctx.steps_for(planned("yours", source="loader")) == 20  # no workers: the steps
    assert ctx.steps_for(sixteen) == MIN_ROUNDS * 16  # nothing measured yet

    def won(after_ms: float) -> None:
        sweep = WhatIf("DataLoader(num_workers=16) instead of 0", 34.0, after_ms, 15.0, None)
        ctx.results["num_workers"] = Outcome("num_workers", sweep, sixteen, "load.input_bound")

    won(2.2)  # slow_loader on the H200: a round is 35 ms
    steps = ctx.steps_for(sixteen)
    assert steps == MAX_ROUNDS * 16 and steps * 2.2e-3 <= ROUNDS_BLOCK_S
    won(50.0)  # a model-bound step: a round is 0.8 s, two rounds stay
    assert ctx.steps_for(sixteen) == MIN_ROUNDS * 16
    # another worker count than the sweep's winner: its step time is unknown
    eight = planned("num_workers=8", source="loader", num_workers=8)
    won(2.2)
    assert ctx.steps_for(eight) == 3 * 8  # ceil(20 / 8) rounds


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


@pytest.mark.parametrize("amp_in_step", [False, True])
def test_autocast_arm_turns_autocast_back_on_where_the_step_fn_turned_it_off(
    amp_in_step: bool,
) -> None:
    """A step written ``with torch.autocast(..., enabled=use_amp)`` turns the what-if's autocast
    off around the forward; the arm turns it back on there (on its copy), and counts it."""
    model, opt, loader, loss_fn = trained_setup()
    dtypes: list[torch.dtype] = []

    def step(m: nn.Module, batch: Any, o: Any) -> None:
        x, y = batch
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp_in_step):
            out = m(x)
        dtypes.append(out.dtype)
        loss = loss_fn(out.float(), y)
        o.zero_grad(set_to_none=True)
        loss.backward()
        o.step()

    work = Workload(model, loader, loss_fn, opt, step, torch.device("cpu"), [next(iter(loader))])
    arm = Arm(work, planned("bf16", autocast="bfloat16"))
    run_block(arm, steps=2, warmup=0)
    arm.close()
    assert dtypes == [torch.bfloat16, torch.bfloat16]
    assert arm.hooks.hits.get(WAS_OFF, 0) == (0 if amp_in_step else 2)
    notes = [n for k in arm.knobs for n in k.local_notes(arm.hooks.hits)]
    assert bool(notes) == (not amp_in_step)
    assert not torch.is_autocast_enabled("cpu")  # every forward's autocast ended
    assert not model._forward_pre_hooks and not model._forward_hooks  # the user's model: none


def test_the_compile_arm_compiles_its_copys_forward_as_a_rerun_does() -> None:
    """The kernel's compile arm is the knob's own ``prepare``: the copy's ``forward`` compiled,
    its hooks (the other knobs' changes) outside the compiled code; the user's model untouched,
    and the copy's forward restored when the arm closes."""
    model, opt, loader, loss_fn = trained_setup()
    work = Workload(model, loader, loss_fn, opt, None, torch.device("cpu"), [next(iter(loader))])
    arm = Arm(work, planned("compile", compile="default", channels_last=True))
    copy = arm.model
    compiled = vars(copy).get("forward")
    assert compiled is not None and hasattr(compiled, "_torchdynamo_orig_callable")
    assert copy._forward_pre_hooks  # channels_last's ``before``, outside the compiled forward
    assert "forward" not in vars(model) and not model._forward_pre_hooks
    arm.close()
    assert "forward" not in vars(copy) and not copy._forward_pre_hooks
