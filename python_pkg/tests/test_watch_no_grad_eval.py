"""Evaluations that never call ``model.eval()`` (issue #54): a ``torch.no_grad()`` block or an
``@torch.inference_mode()`` function taking batches from a validation loader every k steps is an
evaluation phase with its period and line; ``no_grad`` inside the training step (a metric, torch's
own ``clip_grad_norm_``) and a batch taken under ``no_grad`` at every step are not. Real CPU
torch."""

from __future__ import annotations

import inspect
from typing import Any

import torch
from gpusight.report import Report
from gpusight.watch.session import Watch
from torch import nn
from torch.utils.data import DataLoader
from watch_support import Classifier, train_val_loaders


def evaluate(model: nn.Module, val: DataLoader[Any]) -> int:
    correct = 0
    with torch.no_grad():  # NO_GRAD_LINE
        for x, y in val:
            correct += int((model(x).argmax(1) == y).sum().item())
    return correct


@torch.inference_mode()
def evaluate_decorated(model: nn.Module, val: DataLoader[Any]) -> int:
    return sum(int((model(x).argmax(1) == y).sum().item()) for x, y in val)


def _train(every: int, steps: int, evaluation: Any = evaluate, **watch: Any) -> Report:
    torch.manual_seed(0)
    model = Classifier()
    opt = torch.optim.AdamW(model.parameters(), 1e-3)
    train, val = train_val_loaders()
    with Watch(steps=steps, **watch) as w:
        for step, (x, y) in enumerate(train):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # torch's own no_grad
            opt.step()
            with torch.no_grad():  # a metric of the step, no batch taken
                _ = (loss * 2).detach()
            if step % every == every - 1:
                evaluation(model, val)  # CALL_LINE
    assert w.report is not None
    return w.report


def _line_of(fn: Any, marker: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, text in enumerate(lines) if marker in text)


def test_an_evaluation_under_no_grad_alone_is_found_with_its_period_and_lines() -> None:
    report = _train(every=6, steps=12)
    run = report.run or {}
    (phase,) = run["phases"]
    assert phase["kind"] == "evaluation" and phase["period_steps"] == 6
    assert phase["source"]["line"] == _line_of(evaluate, "NO_GRAD_LINE")
    assert phase["caller"]["line"] == _line_of(_train, "CALL_LINE")
    times = run["step_times_ms"]
    for i, ms in zip(phase["steps"], phase["times_ms"], strict=True):
        assert times[i] > ms > run["step_time_median_ms"]
    f = report.finding("code.eval_phase")
    assert f is not None and "every 6 steps" in f.title
    assert report.verdict.bottleneck == "between_steps"


def test_an_inference_mode_decorated_evaluation_is_found_at_the_loops_call() -> None:
    report = _train(every=6, steps=12, evaluation=evaluate_decorated)
    (phase,) = (report.run or {})["phases"]
    assert phase["kind"] == "evaluation" and phase["period_steps"] == 6
    assert phase["source"]["line"] == _line_of(_train, "CALL_LINE")


def test_no_grad_inside_the_step_and_a_batch_taken_under_it_every_step_are_no_phase() -> None:
    # every=1000: no evaluation runs; the step's own no_grad uses are no phase.
    report = _train(every=1000, steps=12)
    assert "phases" not in (report.run or {})
    torch.manual_seed(0)
    model, teacher = Classifier(), Classifier()
    opt = torch.optim.SGD(model.parameters(), 0.01)
    train, _ = train_val_loaders()
    it = iter(train)
    with Watch(steps=12) as w:
        for _ in range(60):
            with torch.no_grad():  # the step's inputs and targets, taken under no_grad
                x, _y = next(it)
                target = teacher(x).argmax(1)
            loss = nn.functional.cross_entropy(model(x), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert w.report is not None and "phases" not in (w.report.run or {})
    assert w.report.finding("code.eval_phase") is None
