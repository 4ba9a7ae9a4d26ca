"""A loop over the batch's items in the step (a loss summed one sample at a time, a flip per
image) is one piece of work with a fix that does it over the whole batch; loops over batches,
over a batch's fields and the loop around the model's call are not. Real CPU torch through
``gpusight run``, and the ``ast`` reading on the code people write."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpusight.rules.item_loops import in_item_loop, item_loop, what_it_does
from test_host_lines import _run

STEP = """\
for step in range(100):
    x, y = next(it)
    for k, v in batch.items():
        batch[k] = v.to(dev)
    for i in range(x.size(0)):
        x[i] = x[i].flip(-1)
    out = model(x)
    loss = 0.0
    for i, t in enumerate(y):
        loss = loss + criterion(out[i][None], t[None])
    for j in range(0, len(y), 8):
        chunks.append(y[j : j + 8])
    for n in range(len(y)):
        seen.append(n)
"""


def test_the_loops_over_the_items_are_found_and_what_they_do() -> None:
    assert item_loop(STEP, 7, 6) == (5, 6)
    assert what_it_does(STEP, 5) == "transform"
    assert item_loop(STEP, 7, 10) == (9, 10)  # enumerate(y), out indexed by its variable
    assert what_it_does(STEP, 9) == "loss"
    assert not in_item_loop(STEP, 7, 4)  # a batch's fields
    assert not in_item_loop(STEP, 7, 12)  # a range with a step walks chunks
    assert not in_item_loop(STEP, 7, 14)  # nothing indexed by its variable
    assert not in_item_loop(STEP, 7, 2)  # the loop around the model's call
    assert not in_item_loop(STEP, 7, 1)


def test_a_loop_in_another_function_than_the_models_call_is_not_the_steps() -> None:
    text = (
        "def step(b):\n    return model(b)\n\n"
        "def main():\n    for i in range(len(data)):\n        step(data[i])\n"
    )
    assert not in_item_loop(text, 2, 6)  # the loop that feeds the step, in main
    assert item_loop("x = (\n", 1, 1) is None  # a file that does not parse


HEAD = """\
import torch
from torch import nn

torch.set_num_threads(1)
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
criterion = nn.CrossEntropyLoss()
"""

PER_SAMPLE_LOSS = (
    HEAD
    + """\
for step in range(300):
    x, y = torch.randn(64, 32), torch.randint(0, 10, (64,))
    out = model(x)
    loss = 0.0
    for i in range(len(y)):
        loss = loss + criterion(out[i : i + 1], y[i : i + 1])
    loss = loss / len(y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
)


def test_a_loss_summed_one_sample_at_a_time_is_named_as_the_loop_with_a_batch_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rep = _run(tmp_path, PER_SAMPLE_LOSS, monkeypatch)
    host = next(f for f in rep["findings"] if f["id"] == "load.cpu_preprocessing")
    header = PER_SAMPLE_LOSS.splitlines().index("    for i in range(len(y)):") + 1
    # The loop's loss is its waste here, not the step's own loss to leave out.
    assert host["title"].startswith(f"train.py:{header}-{header + 1} ("), host["title"]
    fix = host["fix"]["text"]
    assert fix.startswith(f"Do the work of the loop at train.py:{header}-{header + 1} ")
    assert "the loss function once on all of the batch" in fix
    assert "DataLoader" not in fix
