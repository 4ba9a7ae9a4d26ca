"""A small classifier fit by real Lightning on the CPU under a watch: the tests of Lightning's
hooks and of its ``self.log`` lines share it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

# What a training step logs: ``(module, loss, logits, targets)``.
Logs = Callable[[Any, Any, Any, Any], None]


def bar_logs(module: Any, loss: Any, logits: Any, y: Any) -> None:
    module.log("train_loss", loss, prog_bar=True)


def fit_classifier(
    logs: Logs = bar_logs,
    *,
    module: Any = None,
    bar: bool = False,
    steps: int = 120,
    batch: int = 32,
    profiler: Any = None,
    lean: bool = False,
) -> Any:
    """A 16-32-4 MLP fit for one epoch of ``steps`` batches under a watch, its training step
    logging as ``logs`` does (or ``module``, a LightningModule of the test's own, fit on the
    same data), with a per-batch progress bar or none (and the Trainer's ``profiler``); the
    watch's report."""
    L = pytest.importorskip("lightning.pytorch")
    import torch
    from gpusight.watch import Watch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    class Classifier(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

        def training_step(self, b: Any, batch_idx: int) -> Any:
            x, y = b
            logits = self.net(x)
            loss = nn.functional.cross_entropy(logits, y)
            logs(self, loss, logits, y)
            return loss

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    torch.manual_seed(0)
    data = TensorDataset(torch.randn(batch * steps, 16), torch.randint(0, 4, (batch * steps,)))
    callbacks = [L.callbacks.TQDMProgressBar(refresh_rate=1)] if bar else []
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", logger=False,
                        enable_checkpointing=False, enable_model_summary=False,
                        enable_progress_bar=bar, callbacks=callbacks,
                        profiler=profiler)  # fmt: skip
    with Watch(steps=steps - 20, warmup=3, profile_steps=0, lean=lean) as w:
        trainer.fit(module or Classifier(), DataLoader(data, batch_size=batch))
    return w.report
