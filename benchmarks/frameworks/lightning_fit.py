"""A Lightning ``Trainer.fit`` script that trains an MLP 8 samples a step: the GPU waits on
kernel launches. Expected: launch_overhead (on a CPU-only machine, whatever both agree on).

    python lightning_fit.py [--max-steps N] [--callback report.json]

With ``--callback`` the script watches itself with ``gpusight.integrations.lightning``;
without it, run it under ``gpusight run`` (benchmarks/whatifs/callbacks.py does both).
"""

from __future__ import annotations

import argparse
import tempfile
from typing import Any

import lightning.pytorch as L
import torch


class SmallBatchMLP(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        layers: list[torch.nn.Module] = []
        for _ in range(6):
            layers += [torch.nn.Linear(512, 512), torch.nn.ReLU()]
        self.net = torch.nn.Sequential(*layers, torch.nn.Linear(512, 10))

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--callback", default=None, help="watch with the callback, report here")
    args = p.parse_args()
    callbacks = []
    if args.callback:
        from gpusight.integrations.lightning import GpusightCallback

        callbacks.append(
            GpusightCallback(steps=20, start_step=5, output=args.callback, display=False)
        )
    g = torch.Generator().manual_seed(0)
    n = args.batch * (args.max_steps + 8)
    data = torch.utils.data.TensorDataset(
        torch.randn(n, 512, generator=g), torch.randint(0, 10, (n,), generator=g)
    )
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch, shuffle=True)
    with tempfile.TemporaryDirectory() as root:
        trainer = L.Trainer(
            accelerator="auto",
            devices=1,
            max_steps=args.max_steps,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            default_root_dir=root,
            callbacks=callbacks,
        )
        trainer.fit(SmallBatchMLP(), loader)


if __name__ == "__main__":
    main()
