"""A small classifier trained by Hugging Face's real ``Trainer`` on the CPU, as a script file:
the tests of the knobs that change its ``TrainingArguments`` share it."""

from __future__ import annotations

HEAD = """\
import torch
from torch import nn
from torch.utils.data import Dataset
from transformers import Trainer, TrainingArguments


class Data(Dataset):
    def __len__(self):
        return 8192

    def __getitem__(self, i):
        x = torch.randn(16)
        return {"x": x, "labels": (x.sum() > 0).long()}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(16, 2)

    def forward(self, x, labels=None):
        logits = self.net(x)
        return {"loss": nn.functional.cross_entropy(logits, labels), "logits": logits}


"""


def trainer_script(arguments: str, after: str) -> str:
    """The script: ``TrainingArguments`` with ``arguments`` (keyword lines, each ending in a
    comma) besides the CPU's and 60 steps, then ``after`` once it has trained."""
    return (
        HEAD
        + 'args = TrainingArguments(\n    output_dir="out",\n'
        + arguments
        + "    report_to=[],\n    use_cpu=True,\n    max_steps=60,\n"
        + '    save_strategy="no",\n)\n'
        + "trainer = Trainer(model=Net(), args=args, train_dataset=Data())\n"
        + "trainer.train()\n"
        + after
    )
