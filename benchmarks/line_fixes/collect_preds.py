"""Predictions and labels moved to the host every step, for an epoch's metrics.

EXPECT: on the device
"""

import torch
from torch import nn

dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 100)).to(dev)
opt = torch.optim.Adam(model.parameters())
preds, labels = [], []
for _ in range(400):
    x = torch.randn(256, 64, device=dev)
    y = torch.randint(0, 100, (256,), device=dev)
    out = model(x)
    loss = nn.functional.cross_entropy(out, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    preds.extend(out.argmax(1).cpu().tolist())
    labels.extend(y.cpu().tolist())
acc = sum(p == t for p, t in zip(preds, labels, strict=True)) / len(preds)
