"""Hugging Face's Trainer makes its DataLoader: a measured loader setting is handed over as the
``TrainingArguments`` keyword that sets it, patched in the script's call."""

from __future__ import annotations

import json
from typing import Any

import pytest
from gpusight.knobs import Situation, by_name
from test_loader_set_epoch import FACTS

HF_SCRIPT = """\
from transformers import Trainer, TrainingArguments

args = TrainingArguments(output_dir="out", per_device_train_batch_size=8, report_to=[])
trainer = Trainer(model=model, args=args, train_dataset=train_ds)
trainer.train()
"""


def test_a_hugging_face_trainers_loader_is_fixed_in_its_training_arguments(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """The Trainer makes its DataLoader: the measured workers are the TrainingArguments' own
    (``dataloader_num_workers``, ``dataloader_persistent_workers``), patched in that call."""
    monkeypatch.chdir(tmp_path)
    script = "train_hf.py"  # as the run shows it: relative to where it started
    (tmp_path / script).write_text(HF_SCRIPT)
    workers = by_name("workers")
    assert workers is not None
    arm = workers.groups(Situation.of(FACTS))[0].arms[0]
    facts = {**FACTS, "framework": "transformers",
             "command": {"script": script, "args": []},
             "loader_site": {"file": script, "shown": script, "line": 5}}  # fmt: skip
    f = workers.fix(arm, 16, facts)
    assert (
        "TrainingArguments(..., dataloader_num_workers=2, dataloader_persistent_workers=True)"
        in (f.text)
    )
    assert f.patch is not None
    added = [ln for ln in f.patch.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    assert len(added) == 1 and "dataloader_num_workers=2" in added[0], f.patch
    assert "dataloader_persistent_workers=True" in added[0] and "TrainingArguments(" in added[0]
    # A script of its own DataLoader keeps that call's fix, whatever it imports.
    own = {**facts, "framework": None}
    assert workers.fix(arm, 16, own).text.startswith("Build the DataLoader with num_workers=2")


TRAIN_HF = """\
import time
import torch
from torch import nn
from torch.utils.data import Dataset
from transformers import Trainer, TrainingArguments


class Slow(Dataset):
    def __len__(self):
        return 4096

    def __getitem__(self, i):
        time.sleep(0.002)
        x = torch.randn(16)
        return {"x": x, "labels": (x.sum() > 0).long()}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))

    def forward(self, x, labels=None):
        logits = self.net(x)
        return {"loss": nn.functional.cross_entropy(logits, labels), "logits": logits}


args = TrainingArguments(output_dir="out", per_device_train_batch_size=8, report_to=[],
                         use_cpu=True, max_steps=400, logging_steps=1000, save_strategy="no")
Trainer(model=Net(), args=args, train_dataset=Slow()).train()
"""


@pytest.mark.slow
def test_a_trainer_scripts_measured_workers_patch_its_training_arguments(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """``gpusight run --what-if --try workers`` on a loader-bound Trainer script: the row is
    measured, and the patch sets it in the script's ``TrainingArguments(...)`` (on this CPU
    2.27x measured, 2.29x when ``--verify`` timed the patched script)."""
    pytest.importorskip("transformers")
    from gpusight.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "train_hf.py").write_text(TRAIN_HF)
    code = main(["run", "--quiet", "--what-if", "--try", "workers", "--budget", "90",
                 "--json", "r.json", "--patch", "fix.diff", "train_hf.py"])  # fmt: skip
    assert code == 0
    rep = json.loads((tmp_path / "r.json").read_text())
    row = next(r for r in rep["what_if"] if r["change"].startswith("DataLoader num_workers="))
    assert row.get("skipped") is None and row["speedup"] > 1.2, row
    diff = (tmp_path / "fix.diff").read_text()
    added = [ln for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    assert len(added) == 1 and "dataloader_num_workers=" in added[0], diff
    assert "dataloader_persistent_workers=True" in added[0]
    assert (tmp_path / "train_hf.py").read_text() == TRAIN_HF  # the user's file unchanged
