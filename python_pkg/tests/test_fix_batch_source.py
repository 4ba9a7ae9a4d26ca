"""The measured batch written where the script sets it (``fixes/batch_source.py``): a Lightning
DataModule's ``batch_size=16``, a config dataclass's default, a module constant; the loader call
itself where the name is read for anything else, or set in more than one place."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from gpusight.fixes.batch_source import batch_source_patch
from gpusight.fixes.diff_apply import apply, parse
from gpusight.knobs import Situation, by_name

DATAMODULE = """\
import lightning as L
from torch.utils.data import DataLoader


class Data(L.LightningDataModule):
    def __init__(self, batch_size: int = 32):
        super().__init__()
        self.save_hyperparameters()

    def train_dataloader(self):
        return DataLoader(self.train, batch_size=self.hparams.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val, batch_size=self.hparams.batch_size)


class Net(L.LightningModule):
    def training_step(self, batch, batch_idx):
        loss = self.net(batch)
        self.log("loss", loss, batch_size=batch[0].shape[0])
        return loss


trainer = L.Trainer(max_epochs=1)
trainer.fit(Net(), datamodule=Data(batch_size=16))
"""

CONFIG = """\
from dataclasses import dataclass

from torch.utils.data import DataLoader


@dataclass
class Config:
    batch_size: int = 8
    lr: float = 1e-3


def main(cfg):
    loader = DataLoader(ds, batch_size=cfg.batch_size, shuffle=True)
    for x, y in loader:
        step(x, y)


main(Config())
"""

CONSTANT = """\
from torch.utils.data import DataLoader

BATCH_SIZE = 64
loader = DataLoader(ds, BATCH_SIZE, shuffle=True)
"""


def applied(source: str, line: int, new: int) -> str | None:
    patch = batch_source_patch(source, line, "train.py", new)
    if patch is None:
        return None
    (diff,) = parse(patch)
    out = apply(source, diff)
    ast.parse(out)
    return out


def changed(before: str, after: str) -> list[tuple[str, str]]:
    pairs = zip(before.splitlines(), after.splitlines(), strict=True)
    return [(a.strip(), b.strip()) for a, b in pairs if a != b]


def test_a_datamodules_batch_is_set_in_the_call_that_makes_it() -> None:
    out = applied(DATAMODULE, 11, 512)
    assert out is not None
    assert changed(DATAMODULE, out) == [
        ("trainer.fit(Net(), datamodule=Data(batch_size=16))",
         "trainer.fit(Net(), datamodule=Data(batch_size=512))")
    ]  # fmt: skip
    # Made without the keyword: the __init__'s default is where the batch is set.
    bare = DATAMODULE.replace("Data(batch_size=16)", "Data()")
    out = applied(bare, 11, 512)
    assert out is not None and "def __init__(self, batch_size: int = 512):" in out


def test_a_config_default_and_a_module_constant() -> None:
    out = applied(CONFIG, 13, 256)
    assert out is not None and changed(CONFIG, out) == [("batch_size: int = 8",
                                                         "batch_size: int = 256")]  # fmt: skip
    out = applied(CONSTANT, 4, 512)
    assert out is not None and changed(CONSTANT, out) == [("BATCH_SIZE = 64", "BATCH_SIZE = 512")]
    as_dict = (
        'cfg = {"batch_size": 8, "lr": 0.1}\n'
        'loader = DataLoader(ds, batch_size=cfg["batch_size"])\n'
    )
    out = applied(as_dict, 2, 128)
    assert out is not None and 'cfg = {"batch_size": 128, "lr": 0.1}' in out


@pytest.mark.parametrize(
    "edit",
    [
        # Read for something else too: the learning rate scaled by it.
        (
            "    lr: float = 1e-3\n",
            "    lr: float = 1e-3\n    warmup: int = 0\n",
            "    for x, y in loader:\n",
            "    print(cfg.batch_size)\n    for x, y in loader:\n",
        ),
        # Set in two places: which one runs is not known from the text.
        ("main(Config())", "main(Config(batch_size=4) if fast else Config(batch_size=32))", "", ""),
        # Set from elsewhere (the command line): no number in the file to change.
        ("main(Config())", "main(Config(batch_size=args.bs))", "", ""),
    ],
)
def test_the_loader_call_is_patched_where_the_source_is_not_one_number(
    edit: tuple[str, str, str, str],
) -> None:
    text = CONFIG.replace(edit[0], edit[1])
    if edit[2]:
        text = text.replace(edit[2], edit[3])
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if "DataLoader(ds" in ln)
    assert applied(text, line, 256) is None
    assert applied("loader = DataLoader(ds, batch_size=16)\n", 1, 256) is None


def test_the_batch_knobs_fix_patches_the_datamodule_call(tmp_path: Path, monkeypatch: Any) -> None:
    """The knob's fix for a measured DataLoader batch: the script's ``Data(batch_size=16)``."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "fit.py").write_text(DATAMODULE)
    facts = {"cuda": True, "step_mode": "optimizer", "items_per_step": 16,
             "finding_ids": ["load.small_batch"], "breakdown_ms": {"launch_overhead": 9.0},
             "loader": {"batch_size": 16, "batches_per_step": 1},
             "loader_site": {"file": "fit.py", "shown": "fit.py", "line": 11},
             "model": {"param_devices": ["cuda"]}}  # fmt: skip
    batch = by_name("batch")
    assert batch is not None
    (group,) = batch.groups(Situation.of(facts))
    arm = group.arms[-1]
    f = batch.fix(arm, 16, facts)
    assert f.patch is not None and f"datamodule=Data(batch_size={arm.changes['batch_size']})" in (
        f.patch
    )
    assert (tmp_path / "fit.py").read_text() == DATAMODULE  # the user's file as it was


def test_a_larger_batch_under_gradient_accumulation_says_what_it_does_to_the_update() -> None:
    """timm_accum: 8 micro-batches of 16 per optimizer step; the row measured micro-batches of
    256 with the accumulation kept, 2048 items an update."""
    facts = {"cuda": True, "step_mode": "optimizer", "items_per_step": 128,
             "finding_ids": ["load.small_batch"], "breakdown_ms": {"launch_overhead": 9.0},
             "loader": {"batch_size": 16, "batches_per_step": 8},
             "model": {"param_devices": ["cuda"]}}  # fmt: skip
    batch = by_name("batch")
    assert batch is not None
    (group,) = batch.groups(Situation.of(facts))
    arm = next(a for a in group.arms if a.changes.get("batch_size") == 256)
    text = batch.fix(arm, 128, facts).text
    assert "takes 8 of its batches per optimizer step" in text
    assert "an update then holds 2048 items where it held 128" in text
    one = {**facts, "loader": {"batch_size": 16, "batches_per_step": 1}, "items_per_step": 16}
    (group,) = batch.groups(Situation.of(one))
    assert batch.fix(group.arms[0], 16, one).text.startswith("Grow the batch to ")
