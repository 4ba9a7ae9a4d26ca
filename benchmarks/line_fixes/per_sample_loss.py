"""A loss summed over the batch one sample at a time in a Python loop.

EXPECT: the loss function once on all of the batch
"""

import torch
from torch import nn

dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)).to(dev)
opt = torch.optim.Adam(model.parameters())
criterion = nn.CrossEntropyLoss()
for _ in range(300):
    x = torch.randn(64, 64, device=dev)
    y = torch.randint(0, 10, (64,), device=dev)
    out = model(x)
    loss = 0.0
    for i in range(len(y)):
        loss = loss + criterion(out[i : i + 1], y[i : i + 1])
    loss = loss / len(y)
    opt.zero_grad()
    loss.backward()
    opt.step()
