"""How the one gain rule (``knobs/gain_rule.py``) reads ``gpusight.diagnose`` on three CPU
workloads: each what-if row's speedup, noise band and whether it won, and the findings.

    PYTHONPATH=python_pkg python3 benchmarks/gain_rule_cpu.py OUT.json

Run it with two checkouts on PYTHONPATH (before and after a change of the rule), a few times
each: on a busy machine the rows move from run to run, and only a pattern over runs says what
the rule changed.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import gpusight
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset


class SlowItems(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """0.4 ms of host work per item: a loader that sets the pace at batch 32."""

    def __init__(self, n: int = 512) -> None:
        self.x = torch.randn(n, 64)
        self.y = torch.randint(0, 10, (n,))

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        t = time.perf_counter()
        while time.perf_counter() - t < 0.0004:
            pass
        return self.x[i], self.y[i]


def _mlp(width: int = 256, depth: int = 1) -> nn.Module:
    layers: list[nn.Module] = [nn.Linear(64, width), nn.ReLU()]
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, 10))


def _data(n: int) -> TensorDataset:
    return TensorDataset(torch.randn(n, 64), torch.randint(0, 10, (n,)))


def main(out: str) -> None:
    torch.manual_seed(0)
    cases: dict[str, tuple[nn.Module, DataLoader[Any]]] = {
        "slow_loader": (_mlp(), DataLoader(SlowItems(), batch_size=32, shuffle=True)),
        "tiny_batch": (_mlp(), DataLoader(_data(2048), batch_size=4, shuffle=True)),
        "compute": (_mlp(1024, 2), DataLoader(_data(4096), batch_size=128, shuffle=True)),
    }
    found: dict[str, Any] = {}
    for name, (model, loader) in cases.items():
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        r = gpusight.diagnose(
            model, loader, optimizer=opt, loss_fn=nn.CrossEntropyLoss(), budget_s=40
        ).to_dict()
        found[name] = {
            "rows": [
                (
                    w["change"],
                    w.get("speedup"),
                    w.get("noise_pct"),
                    (w.get("params") or {}).get("won"),
                    w.get("skipped"),
                )
                for w in r["what_if"]
            ],
            "findings": [
                (f["id"], f["severity"], (f["impact"] or {}).get("speedup")) for f in r["findings"]
            ],
        }
    with open(out, "w", encoding="utf-8") as f:
        json.dump(found, f, indent=1)
    for name, d in found.items():
        won = [(c[:40], s, n) for c, s, n, w, _ in d["rows"] if w]
        lost = [(c[:40], s, n) for c, s, n, w, _ in d["rows"] if w is False]
        print(f"{name}: won {won} lost {lost}")


if __name__ == "__main__":
    main(sys.argv[1])
