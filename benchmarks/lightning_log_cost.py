"""What a LightningModule's ``self.log`` costs the host per step, by how it is called.

    .venv/bin/python benchmarks/lightning_log_cost.py MODE   # MODE: none log bar epoch dict

A 32-64-10 MLP at batch 32 on the CPU, 1,500 steps, no progress bar, a CSV logger (it writes every
``log_every_n_steps``); the median step after the first 200, from a callback's
``on_train_batch_end``. MODE: no logging; two ``self.log`` calls; the same with
``prog_bar=True``; the same with ``on_epoch=True``; one ``self.log_dict`` of both.
"""

from __future__ import annotations

import sys
import tempfile
import time
from typing import Any

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

MODES = ("none", "log", "bar", "epoch", "dict")


class Net(L.LightningModule):
    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode
        self.net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        logits = self.net(x)
        loss = F.cross_entropy(logits, y)
        acc = (logits.argmax(1) == y).float().mean()
        if self.mode == "log":
            self.log("loss", loss)
            self.log("acc", acc)
        elif self.mode == "bar":
            self.log("loss", loss, prog_bar=True)
            self.log("acc", acc, prog_bar=True)
        elif self.mode == "epoch":
            self.log("loss", loss, on_step=False, on_epoch=True)
            self.log("acc", acc, on_step=False, on_epoch=True)
        elif self.mode == "dict":
            self.log_dict({"loss": loss, "acc": acc})
        return loss

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.01)


class Ends(L.Callback):
    def __init__(self) -> None:
        self.t: list[float] = []

    def on_train_batch_end(self, *args: Any) -> None:
        self.t.append(time.perf_counter())


def main(mode: str) -> None:
    torch.set_num_threads(1)
    data = TensorDataset(torch.randn(32 * 2000, 32), torch.randint(0, 10, (32 * 2000,)))
    ends = Ends()
    with tempfile.TemporaryDirectory() as logs:
        trainer = L.Trainer(max_steps=1500, enable_progress_bar=False,
                            logger=L.pytorch.loggers.CSVLogger(logs), enable_checkpointing=False,
                            enable_model_summary=False, callbacks=[ends],
                            accelerator="cpu")  # fmt: skip
        trainer.fit(Net(mode), DataLoader(data, batch_size=32))
    steps = sorted(b - a for a, b in zip(ends.t[200:], ends.t[201:], strict=False))
    print(f"{mode}: median step {steps[len(steps) // 2] * 1e3:.3f} ms")


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in MODES:
        sys.exit(f"usage: lightning_log_cost.py {{{'|'.join(MODES)}}}")
    main(sys.argv[1])
