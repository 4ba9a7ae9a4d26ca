"""A teacher copy of the model made with copy.deepcopy every step for a consistency loss.

EXPECT: Copy the model once
"""

import copy

import torch
from torch import nn

dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = nn.Sequential(
    nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)
).to(dev)
opt = torch.optim.Adam(model.parameters())
for _ in range(200):
    x = torch.randn(64, 256, device=dev)
    teacher = copy.deepcopy(model).eval()
    with torch.no_grad():
        target = teacher(x).softmax(-1)
    out = model(x + 0.1 * torch.randn_like(x))
    loss = nn.functional.kl_div(out.log_softmax(-1), target, reduction="batchmean")
    opt.zero_grad()
    loss.backward()
    opt.step()
