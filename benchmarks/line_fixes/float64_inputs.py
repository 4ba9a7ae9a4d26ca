"""Features loaded from numpy in float64, and the model made double to match.

EXPECT: float64
"""

import numpy as np
import torch
from torch import nn

dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
features = np.random.default_rng(0).normal(size=(20000, 256))  # float64, numpy's default
labels = np.random.default_rng(1).integers(0, 10, size=20000)
x_all = torch.from_numpy(features).to(dev)
y_all = torch.from_numpy(labels).to(dev)
model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 10)).double().to(dev)
opt = torch.optim.Adam(model.parameters())
for i in range(0, 20000, 128):
    loss = nn.functional.cross_entropy(model(x_all[i : i + 128]), y_all[i : i + 128])
    opt.zero_grad()
    loss.backward()
    opt.step()
