"""The progress-bar knob (``knobs/progress_bar.py``) and its patch (``fixes/framework_calls``):
real Lightning on the CPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from gpusight.fixes.framework_calls import progress_bar_patch
from gpusight.knobs import Situation, by_name
from gpusight.knobs.progress_bar import slower_bar

OWN_BAR = """\
import lightning as L
from lightning.pytorch.callbacks import TQDMProgressBar

trainer = L.Trainer(max_epochs=1,
                    callbacks=[TQDMProgressBar(refresh_rate=1)])
"""
DEFAULT_BAR = """\
import lightning as L

trainer = L.Trainer(max_epochs=1, logger=False)
"""


def test_the_patch_slows_the_scripts_own_bar_or_turns_the_default_off() -> None:
    made = progress_bar_patch(OWN_BAR, "train.py")
    assert made is not None and made[1] == "refresh_rate=50"
    assert "+                    callbacks=[TQDMProgressBar(refresh_rate=50)])" in made[0]
    made = progress_bar_patch(DEFAULT_BAR, "train.py")
    assert made is not None and made[1] == "enable_progress_bar=False"
    assert "enable_progress_bar=False)" in made[0]
    two = OWN_BAR + "other = TQDMProgressBar()\n"
    assert progress_bar_patch(two, "train.py") is None  # which one trains is not known
    assert progress_bar_patch("x = (", "train.py") is None


def test_the_trainer_builds_with_the_bar_slowed_or_off() -> None:
    L = pytest.importorskip("lightning.pytorch")
    bar = L.callbacks.TQDMProgressBar(refresh_rate=1)
    kwargs = {"callbacks": [bar], "logger": False}
    assert slower_bar(kwargs, 50)
    trainer = L.Trainer(**kwargs)
    assert trainer.progress_bar_callback is bar and bar.refresh_rate == 50
    kwargs = {"callbacks": [L.callbacks.TQDMProgressBar(refresh_rate=1)], "logger": False}
    assert slower_bar(kwargs, None)
    trainer = L.Trainer(**kwargs)  # Lightning refuses a bar in callbacks with the switch off
    assert trainer.progress_bar_callback is None
    kwargs = {"enable_progress_bar": False, "logger": False}
    assert not slower_bar(kwargs, None)  # off already: the change did not take effect


def test_the_arm_is_the_change_the_finding_patched() -> None:
    knob = by_name("progress_bar")
    assert knob is not None
    facts = {
        "finding_ids": ["code.framework_callback"],
        "framework_callback": {"name": "TQDMProgressBar", "share_pct": 14.0,
                               "change": "refresh_rate=50"},
    }  # fmt: skip
    (group,) = knob.groups(Situation.of(facts))
    assert group.arms[0].label == "TQDMProgressBar(refresh_rate=50)"
    assert group.arms[0].changes == {"progress_bar": 50}
    assert group.bound == pytest.approx(100 / 86)
    facts["framework_callback"]["change"] = "enable_progress_bar=False"
    (group,) = knob.groups(Situation.of(facts))
    assert group.arms[0].changes == {"progress_bar": "off"}
    facts["framework_callback"]["name"] = "LearningRateMonitor"
    assert knob.groups(Situation.of(facts)) == []
    assert knob.validate({"progress_bar": "on"}) is not None
    assert knob.validate({"progress_bar": 50}) is None


def test_the_baseline_plans_the_arm_and_a_rerun_takes_it(tmp_path: Path) -> None:
    """End to end on the CPU: the watched run's facts plan the arm the finding patched (the
    script's own bar at refresh_rate=50); a re-run with that change trains with the bar slowed,
    and its facts say the change took effect."""
    pytest.importorskip("lightning.pytorch")
    from test_framework_callback import SCRIPT

    script = tmp_path / "train_bar.py"
    script.write_text(SCRIPT.replace(
        "    trainer.fit(Classifier(), DataLoader(data, batch_size=32))\n\n\n",
        "    trainer.fit(Classifier(), DataLoader(data, batch_size=32))\n"
        "    print('REFRESH', trainer.progress_bar_callback.refresh_rate)\n\n\n",
    ))  # fmt: skip
    facts_path = tmp_path / "facts.json"
    base = [sys.executable, "-m", "gpusight", "run", "--facts", str(facts_path), str(script),
            "400"]  # fmt: skip
    out = subprocess.run(base, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert out.returncode == 0 and "REFRESH 1" in out.stdout, out.stderr[-2000:]
    knob = by_name("progress_bar")
    assert knob is not None
    (group,) = knob.groups(Situation.of(json.loads(facts_path.read_text())))
    arm = group.arms[0]
    assert arm.label == "TQDMProgressBar(refresh_rate=50)"
    rerun = [sys.executable, "-m", "gpusight", "run", "--inject", json.dumps(arm.changes),
             "--facts", str(facts_path), str(script), "400"]  # fmt: skip
    out = subprocess.run(rerun, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert out.returncode == 0 and "REFRESH 50" in out.stdout, out.stderr[-2000:]
    assert json.loads(facts_path.read_text())["injected"].get("progress_bar") == 1
