"""The accumulation knob (``knobs/accumulation.py``): where a framework's optimizer step takes
several batches, the batch that many times larger with the accumulation at 1, the same items
per update; planned from the watched run, taken by an unmodified script's re-run, and handed
over in the script's own ``TrainingArguments(...)``. Real transformers and Lightning on the
CPU."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from gpusight.fixes.diff_apply import apply, parse
from gpusight.knobs import Situation, by_name, run_items, script_args
from hf_support import trainer_script

TRAIN = trainer_script(
    "    per_device_train_batch_size=4,\n    gradient_accumulation_steps=4,\n",
    'print("ACCUM", trainer.args.gradient_accumulation_steps)\n',
)


def _run(tmp_path: Path, *extra: str, after: list[str] | None = None) -> dict[str, Any]:
    """``gpusight run`` of ``train.py`` with ``extra`` options and ``after`` as its arguments:
    its facts, and what it printed under ``stdout``."""
    cmd = [sys.executable, "-m", "gpusight", "run", "--quiet", *extra, "--facts", "f.json",
           "train.py", *(after or [])]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    facts: dict[str, Any] = json.loads((tmp_path / "f.json").read_text())
    facts["stdout"] = out.stdout
    return facts


def test_the_trainers_accumulation_is_traded_for_its_batch_and_the_fix_sets_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("transformers")
    (tmp_path / "train.py").write_text(TRAIN)
    base = _run(tmp_path)
    assert "ACCUM 4" in base["stdout"] and base["loader"]["batches_per_step"] == 4
    knob = by_name("accumulation")
    assert knob is not None
    (group,) = knob.groups(Situation.of(base))
    (arm,) = group.arms
    assert arm.changes == {"batch_size": 16, "accumulation": {"steps": 1, "was": 4}}
    assert arm.label.startswith("DataLoader batch_size=16 with gradient_accumulation_steps=1")
    assert "the same 16 items per update, in one batch instead of 4" in arm.label
    # The re-run: one batch of 16 an optimizer step, the items per step as they were.
    rerun = _run(tmp_path, "--inject", json.dumps(arm.changes))
    assert "ACCUM 1" in rerun["stdout"]
    assert rerun["injected"].get("accumulation") == 1 and rerun["loader"]["batch_size"] == 16
    assert rerun["loader"]["batches_per_step"] == 1
    assert rerun["items_per_step"] == base["items_per_step"] == 16
    assert (tmp_path / "train.py").read_text() == TRAIN
    # The fix: both keywords in the script's one TrainingArguments(...).
    monkeypatch.chdir(tmp_path)
    fix = knob.fix(arm, 16, base)
    assert fix.patch is not None, fix
    (diff,) = parse(fix.patch)
    (call,) = [n for n in ast.walk(ast.parse(apply(TRAIN, diff))) if isinstance(n, ast.Call)
               and getattr(n.func, "id", None) == "TrainingArguments"]  # fmt: skip
    kw = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    assert kw["per_device_train_batch_size"] == 16 and kw["gradient_accumulation_steps"] == 1
    assert "the same items per update" in fix.text


def _facts(**over: Any) -> dict[str, Any]:
    facts = {
        "framework": "transformers",
        "step_mode": "optimizer",
        "items_per_step": 32,
        "finding_ids": ["load.small_batch"],
        "breakdown_ms": {"compute": 20.0, "launch_overhead": 80.0},
        "loader": {"batch_size": 8, "batches_per_step": 4},
    }
    return {**facts, **over}


def test_a_batch_argument_grows_and_the_items_per_step_stay() -> None:
    """The script's own options (Hugging Face's HfArgumentParser): the batch knob counts the
    batch option's items as it grows them; one batch a step where there were four undoes that.
    The accumulation option is set on the command line, as the user would."""
    knob = by_name("accumulation")
    assert knob is not None
    arg = {"option": "--per_device_train_batch_size", "aliases": ["--per_device_train_batch_size"],
           "value": 8, "source": "argparse"}  # fmt: skip
    option = "--gradient_accumulation_steps"
    accum = {"option": option, "aliases": [option], "value": 4, "source": "argparse"}
    given = ["--per_device_train_batch_size", "8", "--gradient_accumulation_steps=4"]
    facts = _facts(batch_arg=arg, accum_arg=accum,
                   command={"script": "train.py", "args": given})  # fmt: skip
    (group,) = knob.groups(Situation.of(facts))
    (arm,) = group.arms
    assert arm.changes["script_arg"]["value"] == 32
    assert arm.label.startswith(
        "--per_device_train_batch_size 32 with --gradient_accumulation_steps 1 (the same 32"
    )
    assert run_items(arm.changes, 32, 32) == 32
    assert script_args(given, arm.changes) == [
        "--per_device_train_batch_size", "32", "--gradient_accumulation_steps=1"]  # fmt: skip
    fix = knob.fix(arm, 32, facts)
    assert fix.code == (
        "python train.py --per_device_train_batch_size 32 --gradient_accumulation_steps=1"
    )
    # The option at another value than the run's accumulation sizes something else.
    facts["accum_arg"] = {**accum, "value": 2}
    (group,) = knob.groups(Situation.of(facts))
    assert "option" not in group.arms[0].changes["accumulation"]  # the Trainer's own keyword


def test_a_loop_of_the_users_own_takes_its_accumulation_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No framework: a loop that accumulates over ``--grad-accum-steps`` batches. The re-run
    passes the option at 1 and the DataLoader's batch grown; its facts say both took effect and
    the items per step stay."""
    (tmp_path / "train.py").write_text(textwrap.dedent("""
        import argparse
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        p = argparse.ArgumentParser()
        p.add_argument("--grad-accum-steps", type=int, default=4)
        args = p.parse_args()
        print("ACCUM", args.grad_accum_steps, flush=True)
        torch.manual_seed(0)
        model = torch.nn.Linear(8, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        loader = DataLoader(TensorDataset(torch.randn(4096, 8)), batch_size=4)
        for i, (x,) in enumerate(loader):
            model(x).pow(2).mean().backward()
            if (i + 1) % args.grad_accum_steps == 0:
                opt.step()
                opt.zero_grad()
        """))  # fmt: skip
    base = _run(tmp_path, "--steps", "30")
    assert base["accum_arg"]["option"] == "--grad-accum-steps"
    assert base["loader"]["batches_per_step"] == 4 and base["framework"] is None
    knob = by_name("accumulation")
    assert knob is not None
    (group,) = knob.groups(Situation.of(base))
    (arm,) = group.arms
    assert arm.label.startswith("DataLoader batch_size=16 with --grad-accum-steps 1")
    rerun = _run(tmp_path, "--steps", "30", "--inject", json.dumps(arm.changes),
                 after=script_args([], arm.changes))  # fmt: skip
    assert "ACCUM 1" in rerun["stdout"] and rerun["loader"]["batches_per_step"] == 1
    assert knob.took_effect(rerun, arm.changes) is None
    assert rerun["items_per_step"] == base["items_per_step"] == 16
    monkeypatch.chdir(tmp_path)
    fix = knob.fix(arm, 16, base)
    assert fix.code == "python train.py --grad-accum-steps 1"
    # Beside the command, the DataLoader's batch where the file sets it.
    assert fix.patch is not None and "batch_size=16)" in fix.patch, fix


def test_no_arm_without_a_frameworks_accumulation() -> None:
    knob = by_name("accumulation")
    assert knob is not None
    assert knob.groups(Situation.of(_facts(framework=None))) == []  # a loop of the user's own
    assert knob.groups(Situation.of(_facts(loader={"batch_size": 8, "batches_per_step": 1}))) == []
    assert knob.validate({"accumulation": {"steps": 1, "was": 4}}) is None
    assert knob.validate({"accumulation": 1}) is not None


LIGHTNING = """\
import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset


class Data(L.LightningDataModule):
    def __init__(self, batch_size=4):
        super().__init__()
        self.batch_size = batch_size

    def train_dataloader(self):
        return DataLoader(TensorDataset(torch.randn(4096, 8)), batch_size=self.batch_size)


class Net(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 2)

    def training_step(self, batch, i):
        (x,) = batch
        return self.lin(x).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


trainer = L.Trainer(accelerator="cpu", max_steps=60, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, accumulate_grad_batches=4)
trainer.fit(Net(), Data(batch_size=4))
print("ACCUM", trainer.accumulate_grad_batches)
"""


def test_lightnings_accumulation_is_traded_and_the_fix_changes_both_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lightning: the DataModule's batch and the Trainer's ``accumulate_grad_batches`` in one
    diff of the file that makes both."""
    pytest.importorskip("lightning.pytorch")
    (tmp_path / "train.py").write_text(LIGHTNING)
    base = _run(tmp_path)
    assert "ACCUM 4" in base["stdout"] and base["framework"] == "lightning"
    knob = by_name("accumulation")
    assert knob is not None
    (group,) = knob.groups(Situation.of(base))
    (arm,) = group.arms
    assert arm.label.startswith("DataLoader batch_size=16 with accumulate_grad_batches=1")
    rerun = _run(tmp_path, "--inject", json.dumps(arm.changes))
    assert "ACCUM 1" in rerun["stdout"] and rerun["injected"].get("accumulation") == 1
    assert rerun["items_per_step"] == base["items_per_step"] == 16
    monkeypatch.chdir(tmp_path)
    fix = knob.fix(arm, 16, base)
    assert fix.patch is not None, fix
    (diff,) = parse(fix.patch)
    out = apply(LIGHTNING, diff)
    assert "accumulate_grad_batches=1)" in out and "Data(batch_size=16))" in out
    ast.parse(out)
    # The Trainer made by a helper of another file: no half of the change alone (the batch
    # alone would grow the update).
    elsewhere = LIGHTNING.replace("L.Trainer(", "make_trainer(")
    (tmp_path / "train.py").write_text(elsewhere)
    fix = knob.fix(arm, 16, base)
    assert fix.patch is None and "accumulate_grad_batches=1" in fix.text


def test_both_winning_the_combined_run_keeps_the_update_as_it_was() -> None:
    """The batch's row and this one both grow the loader's batch: run together, the later one
    (planned after the batch) sets it, with the accumulation at 1, and the label says only it."""
    from gpusight.rerun.plan import combine, plan, together_label

    groups = [g for g in plan(_facts()) if g.name in ("batch", "accumulation")]
    assert [g.name for g in groups] == ["batch", "accumulation"]
    winners = [groups[0].arms[1], groups[1].arms[0]]  # batch 128, and 32 with accumulation 1
    assert combine(winners) == {"batch_size": 32, "accumulation": {"steps": 1, "was": 4}}
    label = together_label(winners)
    assert "gradient_accumulation_steps=1" in label and "batch_size=128" not in label


OWN_COUNT = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

ACCUM_STEPS = 4

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(TensorDataset(torch.randn(16384, 32)), batch_size=4)
for i, (x,) in enumerate(loader):
    loss = model(x).pow(2).mean() / ACCUM_STEPS
    loss.backward()
    if (i + 1) % ACCUM_STEPS == 0:
        opt.step()
        opt.zero_grad()
"""


def _accumulation_row(folder: Path) -> dict[str, Any]:
    """``gpusight run --what-if --try accumulation --patch fix.diff train.py`` in ``folder``:
    its one accumulation row."""
    cmd = [sys.executable, "-m", "gpusight", "run", "--quiet", "--what-if", "--try",
           "accumulation", "--budget", "60", "--json", "r.json", "--patch", "fix.diff",
           "train.py"]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=folder)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads((folder / "r.json").read_text())
    (row,) = [r for r in report["what_if"] if r["params"].get("group") == "accumulation"]
    return row


def test_a_loop_that_accumulates_over_a_number_of_its_own_is_measured_so(tmp_path: Path) -> None:
    """No option, no framework: the loop steps every ``ACCUM_STEPS`` batches, a number its file
    sets. The what-if runs a copy of the file with it at 1 beside the grown batch, measures the
    row, and ``--patch`` writes both changes in one diff; the user's file stays as it was."""
    (tmp_path / "train.py").write_text(OWN_COUNT)
    row = _accumulation_row(tmp_path)
    assert row["change"].startswith("DataLoader batch_size=16 with ACCUM_STEPS = 1")
    assert row["params"]["items_per_step"] == 16 and row["speedup"] > 1.0, row
    assert (tmp_path / "train.py").read_text() == OWN_COUNT
    (diff,) = parse((tmp_path / "fix.diff").read_text())
    fixed = apply(OWN_COUNT, diff)
    assert "\nACCUM_STEPS = 1\n" in fixed and "batch_size=16)" in fixed
    assert fixed.count("\n") == OWN_COUNT.count("\n")


def test_the_loops_count_not_reaching_the_step_is_said(tmp_path: Path) -> None:
    """A re-run whose optimizer steps still took the old number of batches (the count set
    again further on) shows the change did not take effect."""
    knob = by_name("accumulation")
    assert knob is not None
    (tmp_path / "train.py").write_text(OWN_COUNT)
    facts = _facts(framework=None, forward_site={
        "file": str(tmp_path / "train.py"), "shown": "train.py", "line": 11})  # fmt: skip
    (group,) = knob.groups(Situation.of(facts))
    (arm,) = group.arms
    setting = arm.changes["accumulation"]
    assert (setting["name"], setting["line"]) == ("ACCUM_STEPS", 4)
    edits = knob.source_edits(arm.changes)
    assert isinstance(edits, dict)
    assert edits[str(tmp_path / "train.py")] == OWN_COUNT.replace("STEPS = 4", "STEPS = 1")
    stuck = {"loader": {"batch_size": 32, "batches_per_step": 4}}
    assert "ACCUM_STEPS = 1 did not reach" in str(knob.took_effect(stuck, arm.changes))
    assert knob.took_effect({"loader": {"batches_per_step": 1}}, arm.changes) is None
    # The file changed since the run: the re-run is refused with the reason.
    (tmp_path / "train.py").write_text(OWN_COUNT.replace("STEPS = 4", "STEPS = 2"))
    assert "no longer sets ACCUM_STEPS = 4" in str(knob.source_edits(arm.changes))


def test_lightnings_datamodule_in_a_file_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The DataModule in ``data.py``, the Trainer in the script: the fix's diff changes each
    file where it sets its value, the batch in one and the accumulation in the other."""
    pytest.importorskip("lightning.pytorch")
    head, _, tail = LIGHTNING.partition("class Net(")
    data = head
    train = (
        "import lightning as L\nimport torch\nfrom data import Data\n\n\nclass Net("
        + tail.replace("Data(batch_size=4)", "Data()")
    )
    (tmp_path / "data.py").write_text(data)
    (tmp_path / "train.py").write_text(train)
    base = _run(tmp_path)
    knob = by_name("accumulation")
    assert knob is not None
    (group,) = knob.groups(Situation.of(base))
    (arm,) = group.arms
    monkeypatch.chdir(tmp_path)
    fix = knob.fix(arm, 16, base)
    assert fix.patch is not None and fix.patch_files is not None, fix
    diffs = {d.path: d for d in parse(fix.patch)}
    assert sorted(diffs) == sorted(p.path for p in fix.patch_files) == ["data.py", "train.py"]
    assert "def __init__(self, batch_size=16)" in apply(data, diffs["data.py"])
    assert "accumulate_grad_batches=1)" in apply(train, diffs["train.py"])


def test_in_a_notebook_the_cell_that_builds_the_loader_and_loops_is_changed() -> None:
    """The fix of a cell that sets its count, builds its loader and loops: that cell with the
    count at 1 and the batch grown, one change. A loader built in an earlier cell is another
    cell to change: no patch of one without the other (alone, either changes the update)."""
    knob = by_name("accumulation")
    assert knob is not None
    body = OWN_COUNT.split("\n", 3)[3]  # from ACCUM_STEPS = 4 on
    compiled = "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n" + body
    call = compiled.splitlines().index("    loss = model(x).pow(2).mean() / ACCUM_STEPS") + 1
    loader = compiled.splitlines().index(
        "loader = DataLoader(TensorDataset(torch.randn(16384, 32)), batch_size=4)") + 1  # fmt: skip
    cell = {"source": "%%gpusight --what-if\n" + compiled.rstrip("\n"), "compiled": compiled,
            "line": call, "offset": 1, "execution_count": 7}  # fmt: skip
    site = {"file": "<ipython-input-7>", "shown": "cell [7]", "line": call}
    facts = _facts(framework=None, forward_cell=cell, loader_cell={**cell, "line": loader},
                   forward_site=site)  # fmt: skip
    (group,) = knob.groups(Situation.of(facts))
    (arm,) = group.arms
    assert arm.changes["accumulation"]["name"] == "ACCUM_STEPS"
    fix = knob.fix(arm, 32, facts)
    assert fix.cell is not None, fix
    assert "\nACCUM_STEPS = 1\n" in fix.cell.patched and "batch_size=32)" in fix.cell.patched
    assert "ACCUM_STEPS = 1" in fix.text and fix.patch is not None
    elsewhere = {**facts, "loader_cell": {**cell, "line": loader, "execution_count": 6}}
    fix = knob.fix(arm, 32, elsewhere)
    assert fix.cell is None and fix.patch is None and "ACCUM_STEPS = 1" in fix.text


def test_a_count_the_loop_imports_from_a_config_module_of_its_folder(tmp_path: Path) -> None:
    """``from config import ACCUM_STEPS``: the re-run runs a copy of ``config.py`` with it at
    1, and the fix's diff changes that file beside the script's DataLoader."""
    (tmp_path / "config.py").write_text("LR = 0.01\nACCUM_STEPS = 4\n")
    script = OWN_COUNT.replace("ACCUM_STEPS = 4\n", "from config import ACCUM_STEPS, LR\n")
    (tmp_path / "train.py").write_text(script)
    row = _accumulation_row(tmp_path)
    assert row["change"].startswith("DataLoader batch_size=16 with ACCUM_STEPS = 1"), row
    assert row["params"]["items_per_step"] == 16 and row["speedup"] > 1.0, row
    assert (tmp_path / "config.py").read_text() == "LR = 0.01\nACCUM_STEPS = 4\n"
    diffs = {d.path: d for d in parse((tmp_path / "fix.diff").read_text())}
    assert sorted(diffs) == ["config.py", "train.py"]
    assert (
        apply("LR = 0.01\nACCUM_STEPS = 4\n", diffs["config.py"]) == "LR = 0.01\nACCUM_STEPS = 1\n"
    )
    assert "batch_size=16)" in apply(script, diffs["train.py"])
