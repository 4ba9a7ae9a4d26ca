"""An optimizer step that runs its closure (Lightning's automatic optimization, LBFGS): the
closure's time is not the optimizer's, so host work in a training step (a metric in numpy) is
the step's host work outside the model, not the framework's compute. Real CPU torch through
``gpusight run``."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpusight.watch.closure_timing import own_spans, timed_closure
from test_host_lines import _run


def test_the_steps_own_spans_leave_out_each_run_of_its_closure() -> None:
    assert own_spans(0, 100, []) == [(0, 100)]
    assert own_spans(0, 100, [(10, 40), (50, 90)]) == [(0, 10), (40, 50), (90, 100)]
    assert own_spans(0, 100, [(0, 100)]) == []


def test_the_closure_is_wrapped_where_it_was_passed_and_runs_as_it_did() -> None:
    spans: list[tuple[int, int]] = []

    def closure() -> int:
        return 7

    opt = object()  # a step hook's arguments start with the optimizer
    args, kwargs = timed_closure((opt,), {"closure": closure, "lr": 1}, spans) or ((), {})
    assert kwargs["lr"] == 1 and kwargs["closure"]() == 7 and len(spans) == 1
    args, kwargs = timed_closure((opt, closure), {}, spans) or ((), {})
    assert args[0] is opt and args[1]() == 7 and len(spans) == 2
    assert timed_closure((opt,), {}, spans) is None  # no closure: the step's arguments stay


CLOSURE_STEP = """\
import numpy as np
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 32), torch.randint(0, 4, (64,))


def training_step():
    opt.zero_grad()
    out = model(x)
    loss = nn.functional.cross_entropy(out, y)
    loss.backward()
    pred = out.detach().numpy()
    acc = sum(float(np.argmax(pred[i]) == int(y[i])) for i in range(len(y)))
    return loss


for step in range(60):
    opt.step(training_step)
"""


def test_host_work_in_the_closure_is_outside_the_model_not_the_optimizers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rep = _run(tmp_path, CLOSURE_STEP, monkeypatch)
    parts = rep["run"]["breakdown_ms"]
    step = rep["run"]["step_time_ms"]
    # The per-item accuracy loop costs several times the tiny model's forward and backward:
    # counted in the optimizer's step, all of it read as compute.
    assert parts["other_cpu"] > 0.3 * step, parts
    assert parts["compute"] < 0.7 * step, parts
    lines = rep["run"]["host_lines"]["lines"]
    assert any("np.argmax" in (ln.get("code") or "") for ln in lines[:3]), lines[:3]
