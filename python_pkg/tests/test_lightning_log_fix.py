"""A LightningModule's ``self.log`` line gets Lightning's own fix: fewer calls, the bar's read
named where ``prog_bar=True`` (real Lightning, real CPU torch)."""

from __future__ import annotations

from typing import Any

import pytest
from gpusight.rules.host_line_fix import HostLine, fix_text, lightning_log
from lightning_support import fit_classifier


def _line(code: str, function: str = "Classifier.training_step") -> HostLine:
    return HostLine("train.py", 12, code, function, ms=0.9, share_pct=20.0)


def test_lightnings_self_log_is_told_apart_from_other_loggers() -> None:
    assert lightning_log(_line('self.log("train_loss", loss, prog_bar=True)'))
    assert lightning_log(_line('self.log(f"loss/{name}", loss)', "Net.validation_step"))
    assert lightning_log(_line('self.log_dict({"loss": loss, "acc": acc})'))
    assert lightning_log(_line('self.log("lr", lr)', "Net.on_train_batch_end"))
    # A Hugging Face Trainer subclass logs one dict; a helper of the user's is no hook.
    assert not lightning_log(_line("self.log(logs)", "MyTrainer.training_step"))
    assert not lightning_log(_line('self.log("x", v)', "Net.report"))
    assert not lightning_log(_line('writer.add_scalar("loss", loss, step)'))


def test_the_fix_names_the_bars_read_only_where_the_value_goes_to_the_bar() -> None:
    bar = fix_text(_line('self.log("train_loss", loss, prog_bar=True)')) or ""
    assert bar.startswith("Log per-step values every N batches at train.py:12")
    assert "`if batch_idx % N == 0:`" in bar and "log_every_n_steps" in bar
    assert "TQDMProgressBar(refresh_rate=N)" in bar
    plain = fix_text(_line('self.log("train_loss", loss, on_epoch=True)')) or ""
    assert plain.startswith("Log per-step values") and "prog_bar" not in plain
    # Other loggers keep the generic text.
    other = fix_text(_line('writer.add_scalar("loss", loss.item(), step)', "main")) or ""
    assert other.startswith("Log less often at train.py:12")


def test_a_watched_fit_names_the_log_lines_with_lightnings_fix() -> None:
    L = pytest.importorskip("lightning.pytorch")
    import torch
    from torch import nn

    class Logged(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            x, y = batch
            logits = self.net(x)
            loss = nn.functional.cross_entropy(logits, y)
            # Six values a step, as a module that logs its metrics does: their bookkeeping
            # outweighs this small model's compute, whatever the line clock samples.
            self.log("train_loss", loss, prog_bar=True, on_epoch=True)
            self.log("train_acc", (logits.argmax(1) == y).float().mean(), on_epoch=True)
            self.log("train_max", logits.max(), on_epoch=True)
            self.log("train_min", logits.min(), on_epoch=True)
            self.log("train_std", logits.std(), on_epoch=True)
            self.log("train_norm", logits.norm(), on_epoch=True)
            return loss

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    report = fit_classifier(module=Logged(), steps=160, batch=8)
    # The lines as the watch timed them: the hook they run in, their text.
    rows = [r for r in report.run["host_lines"]["lines"] if "self.log(" in (r["code"] or "")]
    assert len(rows) >= 3, report.run["host_lines"]["lines"]
    for r in rows:
        line = HostLine(r["file"], r["line"], r["code"], r["function"], r["ms_per_step"],
                        r["share_pct"])  # fmt: skip
        assert r["function"].endswith("Logged.training_step") and lightning_log(line), r
        assert (fix_text(line) or "").startswith("Log per-step values every N batches"), r
    # A finding that names one of them (which line tops the host's time varies from run to
    # run here: Lightning's own per-step code is as large) gives that text.
    texts = [
        f.fix.text for f in report.findings if f.fix is not None and "(`self.log(" in f.fix.text
    ]
    assert all(t.startswith("Log per-step values every N batches") for t in texts), texts
