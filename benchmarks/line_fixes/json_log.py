"""A metrics logger writing a JSON line with several .item() values every step.

EXPECT: Log less often
"""

import json
import os
import tempfile

import torch
from torch import nn

dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
log = open(os.path.join(tempfile.mkdtemp(), "metrics.jsonl"), "w")
for step in range(600):
    x = torch.randn(32, 64, device=dev)
    y = torch.randint(0, 10, (32,), device=dev)
    out = model(x)
    loss = nn.functional.cross_entropy(out, y)
    opt.zero_grad()
    loss.backward()
    gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    acc = (out.argmax(1) == y).float().mean()
    log.write(
        json.dumps(
            {
                "step": step,
                "loss": loss.item(),
                "acc": acc.item(),
                "grad_norm": gnorm.item(),
                "lr": opt.param_groups[0]["lr"],
            }
        )
        + "\n"
    )
log.close()
