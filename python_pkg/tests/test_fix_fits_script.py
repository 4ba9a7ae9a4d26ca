"""A fix refers to what the script has (issue #47 point 5): a loop that slices its own tensors,
with host work in its body, gets no DataLoader in any fix. Real CPU torch, ``gpusight run``."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpusight.report import load_report

TENSOR_FED = """\
import numpy as np
import torch
from torch import nn

torch.set_num_threads(1)
data = torch.randn(4096, 32)
labels = torch.randint(0, 4, (4096,))
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(400):
    i = (step * 16) % 4000
    x = data[i : i + 16]
    x = torch.from_numpy(np.sort(np.tile(x.numpy(), (1, 64)), axis=1)[:, :32].copy())
    loss = nn.functional.cross_entropy(model(x), labels[i : i + 16])
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_tensor_fed_loop_with_host_work_gets_no_dataloader_in_its_fixes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpusight.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(TENSOR_FED, encoding="utf-8")
    assert main(["run", "--quiet", "--steps", "10", "--json", "r.json", "train.py"]) == 0
    rep = load_report(tmp_path / "r.json")
    ids = [f["id"] for f in rep["findings"]]
    assert "load.cpu_preprocessing" in ids, (ids, rep["run"]["breakdown_ms"])
    for f in rep["findings"]:
        assert "DataLoader" not in (f["fix"].get("code") or ""), (f["id"], f["fix"])
