"""Hugging Face's Trainer makes its DataLoader: a measured loader setting is handed over as the
``TrainingArguments`` keyword that sets it, patched in the script's call."""

from __future__ import annotations

from typing import Any

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
