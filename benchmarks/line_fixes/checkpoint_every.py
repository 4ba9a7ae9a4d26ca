"""A checkpoint of model and optimizer saved every 10 steps.

EXPECT: Save less often
"""

import os
import tempfile

import torch
from torch import nn

dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = nn.Sequential(
    nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10)
).to(dev)
opt = torch.optim.Adam(model.parameters())
ckpt = os.path.join(tempfile.mkdtemp(), "last.pt")
for step in range(200):
    x = torch.randn(64, 512, device=dev)
    y = torch.randint(0, 10, (64,), device=dev)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 10 == 0:
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, ckpt)
