"""Autograd anomaly detection left on from a debugging session.

EXPECT: cfg.anomaly_detection
"""

import torch
from torch import nn

torch.autograd.set_detect_anomaly(True)
dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(400):
    x = torch.randn(32, 64, device=dev)
    loss = nn.functional.cross_entropy(model(x), torch.randint(0, 10, (32,), device=dev))
    opt.zero_grad()
    loss.backward()
    opt.step()
