"""An MLP classifier under Lightning with the DataModule's default batch of 16: host-bound steps.

The loop: ``L.Trainer(max_steps=...).fit`` of a ``LightningModule`` MLP (256 features, four
1024-wide hidden layers, 10 classes, Adam) on a ``LightningDataModule`` whose ``batch_size``
attribute defaults to 16; the data are synthetic feature vectors built in ``setup``, labelled by a
fixed random projection. A ``Callback.on_train_batch_end`` marks the clock with the batch's length.

What holds the GPU back: 16 rows is almost no work per kernel, so each step is the time the host
takes to go through Lightning's loop and launch the forward, backward and Adam kernels; the GPU
idles between them.

--fix: the DataModule's ``batch_size=512``.
"""

from __future__ import annotations

import tempfile
from typing import Any

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from _corpus import Clock, parser, pick_device
from torch.utils.data import DataLoader, TensorDataset

LIBRARY = "lightning"
LABEL = "Lightning MLP classifier, DataModule batch_size 16: launch-bound"
EXPECTED = {"bottleneck": "launch_overhead", "pick": "batch"}
FIX = "the LightningDataModule's batch_size=512 (was 16)"


class FeaturesDataModule(L.LightningDataModule):
    def __init__(
        self, batch_size: int = 16, num_workers: int = 0, n: int = 65536, features: int = 256
    ) -> None:
        super().__init__()
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.n = n
        self.features = features

    def setup(self, stage: str) -> None:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(self.n, self.features, generator=g)
        w = torch.randn(self.features, 10, generator=g)
        self.train_set = TensorDataset(x, (x @ w).argmax(dim=1))

    def train_dataloader(self) -> DataLoader:
        return DataLoader(
            self.train_set,
            batch_size=self.batch_size,
            shuffle=True,
            num_workers=self.num_workers,
        )


class MLPClassifier(L.LightningModule):
    def __init__(
        self, features: int = 256, hidden: int = 1024, depth: int = 4, lr: float = 1e-3
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        layers: list[nn.Module] = []
        width = features
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), nn.ReLU()]
            width = hidden
        layers.append(nn.Linear(width, 10))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> Any:
        x, y = batch
        return F.cross_entropy(self(x), y)

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
    p.add_argument("--batch_size", type=int, default=16)
    p.add_argument("--num_workers", type=int, default=0)
    args = p.parse_args()
    if args.fix:
        args.batch_size = 512
    dev = pick_device(args.device)
    L.seed_everything(0, verbose=False)

    if dev.type == "cuda":
        dm = FeaturesDataModule(batch_size=args.batch_size, num_workers=args.num_workers)
        model = MLPClassifier()
    else:  # smaller data and model so the CPU smoke test is quick
        dm = FeaturesDataModule(
            batch_size=args.batch_size, num_workers=args.num_workers, n=8192, features=64
        )
        model = MLPClassifier(features=64, hidden=128, depth=2)

    clock = Clock("lightning_small_batch", args, dev)
    with tempfile.TemporaryDirectory() as root:
        trainer = L.Trainer(
            max_steps=args.iters,
            accelerator="auto" if dev.type == "cuda" else "cpu",
            devices=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            default_root_dir=root,
            callbacks=[ClockCallback(clock)],
        )
        with clock:
            trainer.fit(model, datamodule=dm)
            clock.done()


if __name__ == "__main__":
    main()
