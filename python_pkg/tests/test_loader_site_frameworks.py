"""The user's ``DataLoader(...)`` line under a training framework: Lightning wraps the loader's
constructor while it calls the user's ``train_dataloader`` (to make the loader again later), so
the constructor's caller is Lightning's frame, and the loader's fix had no line to patch. Hugging
Face's Trainer makes its DataLoader itself: no line of the user's makes it."""

from __future__ import annotations

import inspect
from typing import Any

import pytest


def loader_line(fn: Any) -> int:
    """The line of ``fn``'s ``DataLoader(`` call, in this file."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, ln in enumerate(lines) if "DataLoader(" in ln)


def test_a_lightning_datamodules_loader_is_the_users_line() -> None:
    L = pytest.importorskip("lightning.pytorch")
    import torch
    from gpusight.rerun.facts import from_watch
    from gpusight.watch import Watch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    class Data(L.LightningDataModule):
        def __init__(self, batch_size: int) -> None:
            super().__init__()
            self.batch_size = batch_size

        def setup(self, stage: str | None = None) -> None:
            self.data = TensorDataset(torch.randn(2048, 16), torch.randint(0, 4, (2048,)))

        def train_dataloader(self) -> Any:
            return DataLoader(self.data, batch_size=self.batch_size, shuffle=True)

    class Classifier(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Linear(16, 4)

        def training_step(self, b: Any, batch_idx: int) -> Any:
            x, y = b
            return nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    trainer = L.Trainer(max_steps=60, accelerator="cpu", logger=False,
                        enable_checkpointing=False, enable_model_summary=False,
                        enable_progress_bar=False)  # fmt: skip
    with Watch(steps=40, warmup=3, profile_steps=0, lean=True) as w:
        trainer.fit(Classifier(), datamodule=Data(16))
    site = from_watch(w)["loader_site"]
    assert site is not None, "Lightning's wrapper hid the user's DataLoader call"
    assert site["file"] == __file__
    assert site["line"] == loader_line(Data.train_dataloader)


def test_a_trainers_own_loader_has_no_line_of_the_users(tmp_path: Any) -> None:
    """Past Hugging Face's frames the user's line is ``trainer.train()``: no DataLoader call of
    theirs to change (the fix goes to the TrainingArguments instead)."""
    pytest.importorskip("transformers")
    import torch
    from gpusight.rerun.facts import from_watch
    from gpusight.watch import Watch
    from torch import nn
    from torch.utils.data import Dataset
    from transformers import Trainer, TrainingArguments

    class Data(Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return 1024

        def __getitem__(self, i: int) -> dict[str, Any]:
            x = torch.randn(16)
            return {"x": x, "labels": (x.sum() > 0).long()}

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Linear(16, 2)

        def forward(self, x: Any, labels: Any = None) -> dict[str, Any]:
            logits = self.net(x)
            return {"loss": nn.functional.cross_entropy(logits, labels), "logits": logits}

    args = TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=8, report_to=[],
                             use_cpu=True, max_steps=50, save_strategy="no")  # fmt: skip
    trainer = Trainer(model=Net(), args=args, train_dataset=Data())
    with Watch(steps=30, warmup=3, profile_steps=0, lean=True) as w:
        trainer.train()
    facts = from_watch(w)
    assert facts["loader"] is not None and facts["loader"]["batch_size"] == 8
    assert facts["loader_site"] is None
