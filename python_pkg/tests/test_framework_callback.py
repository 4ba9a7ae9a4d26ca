"""Lightning's named hooks timed on the measured steps (``watch/framework_hooks.py``), and the
finding that names a callback shipped with Lightning when it takes a share of every step
(``rules/framework_hook_fix.py``): real Lightning and real torch on the CPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from gpusight.rules.framework_hook_fix import (
    HookTime,
    callback_costs,
    callback_fix,
    costliest_callback,
    loop_text,
)
from gpusight.watch.framework_hooks import hook_times, hooks_run
from lightning_support import fit_classifier

BAR = "[Callback]TQDMProgressBar.on_train_batch_end"


def test_a_hook_name_gives_its_kind_class_and_hook() -> None:
    ckpt = HookTime("[Callback]ModelCheckpoint{'monitor': None, 'mode': 'min'}.on_train_batch_end",
                    0.1, 1.0)  # fmt: skip
    assert (ckpt.kind, ckpt.owner, ckpt.hook) == (
        "Callback",
        "ModelCheckpoint",
        "on_train_batch_end",
    )
    strategy = HookTime("[Strategy]SingleDeviceStrategy.backward", 0.2, 1.0)
    assert (strategy.kind, strategy.owner) == ("Strategy", "SingleDeviceStrategy")
    assert HookTime("run_training_batch", 0.1, 1.0).kind == "loop"


def test_spans_count_in_the_step_they_began_in_and_only_in_the_steps_given() -> None:
    spans = [("a", 5, 100), ("b", 15, 300), ("a", 25, 500), ("a", 45, 700)]
    times = {h.name: h for h in hook_times(spans, [(20, 30), (0, 10)])}
    assert times["a"].ms == pytest.approx((100 + 500) / 1e6 / 2)
    assert times["a"].calls == 1.0
    assert "b" not in times  # began between the steps given
    assert hook_times(spans, []) == []
    run = hooks_run(list(times.values()))
    assert run is not None and run["hooks"][0]["name"] == "a"


def test_the_users_own_callbacks_and_gpusights_are_not_named() -> None:
    hooks = [
        HookTime("[Callback]MyMetrics.on_train_batch_end", 0.5, 1.0),
        HookTime("[Callback]GpusightCallback.on_train_batch_end", 0.4, 1.0),
        HookTime(BAR, 0.05, 1.0),
        HookTime("[Callback]TQDMProgressBar.on_train_batch_start", 0.01, 1.0),
        HookTime("[Strategy]SingleDeviceStrategy.training_step", 0.9, 1.0),
    ]
    costs = callback_costs(hooks, {"MyMetrics.on_train_batch_end"})
    assert list(costs) == ["TQDMProgressBar"]
    assert costs["TQDMProgressBar"] == pytest.approx(0.06)
    assert costliest_callback(hooks, {"MyMetrics.on_train_batch_end"}, 1.0) == (
        "TQDMProgressBar",
        pytest.approx(0.06),
    )
    # Under 3 % of the step: not worth naming.
    assert costliest_callback(hooks, {"MyMetrics.on_train_batch_end"}, 10.0) is None


def test_the_fix_is_chosen_by_the_callback() -> None:
    at = "train.py:30 (`trainer.fit(model)`)"
    bar, code = callback_fix("RichProgressBar", 0.1, 1.0, at)
    assert "enable_progress_bar=False" in bar and "RichProgressBar(refresh_rate=50)" in bar
    assert code == "callbacks=[RichProgressBar(refresh_rate=50)]"
    lr, _ = callback_fix("LearningRateMonitor", 0.1, 1.0, at)
    assert 'logging_interval="epoch"' in lr
    stats, _ = callback_fix("DeviceStatsMonitor", 0.1, 1.0, at)
    assert "debugging run" in stats
    other, code = callback_fix("SomeLibraryCallback", 0.1, 1.0, at)
    assert "SomeLibraryCallback" in other and code is None


def test_the_loop_lines_fix_follows_where_its_hooks_time_went() -> None:
    """Under ``trainer.fit(...)``: each named part's time, and the change for the part the
    user can act on (the loader's wait, the batch's copy), else the batch."""
    at = "train.py:30 (`trainer.fit(model)`)"
    step = [
        HookTime("[Strategy]SingleDeviceStrategy.training_step", 0.45, 1.0),
        HookTime("[Strategy]SingleDeviceStrategy.backward", 0.2, 1.0),
    ]
    waiting = [HookTime("[_TrainingEpochLoop].train_dataloader_next", 0.3, 1.0), *step]
    text = loop_text(at, waiting, 1.2)
    assert text is not None and "the next batch from the DataLoader 0.30 ms" in text
    assert "num_workers=N" in text
    copying = [*step, HookTime("[Strategy]SingleDeviceStrategy.batch_to_device", 0.15, 1.0)]
    text = loop_text(at, copying, 1.2)
    assert text is not None and "pin_memory=True" in text and "num_workers" not in text
    text = loop_text(at, step, 1.2)
    assert text is not None and "the training step (your training_step" in text
    assert "larger batch" in text and "pin_memory" not in text
    assert loop_text(at, [], 1.2) is None


def _fit(bar: bool, profiler: Any = None, lean: bool = False) -> Any:
    return fit_classifier(bar=bar, profiler=profiler, lean=lean)


def test_a_progress_bar_is_timed_by_its_hooks_and_named() -> None:
    from lightning.pytorch.profilers import PassThroughProfiler

    start, stop = vars(PassThroughProfiler)["start"], vars(PassThroughProfiler)["stop"]
    report = _fit(bar=True)
    hooks = {h["name"]: h for h in report.run["framework_hooks"]["hooks"]}
    assert hooks[BAR]["calls_per_step"] == 1.0 and hooks[BAR]["ms_per_step"] > 0
    assert any(n.startswith("[Strategy]") for n in hooks)
    found = [f for f in report.findings if f.id == "code.framework_callback"]
    assert len(found) == 1 and "TQDMProgressBar" in found[0].title, found
    assert "enable_progress_bar=False" in found[0].fix.text
    # Nothing lost: Lightning's default profiler is its own again.
    assert vars(PassThroughProfiler)["start"] is start
    assert vars(PassThroughProfiler)["stop"] is stop


def test_no_progress_bar_no_finding() -> None:
    report = _fit(bar=False)
    names = [h["name"] for h in report.run["framework_hooks"]["hooks"]]
    assert not any("ProgressBar" in n for n in names)
    assert not [f for f in report.findings if f.id == "code.framework_callback"]


def test_a_lean_watch_times_no_hooks() -> None:
    """A what-if's timed re-runs (lean) compare step times alone: no hook of Lightning's is
    timed there, and the bar stays Lightning's own."""
    from lightning.pytorch.profilers import PassThroughProfiler

    start = vars(PassThroughProfiler)["start"]
    report = _fit(bar=True, lean=True)
    assert "framework_hooks" not in report.run
    assert vars(PassThroughProfiler)["start"] is start


def test_a_profiler_of_the_users_own_is_left_alone() -> None:
    """A Trainer given its own profiler: it records as it would unwatched, and the report has
    no hooks of its (gpusight times only Lightning's default, do-nothing profiler)."""
    L = pytest.importorskip("lightning.pytorch")
    profiler = L.profilers.SimpleProfiler()
    report = _fit(bar=False, profiler=profiler)
    assert "framework_hooks" not in report.run
    assert len(profiler.recorded_durations["run_training_batch"]) >= 100  # every batch run


SCRIPT = """\
import sys
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
import lightning as L
from lightning.pytorch.callbacks import TQDMProgressBar


class Classifier(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main():
    steps = int(sys.argv[1])
    data = TensorDataset(torch.randn(32 * steps, 16), torch.randint(0, 4, (32 * steps,)))
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", logger=False,
                        enable_checkpointing=False, enable_model_summary=False,
                        callbacks=[TQDMProgressBar(refresh_rate=1)])
    trainer.fit(Classifier(), DataLoader(data, batch_size=32))


if __name__ == "__main__":
    main()
"""


def test_the_fix_patches_the_scripts_trainer_call(tmp_path: Path) -> None:
    """``gpusight run`` on a script: the finding's patch slows the bar the script makes."""
    pytest.importorskip("lightning.pytorch")
    (tmp_path / "train_bar.py").write_text(SCRIPT)
    cmd = [sys.executable, "-m", "gpusight", "run", "--steps", "150", "--json",
           str(tmp_path / "r.json"), "train_bar.py", "400"]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads((tmp_path / "r.json").read_text())
    found = next(f for f in report["findings"] if f["id"] == "code.framework_callback")
    assert found["fix"]["patch_files"][0]["path"] == "train_bar.py"
    # The script makes its own bar: that bar redrawn every 50 batches, not the Trainer's
    # switch off (Lightning refuses a bar in callbacks with the switch off).
    added = [ln for ln in found["fix"]["patch"].splitlines() if ln.startswith("+ ")]
    assert added == ["+                        callbacks=[TQDMProgressBar(refresh_rate=50)])"]
    assert {"label": "change", "value": "refresh_rate=50"} in found["evidence"]
    assert "train_bar.py:" in found["fix"]["text"] and "trainer.fit(" in found["fix"]["text"]
    assert (tmp_path / "train_bar.py").read_text() == SCRIPT  # the user's file unchanged


def test_hugging_faces_trainer_is_timed_by_its_parts(tmp_path: Path) -> None:
    """Hugging Face's Trainer names no hooks: its step's methods and the events it sends its
    callbacks are timed under names of the same form, and put back afterwards."""
    transformers = pytest.importorskip("transformers")
    from gpusight.watch import Watch
    from test_integrations import hf_trainer

    cls = transformers.Trainer
    before = {m: vars(cls)[m] for m in ("training_step", "get_batch_samples")}
    trainer = hf_trainer(tmp_path, None, max_steps=60)
    with Watch(steps=30, warmup=3, profile_steps=0) as w:
        trainer.train()
    hooks = {h["name"]: h for h in w.report.run["framework_hooks"]["hooks"]}
    step = hooks["[Trainer]Trainer.training_step"]
    assert step["calls_per_step"] == 1.0 and step["ms_per_step"] > 0
    assert "[Callback]TrainerCallbacks.on_step_end" in hooks
    # The clipping of every step's gradients (max_grad_norm=1.0 by default) is a part too.
    assert hooks["[Trainer]Trainer._clip_grad_norm"]["calls_per_step"] == 1.0
    # The Trainer's callbacks, timed as one, are no callback of Lightning's to name.
    assert not [f for f in w.report.findings if f.id == "code.framework_callback"]
    assert {m: vars(cls)[m] for m in before} == before


def test_the_trainers_loop_text_names_its_parts_and_options() -> None:
    at = "train.py:40 (`trainer.train()`)"
    parts = [
        HookTime("[Trainer]Trainer.training_step", 6.0, 1.0),
        HookTime("[Trainer]Trainer.get_batch_samples", 2.0, 1.0),
        HookTime("[Callback]TrainerCallbacks.on_step_end", 0.1, 1.0),
    ]
    text = loop_text(at, parts, 10.0)
    assert text is not None and "the Trainer's per-step code" in text
    assert "the training step (the forward, the loss and backward) 6.00 ms" in text
    assert "the callbacks' on_step_end 0.10 ms; outside them 1.90 ms" in text
    assert "dataloader_num_workers=N" in text
    text = loop_text(at, parts[:1], 10.0)
    assert text is not None and "per_device_train_batch_size" in text
    # The optimizer's step, which the Trainer calls between its parts, is one of them.
    text = loop_text(at, parts, 10.0, optimizer_ms=1.5)
    assert text is not None
    assert "the next batches from the DataLoader 2.00 ms; the optimizer's step 1.50 ms" in text
    assert "outside them" not in text  # 0.40 ms left, under 5 % of the step
