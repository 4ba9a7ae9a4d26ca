"""The step's own record: lines after the model's call that work on its output (a metric in
numpy, an accuracy logged with ``.item()``) are named as that, with a fix that computes it on the
device and reads it less often, not the DataLoader-workers advice for a batch's transforms.
Real CPU torch through ``gpusight run``, and the ``ast`` reading on the code people write."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpusight.rules.host_line_fix import HostLine, fix_text, is_loss, kind_of
from gpusight.rules.output_reads import output_lines, output_runs, statement_text
from test_host_lines import _run

LOOP = """\
for step, (x, y) in enumerate(loader):
    x = x.to(dev)
    out = model(x)
    loss = crit(out, y)
    loss.backward()
    opt.step()
    batch_next = next(other)
    pred = out.detach().cpu().numpy()
    acc = np.mean(pred.argmax(1) == y.numpy())
    if step % 10 == 0:
        print(step, loss.item(),
              acc)
seen = out
"""


def test_the_lines_after_the_call_that_read_its_output_are_found() -> None:
    lines = output_lines(LOOP, 3)
    assert {8, 9, 11, 12} <= lines  # through the names made from it (pred, acc, loss)
    assert not {2, 6, 7, 10, 13} & lines  # before the call, unrelated, the if's test, outside
    # The loss the backward differentiates, and the backward, are the step's computation.
    assert not {4, 5} & lines
    # A run of statements one after another: the metric and its print.
    assert output_runs(LOOP, 3) == [(8, 12)]
    # A statement over two lines is shown whole; one too long to show by its first line.
    assert statement_text(LOOP, 11) == "print(step, loss.item(), acc)"
    assert statement_text(LOOP.replace("acc)", "acc" + ", acc" * 40 + ")"), 11) is None


def test_a_step_function_called_from_the_loop_is_read_the_same_way() -> None:
    text = (
        "def train_step(batch):\n    logits = net(batch)\n    conf = logits.softmax(-1).max()\n"
        "    return logits\n"
    )
    # What it returns, its caller's to use (a framework's backward), is not its record.
    assert output_lines(text, 2) == frozenset({3})
    assert output_lines("x = (\n", 1) == frozenset()  # a file that does not parse


def _line(code: str, on_output: bool, function: str = "<module>") -> HostLine:
    return HostLine("train.py", 9, code, function, 1.0, 30.0, on_output=on_output)


def test_what_the_line_does_on_the_output_picks_its_fix() -> None:
    numpy_metric = _line("acc = np.mean(np.argmax(pred, 1) == labels)", True)
    assert kind_of(numpy_metric) == "metric"
    assert "in torch on the device instead of numpy" in (fix_text(numpy_metric) or "")
    # The same numpy on the batch before the model's call is a transform for the workers.
    assert kind_of(_line("x = np.stack(rows)", False)) == "numpy"
    # A decode of the predictions is not the inputs' tokenizer.
    assert kind_of(_line("texts = tokenizer.batch_decode(ids)", True)) == "metric"
    assert kind_of(_line("texts = tokenizer.batch_decode(ids)", False)) == "tokenizer"
    # A logger keeps its own fix; the loss on the output is still the step's own.
    assert kind_of(_line("logger.info(acc.item())", True)) == "logging"
    assert is_loss(_line("loss = criterion(out, y)", True))


HEAD = """\
import numpy as np
import torch
from torch import nn

torch.set_num_threads(1)
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1000))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
"""

NUMPY_METRIC = (
    HEAD
    + """\
accs = []
for step in range(300):
    x, y = torch.randn(256, 32), torch.randint(0, 1000, (256,))
    out = model(x)
    loss = nn.functional.cross_entropy(out, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    pred = out.detach().cpu().numpy()
    top5 = np.argsort(pred, axis=1)[:, -5:]
    accs.append(float(np.mean(np.any(top5 == y.numpy()[:, None], axis=1))))
"""
)


def test_a_numpy_metric_on_the_output_is_one_piece_with_its_own_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rep = _run(tmp_path, NUMPY_METRIC, monkeypatch)
    host = next(f for f in rep["findings"] if f["id"] == "load.cpu_preprocessing")
    first = NUMPY_METRIC.splitlines().index("    pred = out.detach().cpu().numpy()") + 1
    assert host["title"].startswith(f"train.py:{first}-{first + 2} ("), host["title"]
    fix = host["fix"]["text"]
    assert fix.startswith(f"Compute what train.py:{first}-{first + 2} "), fix
    assert "in torch on the device instead of numpy" in fix
    assert "DataLoader" not in fix and "transforms" not in fix


def test_trackers_and_progress_bars_log_and_a_tensors_log_softmax_does_not() -> None:
    for code in (
        'mlflow.log_metric("loss", loss.item(), step=step)',
        'logger.log_metrics({"loss": loss.item()})',
        'pbar.set_description(f"loss {loss.item():.3f}")',
    ):
        assert kind_of(_line(code, True)) == "logging", code
    for code in ("y = out.log_softmax(-1)", "lp = dist.log_prob(x)"):
        assert kind_of(_line(code, False)) == "other", code


def test_a_loggers_call_whose_value_is_worked_out_in_numpy_is_a_loggers_line() -> None:
    """A Lightning callback's ``pl_module.log`` of a numpy accuracy had the transforms' fix
    ("in the Dataset where DataLoader workers run it")."""
    code = 'pl_module.log("train_acc", float(np.trace(cm) / cm.sum()))'
    for on_output in (False, True):
        line = _line(code, on_output, "ConfusionLogger.on_train_batch_end")
        assert kind_of(line) == "logging"
        assert (fix_text(line) or "").startswith("Log less often at train.py:9")
    # The numpy work assigned for later is the numpy's, not a logger's.
    assert kind_of(_line("acc = float(np.trace(cm) / cm.sum())", False)) == "numpy"
    assert kind_of(_line("y = np.log(x)", False)) == "numpy"


def test_the_labels_copied_beside_the_predictions_are_the_same_record() -> None:
    text = (
        "for x, y in loader:\n"
        "    out = model(x)\n"
        "    preds.extend(out.argmax(1).cpu().tolist())\n"
        "    labels.extend(y.cpu().tolist())\n"
        "    step += 1\n"
        "    x = x.cpu()\n"
    )
    # The copy of y right after the predictions', not one after another statement.
    assert output_runs(text, 2) == [(3, 4)]


def test_a_host_read_after_the_backward_is_not_the_outputs_record() -> None:
    text = (
        "for x in loader:\n"
        "    loss = model(x).pow(2).mean()\n"
        "    loss.backward()\n"
        "    total = sum(p.grad.norm().item() for p in model.parameters())\n"
        "    norms.append(total)\n"
    )
    # The backward is the step's; the norm read after it is the gradients', not the record's.
    assert output_runs(text, 2) == []


MAML = """\
for step in range(steps):
    params = dict(model.named_parameters())
    x, y = next(tasks)
    inner = F.mse_loss(functional_call(model, params, (x,)), y)
    grads = torch.autograd.grad(inner, list(params.values()), create_graph=True)
    fast = {k: v - 0.1 * g for (k, v), g in zip(params.items(), grads)}
    outer = F.mse_loss(functional_call(model, fast, (x,)), y)
    opt.zero_grad()
    scaler.scale(outer).backward()
    opt.step()
    history.append(outer.item())
"""


def test_what_the_backward_differentiates_is_the_step_not_its_record() -> None:
    # A meta-learning step: the inner gradients and fast weights feed the outer loss's
    # backward; only the loss read for the history is the step's record.
    assert output_lines(MAML, 4) == frozenset({11})
    assert output_runs(MAML, 4) == [(11, 11)]
    # The same through accelerate's backward.
    acc = MAML.replace("scaler.scale(outer).backward()", "accelerator.backward(outer)")
    assert output_lines(acc, 4) == frozenset({11})
