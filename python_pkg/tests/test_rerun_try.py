"""``--what-if`` plans a tiny batch, and ``--try NAME`` always answers (issue #48 point 5): a
change asked for by name that the run gives nothing to try says why. Real CPU torch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gpusight.cli import main
from gpusight.knobs import not_planned, plan_groups

TINY_BATCH = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)
ds = TensorDataset(torch.randn(20000, 64), torch.randint(0, 10, (20000,)))
loader = DataLoader(ds, batch_size=4, shuffle=True)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(3):
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""

TENSOR_FED = """\
import torch
from torch import nn

torch.set_num_threads(1)
model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.randn(512, 256)
for step in range(2000):
    loss = nn.functional.cross_entropy(model(data), torch.zeros(512, dtype=torch.long))
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _facts(**kw: object) -> dict[str, object]:
    base: dict[str, object] = {
        "step_mode": "optimizer",
        "cpu_count": 2,
        "breakdown_ms": {"compute": 9.0, "other_cpu": 1.0},
        "items_per_step": 512,
    }
    base.update(kw)
    return base


def test_a_tiny_batch_is_planned_and_a_large_compute_bound_one_says_why_not() -> None:
    assert [g.name for g in plan_groups(_facts(items_per_step=4))] == ["batch"]
    assert not [g for g in plan_groups(_facts()) if g.name == "batch"]
    why = not_planned(_facts(), frozenset({"batch", "workers"}))
    assert "its batch of 512 items is over 16" in why["batch"]
    assert why["workers"] == "no DataLoader fed the model"


@pytest.mark.slow
def test_what_if_measures_a_larger_batch_for_a_tiny_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(TINY_BATCH)
    code = main(["run", "--quiet", "--what-if", "--try", "batch", "--budget", "60",
                 "--steps", "20", "--json", "r.json", "train.py"])  # fmt: skip
    assert code == 0
    rep = json.loads((tmp_path / "r.json").read_text())
    rows = {r["change"]: r for r in rep["what_if"]}
    row = rows.get("DataLoader batch_size=16")
    assert row is not None and row.get("skipped") is None, rep["what_if"]
    # Four times the items for about the same step: several times the items per second.
    assert row["speedup"] > 1.5


@pytest.mark.slow
def test_a_change_asked_for_by_name_that_is_not_tried_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(TENSOR_FED)
    code = main(["run", "--what-if", "--try", "workers", "--budget", "30", "--steps", "8",
                 "--json", "r.json", "train.py"])  # fmt: skip
    assert code == 0
    err = capsys.readouterr().err
    assert "plan: no change to try; workers: not tried, no DataLoader fed the model" in err
    rep = json.loads((tmp_path / "r.json").read_text())
    note = next(n for n in rep["notes"] if n.startswith("what-if:"))
    assert "not tried: workers: no DataLoader fed the model" in note


def test_the_help_of_try_names_every_knob_of_the_registry_and_only_those(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import re

    from gpusight.knobs import REGISTRY

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    listed = re.search(r"--try KNOBS with --what-if: try only these changes, .*?\(([^)]*)\)", text)
    assert listed is not None, text
    assert listed.group(1).split(", ") == [k.name for k in REGISTRY if k.rerun]
    # Asked for by name, a knob measured only in the kernel says why (not "unknown").
    why = not_planned({"cuda": True}, frozenset({"dataset_on_device"}))
    assert "only in the kernel" in why["dataset_on_device"]
