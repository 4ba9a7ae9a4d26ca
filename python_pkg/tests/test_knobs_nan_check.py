"""The nan-check knob (``knobs/nan_check.py``): Hugging Face's Trainer re-run with
``logging_nan_inf_filter=False``, planned where its per-step check of the loss is the run's host
sync, and handed over as the keyword in the script's own ``TrainingArguments(...)``. Real
transformers on the CPU."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from gpusight.fixes.diff_apply import apply, parse
from gpusight.knobs import Situation, by_name
from hf_support import trainer_script

LIB = "/venv/lib/python3.12/site-packages"

TRAIN = trainer_script(
    "    per_device_train_batch_size=8,\n",
    'print("FILTER", trainer.args.logging_nan_inf_filter)\n',
)


def _facts(syncs: list[dict[str, object]]) -> dict[str, object]:
    return {
        "finding_ids": ["code.host_sync"],
        "breakdown_ms": {"compute": 60.0, "sync_stall": 20.0, "launch_overhead": 20.0},
        "syncs": syncs,
    }


NAN_SYNC = {
    "kind": "sync",
    "count": 170,
    "file": f"{LIB}/transformers/trainer.py",
    "line": 1959,
    "code": "and (torch.isnan(tr_loss_step) or torch.isinf(tr_loss_step))",
}


def test_the_arm_is_planned_where_the_trainers_check_is_the_runs_sync() -> None:
    knob = by_name("nan_check")
    assert knob is not None
    (group,) = knob.groups(Situation.of(_facts([NAN_SYNC])))
    (arm,) = group.arms
    assert arm.label == "TrainingArguments(..., logging_nan_inf_filter=False)"
    assert arm.changes == {"nan_check": "off"} and arm.finding_id == "code.host_sync"
    # The most it can give back: the share of the step the host waited for the GPU.
    assert group.bound == pytest.approx(100 / 80)
    # A sync of the user's own, or the same text in another library's file: nothing to turn off.
    own = {**NAN_SYNC, "file": "/home/u/train.py"}
    assert knob.groups(Situation.of(_facts([own]))) == []
    other = {**NAN_SYNC, "file": f"{LIB}/lightning/trainer.py"}
    assert knob.groups(Situation.of(_facts([other]))) == []
    assert knob.validate({"nan_check": "on"}) is not None
    assert knob.validate({"nan_check": "off"}) is None


def test_a_rerun_turns_the_check_off_and_the_fix_patches_the_scripts_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """End to end on the CPU: the unmodified script's Trainer runs with the check off in the
    re-run (its facts say the change took effect), and the fix writes the keyword into the
    script's one ``TrainingArguments(...)``, a diff that applies and parses."""
    pytest.importorskip("transformers")
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    facts_path = tmp_path / "facts.json"
    base = [sys.executable, "-m", "gpusight", "run", "--quiet", "--facts", str(facts_path),
            "train.py"]  # fmt: skip
    out = subprocess.run(base, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0 and "FILTER True" in out.stdout, out.stderr[-2000:]
    facts = json.loads(facts_path.read_text())
    rerun = [sys.executable, "-m", "gpusight", "run", "--quiet", "--inject",
             '{"nan_check": "off"}', "--facts", str(tmp_path / "f2.json"), "train.py"]  # fmt: skip
    out = subprocess.run(rerun, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0 and "FILTER False" in out.stdout, out.stderr[-2000:]
    assert json.loads((tmp_path / "f2.json").read_text())["injected"].get("nan_check") == 1
    assert script.read_text() == TRAIN

    # The script as the run named it (``facts["command"]``), read where the run started.
    monkeypatch.chdir(tmp_path)
    knob = by_name("nan_check")
    assert knob is not None
    (group,) = knob.groups(Situation.of(_facts([NAN_SYNC])))
    fix = knob.fix(group.arms[0], 8, facts)
    assert fix.patch is not None, fix
    (diff,) = parse(fix.patch)
    patched = apply(TRAIN, diff)
    (call,) = [n for n in ast.walk(ast.parse(patched)) if isinstance(n, ast.Call)
               and getattr(n.func, "id", None) == "TrainingArguments"]  # fmt: skip
    keywords = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    assert keywords["logging_nan_inf_filter"] is False and keywords["max_steps"] == 60
    assert fix.text.startswith("Hugging Face's Trainer checks every step's loss for nan")
