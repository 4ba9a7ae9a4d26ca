"""A model called with keyword tensors, as Hugging Face models are (``model(**batch)``): its
batch is seen (torch gives a global forward pre-hook the positional arguments only), so the step
counts its items and a one-request forward is found unbatched."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from gpusight.cli import main
from gpusight.watch.session import Watch
from thread_support import one_thread  # noqa: F401 (autouse: one torch thread)
from torch import nn


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(100, 16)
        self.head = nn.Linear(16, 2)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        h = self.emb(input_ids) * attention_mask.unsqueeze(-1)
        return self.head(h.mean(1))


def _batch(n: int) -> dict[str, torch.Tensor]:
    return {"input_ids": torch.randint(0, 100, (n, 12)), "attention_mask": torch.ones(n, 12)}


def test_one_request_per_keyword_call_is_unbatched() -> None:
    model = Encoder().eval()
    batch = _batch(1)
    with Watch(steps=5, warmup=1, profile_steps=0) as w, torch.no_grad():
        while True:
            model(**batch)
    rep = w.report
    assert rep is not None and rep.run is not None
    assert rep.run["kernels"]["step_mode"] == "forward"
    assert rep.run["items_per_step"] == 1
    assert "infer.unbatched" in rep.finding_ids


TRAIN = """\
import torch
from torch import nn

class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 16)
        self.head = nn.Linear(16, 2)

    def forward(self, input_ids, attention_mask, labels):
        h = self.emb(input_ids) * attention_mask.unsqueeze(-1)
        return nn.functional.cross_entropy(self.head(h.mean(1)), labels)

model = Encoder()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(40):
    batch = {"input_ids": torch.randint(0, 100, (6, 12)), "attention_mask": torch.ones(6, 12),
             "labels": torch.randint(0, 2, (6,))}
    loss = model(**batch)
    loss.backward()
    opt.step()
    opt.zero_grad()
"""


def test_a_training_step_on_keyword_tensors_counts_its_items(tmp_path: Path) -> None:
    script, facts, out = tmp_path / "train.py", tmp_path / "facts.json", tmp_path / "r.json"
    script.write_text(TRAIN)
    args = ["run", "--quiet", "--steps", "8", "--facts", str(facts), "--json", str(out)]
    assert main([*args, str(script)]) == 0
    assert json.loads(out.read_text())["run"]["items_per_step"] == 6
    model = json.loads(facts.read_text())["model"]
    # Every keyword tensor's leading size: what a batch repeated along dim 0 must grow.
    assert model["input_dim0s"] == [6] and model["input_shape"] == [6, 12]
