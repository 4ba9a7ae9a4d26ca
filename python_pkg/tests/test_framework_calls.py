"""A measured change to a training framework (its batch, its precision) handed over as the
user's own call that sets the framework up (``TrainingArguments(...)``, Lightning's
``Trainer(...)``, ``Accelerator(...)``), not a template in names the script does not have."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpusight.fixes.diff_apply import apply, parse
from gpusight.fixes.framework_calls import setup_line, setup_patch
from gpusight.fixes.statement_patches import compiles
from gpusight.rerun.plan import Arm
from gpusight.rerun.results import _fix_for

HF = """\
from transformers import Trainer, TrainingArguments

args = TrainingArguments(
    output_dir="out",
    per_device_train_batch_size=16,
    report_to=[],
)
Trainer(model=model, args=args, train_dataset=ds).train()
"""

LIT = """\
import lightning as L

trainer = L.Trainer(max_epochs=3, logger=False)
trainer.fit(model, dm)
"""


def _line(source: str, text: str) -> int:
    return next(i for i, ln in enumerate(source.splitlines(), 1) if text in ln)


def test_the_one_setup_call_is_found_and_its_keyword_set() -> None:
    assert setup_line(HF, "transformers") == _line(HF, "TrainingArguments(")
    assert setup_line(LIT, "lightning") == _line(LIT, "L.Trainer(")
    diff = setup_patch(HF, "train.py", "transformers", {"per_device_train_batch_size": 128})
    assert diff is not None
    new = apply(HF, parse(diff)[0])
    assert "    per_device_train_batch_size=128,\n" in new and compiles(new)
    diff = setup_patch(LIT, "train.py", "lightning", {"precision": "bf16-mixed"})
    assert diff is not None
    assert "L.Trainer(max_epochs=3, logger=False, precision='bf16-mixed')" in apply(
        LIT, parse(diff)[0]
    )


def test_no_patch_where_the_file_sets_up_none_or_several() -> None:
    assert setup_line("import torch\n", "transformers") is None
    two = HF + "eval_args = TrainingArguments(output_dir='eval')\n"
    assert setup_line(two, "transformers") is None  # which one trains is not known
    assert setup_line(HF, "no-such-framework") is None


def test_a_trainers_batch_row_patches_its_training_arguments(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(HF)
    arm = Arm("batch", "DataLoader batch_size=128", {"batch_size": 128}, "load.small_batch")
    site = {"file": str(script), "shown": "train.py", "line": _line(HF, ".train()")}
    facts = {"framework": "transformers", "forward_site": site}
    f = _fix_for(arm, 16, facts)
    assert f.patch is not None, f.text
    assert "+    per_device_train_batch_size=128," in f.patch
    assert f.patch_files and f.patch_files[0].path == "train.py"
    # Without a framework that makes the DataLoader, no such patch.
    assert _fix_for(arm, 16, {"forward_site": site}).patch is None


def test_a_frameworks_precision_row_patches_its_trainer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the command names the script as the user typed it
    script = Path("train.py")
    script.write_text(LIT)
    arm = Arm("autocast", "bf16 through Lightning", {"autocast": "bfloat16",
              "autocast_via": "lightning"}, "compute.precision")  # fmt: skip
    facts = {"command": {"script": str(script), "args": []}}
    f = _fix_for(arm, 64, facts)
    assert 'precision="bf16-mixed"' in f.text  # the text names the switch as before
    assert f.patch is not None and "precision='bf16-mixed'" in f.patch
    script.write_text(HF)
    arm = Arm("autocast", "bf16 through the Trainer", {"autocast": "bfloat16",
              "autocast_via": "transformers"}, "compute.precision")  # fmt: skip
    f = _fix_for(arm, 64, facts)
    assert f.patch is not None and "+    report_to=[], bf16=True," in f.patch
