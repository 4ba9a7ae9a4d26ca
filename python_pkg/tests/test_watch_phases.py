"""What runs between the training steps (``watch/phases.py``, ``rules/between_steps.py``): an
evaluation every k steps and a checkpoint every k steps, found with their period and line, timed
apart from the training step, covered by the measured window, and ranked against the step's own
causes. Real CPU torch, real models (a transformer encoder, a small conv net)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
import torch
from gpusight.report import Report
from gpusight.rules import between_steps
from gpusight.rules.between_steps import PhaseSeen, per_step_ms, period_of
from gpusight.rules.workload import LoaderInfo, WorkloadEvidence, analyse
from gpusight.watch.session import Watch
from torch import nn
from torch.utils.data import DataLoader
from watch_support import Classifier, train_val_loaders


def evaluate(model: nn.Module, val: DataLoader[Any]) -> int:
    model.eval()  # EVAL_LINE
    correct = 0
    with torch.no_grad():
        for x, y in val:
            correct += int((model(x).argmax(1) == y).sum().item())
    model.train()
    return correct


def _line_of(fn: Any, marker: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, text in enumerate(lines) if marker in text)


def train_with_eval(every: int, steps: int, once_at: int = -1, **watch: Any) -> Report:
    torch.manual_seed(0)
    model = Classifier()
    opt = torch.optim.AdamW(model.parameters(), 1e-3)
    train, val = train_val_loaders()
    with Watch(steps=steps, **watch) as w:
        for step, (x, y) in enumerate(train):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % every == every - 1 or step == once_at:
                evaluate(model, val)  # CALL_LINE
    assert w.report is not None
    return w.report


def test_an_evaluation_every_k_steps_is_found_with_its_period_and_lines() -> None:
    report = train_with_eval(every=6, steps=12)
    run = report.run or {}
    (phase,) = run["phases"]
    assert phase["kind"] == "evaluation"
    assert phase["period_steps"] == 6
    assert len(phase["steps"]) == len(phase["times_ms"]) >= 2
    here = Path(__file__).name
    assert phase["source"]["file"].endswith(here)
    assert phase["source"]["line"] == _line_of(evaluate, "EVAL_LINE")
    assert phase["caller"]["line"] == _line_of(train_with_eval, "CALL_LINE")
    # Its time is in the steps' series, and in the breakdown as its own category only.
    times = run["step_times_ms"]
    for i, ms in zip(phase["steps"], phase["times_ms"], strict=True):
        assert times[i] > ms > run["step_time_median_ms"]
    split = run["breakdown_ms"]
    assert split["between_steps"] == pytest.approx(phase["per_step_ms"], rel=1e-3)
    assert sum(split.values()) == pytest.approx(run["step_time_ms"], rel=0.02)
    # 48 batches of evaluation against one of training: the phase is the verdict.
    assert report.verdict.bottleneck == "between_steps"
    assert "every 6 steps" in report.verdict.summary
    f = report.finding("code.eval_phase")
    assert f is not None and f.severity == "critical"
    assert f.impact.speedup_range is not None and f.impact.speedup_range[1] > 1.5
    assert f.fix.snippet_id == "phase.eval_less_often"  # no sync can be seen on the CPU
    # The evaluation's own loader is no epoch of the training loop's.
    assert all(i not in run.get("epoch_starts", []) for i in phase["steps"])


def test_the_window_grows_to_hold_a_phase_seen_before_it() -> None:
    # 4 measured steps asked for (steps 8-11 after warm-up and profiling); the evaluation runs
    # every 6, in step 7 and 13: the watch measures on to the one in step 13.
    report = train_with_eval(every=6, steps=4)
    run = report.run or {}
    (phase,) = run["phases"]
    assert run["steps"] > 4
    assert phase["steps"], "the measured steps hold no evaluation"
    said = f"stopped after {run['steps']} measured steps (4 asked for, more to cover an evaluation"
    assert any(n.startswith(said) for n in report.notes)
    assert report.finding("code.eval_phase") is not None


def test_a_phase_beyond_reach_is_said_and_claims_nothing() -> None:
    # One evaluation, in the warm-up: the watch measures on (up to 8x the 3 steps asked for)
    # for another, sees none, and says so; nothing is claimed for it.
    report = train_with_eval(every=10_000, steps=3, once_at=1)
    run = report.run or {}
    assert run["steps"] == 3 * 8
    (phase,) = run["phases"]
    assert phase["steps"] == [] and phase["per_step_ms"] == 0
    assert "between_steps" not in run["breakdown_ms"]
    assert report.finding("code.eval_phase") is None
    assert any("none within the 24 measured steps" in n for n in report.notes)


def test_training_that_only_calls_train_and_inference_have_no_phase() -> None:
    torch.manual_seed(0)
    model = Classifier()
    opt = torch.optim.SGD(model.parameters(), 0.01)
    train, val = train_val_loaders()
    with Watch(steps=8) as w:
        for x, y in train:
            model.train()  # every step, as many loops do
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert w.report is not None and "phases" not in (w.report.run or {})
    assert w.report.finding("code.eval_phase") is None
    model.eval()
    with Watch(steps=8) as w2, torch.no_grad():
        for x, _ in val:
            model(x)
    assert w2.report is not None and "phases" not in (w2.report.run or {})
    assert w2.report.verdict.bottleneck != "between_steps"


def test_a_teacher_put_in_eval_mode_every_step_is_part_of_the_step() -> None:
    # Distillation: the teacher goes into eval mode and runs under no_grad at every step. That
    # is the training step's own work, no evaluation between the steps.
    torch.manual_seed(0)
    teacher, student = Classifier(), Classifier()
    opt = torch.optim.AdamW(student.parameters(), 1e-3)
    train, _ = train_val_loaders()
    with Watch(steps=10) as w:
        for x, y in train:
            teacher.eval()
            with torch.no_grad():
                soft = teacher(x).softmax(-1)
            out = student(x)
            loss = nn.functional.cross_entropy(out, y) + nn.functional.kl_div(
                out.log_softmax(-1), soft, reduction="batchmean"
            )
            opt.zero_grad()
            loss.backward()
            opt.step()
    report = w.report
    assert report is not None
    run = report.run or {}
    assert "phases" not in run and "between_steps" not in run["breakdown_ms"]
    assert report.finding("code.eval_phase") is None
    assert report.verdict.bottleneck != "between_steps"
    assert any("eval mode at every step" in n for n in report.notes)
    # The steps keep all their time: the split adds up to the steps' own mean.
    times = run["step_times_ms"]
    assert sum(run["breakdown_ms"].values()) == pytest.approx(run["step_time_ms"], rel=0.02)
    assert run["step_time_ms"] == pytest.approx(sum(times) / len(times), rel=0.1)


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.Conv2d(16, 32, 3)
        )
        self.fc = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.body(x).mean((2, 3)))


def test_a_checkpoint_every_k_steps_is_found_and_the_file_is_the_scripts(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = ConvNet()
    opt = torch.optim.SGD(model.parameters(), 0.1, momentum=0.9)
    x, y = torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))
    big = {"pad": torch.zeros(4_000_000)}  # a slow enough save to stand out
    with Watch(steps=10) as w:
        for step in range(200):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 4 == 3:
                torch.save({"model": model.state_dict(), **big}, tmp_path / "last.pt")  # SAVE
    assert torch.save.__name__ == "save" and not hasattr(torch.save, "__wrapped__")
    report = w.report
    assert report is not None
    (phase,) = (report.run or {})["phases"]
    assert phase["kind"] == "checkpoint" and phase["period_steps"] == 4
    me = test_a_checkpoint_every_k_steps_is_found_and_the_file_is_the_scripts
    assert phase["source"]["line"] == _line_of(me, "# SAVE")
    assert "torch.save(" in phase["source"]["code"]
    f = report.finding("code.checkpoint_phase")
    assert f is not None and f.fix.snippet_id == "phase.checkpoint_less_often"
    assert "every 4 steps" in f.title
    assert torch.load(tmp_path / "last.pt")["pad"].numel() == 4_000_000


def test_period_and_long_run_share() -> None:
    assert period_of([8, 18, 28, 38]) == 10
    assert period_of([8, 19, 28]) == 10  # a step off
    assert period_of([8, 12, 40]) is None
    assert period_of([8]) is None
    one = PhaseSeen("evaluation", steps=[3], ms=[100.0], all_steps=[4])
    # Once in 20 measured steps, its period unknown: over the measured steps.
    assert per_step_ms(one, 20) == pytest.approx(5.0)
    # Every 100 steps: 1 ms a step, whatever the window held.
    known = PhaseSeen("evaluation", steps=[3], ms=[100.0], all_steps=[4, 104])
    assert per_step_ms(known, 20) == pytest.approx(1.0)


def _evidence(step_ms: float, wait_ms: float, phase_ms: float, every: int) -> WorkloadEvidence:
    n = 40
    steps = [i for i in range(n) if i % every == every - 1]
    return WorkloadEvidence(
        step_mode="optimizer",
        step_times_ms=[step_ms] * n,
        data_wait_ms=[wait_ms] * n,
        framework_ms=[step_ms - wait_ms] * n,
        loader=LoaderInfo(num_workers=0),
        phases=[
            PhaseSeen(
                "evaluation",
                steps=steps,
                ms=[phase_ms] * len(steps),
                all_steps=[s + 1 for s in steps],
            )
        ],
    )


def test_the_verdict_is_the_biggest_recoverable_time() -> None:
    # 10 ms steps waiting 6 ms on the loader; an evaluation of 20 ms every 10 steps (2 ms a
    # step): the loader is the verdict, the phase a finding.
    loader_first = analyse(_evidence(10.0, 6.0, 20.0, 10))
    assert loader_first.verdict.bottleneck == "input_pipeline"
    assert loader_first.breakdown_ms["between_steps"] == pytest.approx(2.0)
    assert loader_first.step_time_ms == pytest.approx(12.0)
    assert any(f.id == "code.eval_phase" for f in loader_first.findings)
    # The same evaluation at 200 ms (20 ms a step): the phase.
    phase_first = analyse(_evidence(10.0, 6.0, 200.0, 10))
    assert phase_first.verdict.bottleneck == "between_steps"
    f = next(f for f in phase_first.findings if f.id == "code.eval_phase")
    assert f.severity == "critical" and "every 10 steps" in f.title
    # Under the bar a phase is a finding at most.
    tiny = analyse(_evidence(10.0, 6.0, 2.0, 10))
    assert tiny.verdict.bottleneck == "input_pipeline"
    assert all(f.severity == "info" for f in tiny.findings if f.id == "code.eval_phase")
    assert between_steps.NAMED_PCT > 100 * 0.2 / 10.2


def test_a_first_evaluation_that_builds_its_kernels_is_not_the_typical_one() -> None:
    # As on an H200: 540 ms for the first (kernels built), then about 50 ms each.
    warm = PhaseSeen("evaluation", steps=[7, 15, 23, 31], ms=[540.0, 48.0, 51.0, 54.0],
                     all_steps=[8, 16, 24, 32])  # fmt: skip
    assert warm.ms_each == 51.0
    assert per_step_ms(warm, 32) == pytest.approx(51.0 / 8)
    even = PhaseSeen("evaluation", steps=[7, 15], ms=[60.0, 50.0], all_steps=[8, 16])
    assert even.ms_each == 55.0  # within FIRST_SLOW: both typical


def test_per_batch_reads_in_an_evaluation_are_named_but_evaluating_less_often_leads() -> None:
    # Measured on an H200, per-batch .item()/.cpu() in an evaluation cost nothing the metrics on
    # the GPU gave back (0.94x, 1.00x): the fix with a gain the estimate can stand behind leads.
    seen = PhaseSeen(
        "evaluation", steps=[7, 15], ms=[50.0, 52.0], all_steps=[8, 16],
        sync_sites=[between_steps.PhaseSync(".item()", 16, "train.py", 88, "loss.item()")],
    )  # fmt: skip
    f = between_steps.finding(seen, 30.0, 16)
    assert f.fix.snippet_id == "phase.eval_less_often"
    assert ".item() at train.py:88 read a value back 16 times" in f.fix.text
    assert f.impact.speedup_range == (round(100 / 85, 2), round(100 / 70, 2))


def test_the_evaluation_snippet_computes_what_a_per_batch_read_does() -> None:
    from gpusight.fixes import render

    code = render(
        "phase.eval_metrics_on_gpu",
        site="train.py:9",
        code="correct += (p == y).sum().item()",
        period=50,
        twice=100,
        share=30,
    )
    space: dict[str, Any] = {}
    exec(compile(code, "<snippet>", "exec"), space)
    torch.manual_seed(0)
    model = Classifier()
    _, val = train_val_loaders()
    loss_fn = nn.functional.cross_entropy
    loss, acc = space["evaluate"](model, val, loss_fn, "cpu")
    assert model.training  # left in training mode, as it found it
    with torch.no_grad():
        model.eval()
        outs = [(model(x), y) for x, y in val]
        model.train()
    want_loss = sum(float(loss_fn(o, y)) * len(y) for o, y in outs) / 384
    want_acc = sum(int((o.argmax(1) == y).sum()) for o, y in outs) / 384
    assert loss == pytest.approx(want_loss, rel=1e-5) and acc == pytest.approx(want_acc)
    assert space["EVAL_EVERY"] == 100


def test_the_checkpoint_snippet_writes_a_loadable_copy(tmp_path: Path) -> None:
    from gpusight.fixes import render

    code = render(
        "phase.checkpoint_less_often", site="t.py:3", ms=900, period=10, twice=20, share=12
    )
    space: dict[str, Any] = {}
    exec(compile(code, "<snippet>", "exec"), space)
    model = ConvNet()
    writer = space["save_in_background"](model, tmp_path / "c.pt")
    writer.join()
    back = torch.load(tmp_path / "c.pt")
    assert back.keys() == model.state_dict().keys()
    assert all(torch.equal(back[k], v) for k, v in model.state_dict().items())
