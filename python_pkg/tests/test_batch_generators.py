"""Host time in a generator the loop draws its batches from is the input pipeline's: its fix is
a DataLoader's workers running it (or the GPU), not "move the transforms after the copy" with
names the script does not have. Real CPU torch through ``gpusight run``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from gpusight.rules.batch_generators import generator_of
from test_host_lines import _run


def _line(source: str, text: str) -> int:
    return next(i for i, ln in enumerate(source.splitlines(), 1) if text in ln)


GENERATOR_LOOP = """\
import torch
from torch import nn


def batches():
    while True:
        x = torch.randn(64, 64)
        for _ in range(1500):
            x = x * 1.0001
        yield x, torch.randint(0, 10, (64,))


def scale(x):
    return x * 2


model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
gen = batches()
for step in range(200):
    x, y = next(gen)
    loss = nn.functional.cross_entropy(model(scale(x)), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_the_generator_that_holds_a_line_is_named() -> None:
    assert generator_of(GENERATOR_LOOP, _line(GENERATOR_LOOP, "x = x * 1.0001")) == "batches"
    assert generator_of(GENERATOR_LOOP, _line(GENERATOR_LOOP, "return x * 2")) is None
    assert generator_of(GENERATOR_LOOP, _line(GENERATOR_LOOP, "loss = ")) is None
    nested = "def outer():\n    def gen():\n        yield 1\n    return list(gen())\n"
    assert generator_of(nested, 3) == "gen" and generator_of(nested, 4) is None
    assert generator_of("def broken(:\n", 1) is None


def test_a_generators_batch_work_gets_the_input_pipelines_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rep = _run(tmp_path, GENERATOR_LOOP, monkeypatch)
    host = next(f for f in rep["findings"] if f["id"] == "load.cpu_preprocessing")
    # Its costliest line is one of the generator's (the loop over its work, or its body).
    found = re.search(r"train\.py:(\d+)", host["title"])
    assert found is not None, (host["title"], rep["run"]["host_lines"])
    named = int(found.group(1))
    assert _line(GENERATOR_LOOP, "while True") <= named <= _line(GENERATOR_LOOP, "yield"), host
    text = host["fix"]["text"]
    assert "is in `batches()`, a generator your loop draws its batches from" in text
    assert "IterableDataset" in text and "augment" not in (host["fix"].get("code") or "")
