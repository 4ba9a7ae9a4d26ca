"""Batches gathered from a Python list of numpy rows and stacked on the host every step.

EXPECT: Do the work of
"""

import random

import numpy as np
import torch
from torch import nn

dev = "cuda" if torch.cuda.is_available() else "cpu"
random.seed(0)
rows = [np.random.rand(128).astype(np.float32) for _ in range(5000)]
labels = [random.randrange(10) for _ in range(5000)]
model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 10)).to(dev)
opt = torch.optim.Adam(model.parameters())
for _ in range(400):
    idx = random.sample(range(len(rows)), 64)
    x = torch.tensor(np.stack([rows[i] for i in idx])).to(dev)
    y = torch.tensor([labels[i] for i in idx]).to(dev)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
