"""A small classifier under Lightning with a TQDM progress bar and two values logged to it.

The loop: ``L.Trainer(max_steps=...).fit`` of a ``LightningModule`` MLP (64 features, one
256-wide hidden layer, 10 classes, Adam) over a ``DataLoader`` of batch 256 on synthetic feature
vectors; ``training_step`` logs its loss and accuracy with ``prog_bar=True``, as the Lightning
docs show. The Trainer gets ``TQDMProgressBar()`` (redrawn at every batch), as scripts do that
keep the bar Lightning had before Rich's became its default where ``rich`` is installed (Rich's
bar, in a process whose output is no terminal, as a what-if's re-runs are, draws nothing). A
``Callback.on_train_batch_end`` marks the clock with the batch's length.

What holds the GPU back: the step is a few kernels, so the host's time sets the pace, and the
progress bar's redraw at every batch (with its read of the two logged values from the GPU, a
wait for it) is a share of that time.

--fix: ``TQDMProgressBar(refresh_rate=50)``: the bar redrawn every 50 batches.
"""

from __future__ import annotations

import tempfile
from typing import Any

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from _corpus import Clock, parser, pick_device
from lightning.pytorch.callbacks import TQDMProgressBar
from torch.utils.data import DataLoader, TensorDataset

LIBRARY = "lightning"
LABEL = "Lightning MLP, TQDM bar redrawn per batch with prog_bar=True values: host-bound"
EXPECTED = {"bottleneck": "launch_overhead", "pick": "progress_bar"}
FIX = "TQDMProgressBar(refresh_rate=50) (was TQDMProgressBar(), redrawn every batch)"


class Classifier(L.LightningModule):
    def __init__(self, features: int = 64, hidden: int = 256, lr: float = 1e-3) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, 10))

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> Any:
        x, y = batch
        logits = self.net(x)
        loss = F.cross_entropy(logits, y)
        acc = (logits.argmax(dim=1) == y).float().mean()
        self.log("train_loss", loss, prog_bar=True)
        self.log("train_acc", acc, prog_bar=True)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


class ClockCallback(L.Callback):
    """Marks the script's clock at the end of every training batch with its length."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def on_train_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        self.clock.mark(len(batch[0]))


def main() -> None:
    p = parser(__doc__, iters=1500)
    p.add_argument("--batch_size", type=int, default=256)
    args = p.parse_args()
    dev = pick_device(args.device)
    L.seed_everything(0, verbose=False)
    n = 256 * 4096 if dev.type == "cuda" else 256 * 64
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 64, generator=g)
    y = (x @ torch.randn(64, 10, generator=g)).argmax(dim=1)
    loader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size, shuffle=True)

    clock = Clock("lightning_progress_bar", args, dev)
    with tempfile.TemporaryDirectory() as root:
        trainer = L.Trainer(
            max_steps=args.iters,
            accelerator="auto" if dev.type == "cuda" else "cpu",
            devices=1,
            logger=False,
            enable_checkpointing=False,
            enable_model_summary=False,
            default_root_dir=root,
            callbacks=[ClockCallback(clock), TQDMProgressBar(refresh_rate=50 if args.fix else 1)],
        )
        with clock:
            trainer.fit(Classifier(), loader)
            clock.done()


if __name__ == "__main__":
    main()
