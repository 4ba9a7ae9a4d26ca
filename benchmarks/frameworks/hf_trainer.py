"""A Hugging Face ``Trainer`` script whose DataLoader cannot keep up: each item costs ~2 ms of
host time (decoding, say) and the trainer's loader has no workers. Expected: input_pipeline.

    python hf_trainer.py [--max-steps N] [--callback report.json]

With ``--callback`` the script watches itself with ``gpusight.integrations.huggingface``;
without it, run it under ``gpusight run`` (benchmarks/whatifs/callbacks.py does both).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from typing import Any

import torch
import transformers


class SlowItems(torch.utils.data.Dataset):  # type: ignore[type-arg]
    def __init__(self, n: int, sleep_s: float) -> None:
        self.n, self.sleep_s = n, sleep_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        time.sleep(self.sleep_s)
        g = torch.Generator().manual_seed(i)
        return {"x": torch.randn(256, generator=g), "labels": torch.randn((), generator=g)}


class Regressor(torch.nn.Module):
    """What Trainer expects of a model: keyword inputs, a loss in the output."""

    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1)
        )

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, Any]:
        out = self.net(x).squeeze(-1)
        loss = torch.nn.functional.mse_loss(out, labels) if labels is not None else None
        return {"loss": loss, "logits": out}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-steps", type=int, default=120)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--sleep-ms", type=float, default=2.0)
    p.add_argument("--callback", default=None, help="watch with the callback, report here")
    args = p.parse_args()
    callbacks = []
    if args.callback:
        from gpusight.integrations.huggingface import GpusightCallback

        callbacks.append(
            GpusightCallback(steps=20, start_step=5, output=args.callback, display=False)
        )
    with tempfile.TemporaryDirectory() as out:
        targs = transformers.TrainingArguments(
            output_dir=out,
            max_steps=args.max_steps,
            per_device_train_batch_size=args.batch,
            learning_rate=1e-3,
            report_to=[],
            save_strategy="no",
            logging_strategy="no",
            disable_tqdm=True,
            use_cpu=not torch.cuda.is_available(),
            dataloader_num_workers=0,
        )
        data = SlowItems(args.batch * (args.max_steps + 8), args.sleep_ms / 1000.0)
        trainer = transformers.Trainer(
            model=Regressor(), args=targs, train_dataset=data, callbacks=callbacks
        )
        trainer.train()


if __name__ == "__main__":
    main()
