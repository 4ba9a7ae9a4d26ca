"""A LightningModule's ``self.log`` line gets Lightning's own fix: fewer calls, the bar's read
named where ``prog_bar=True`` (real Lightning, real CPU torch)."""

from __future__ import annotations

from typing import Any

import pytest
from gpusight.rules.host_line_fix import HostLine, fix_text, lightning_log


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
    from gpusight.watch import Watch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    class Classifier(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            x, y = batch
            logits = self.net(x)
            loss = nn.functional.cross_entropy(logits, y)
            self.log("train_loss", loss, prog_bar=True, on_epoch=True)
            self.log("train_acc", (logits.argmax(1) == y).float().mean(), on_epoch=True)
            self.log("train_max", logits.max(), on_epoch=True)
            return loss

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    torch.manual_seed(0)
    steps = 160
    data = TensorDataset(torch.randn(8 * steps, 16), torch.randint(0, 4, (8 * steps,)))
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", logger=False,
                        enable_checkpointing=False, enable_model_summary=False,
                        enable_progress_bar=False)  # fmt: skip
    with Watch(steps=steps - 20, warmup=3, profile_steps=0) as w:
        trainer.fit(Classifier(), DataLoader(data, batch_size=8))
    texts = [f.fix.text for f in w.report.findings if f.fix is not None]
    logs = [t for t in texts if "self.log(" in t]
    assert logs, [(f.id, f.title) for f in w.report.findings]
    assert all(t.startswith("Log per-step values every N batches") for t in logs), logs
