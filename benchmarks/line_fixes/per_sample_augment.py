"""Each image of the batch flipped and jittered in a Python loop before the model's call.

EXPECT: a random flip or noise for all items at once
"""

import torch
from torch import nn

dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1),
    nn.ReLU(),
    nn.AdaptiveAvgPool2d(1),
    nn.Flatten(),
    nn.Linear(16, 10),
).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(200):
    x = torch.rand(64, 3, 32, 32, device=dev)
    y = torch.randint(0, 10, (64,), device=dev)
    for i in range(x.size(0)):
        if torch.rand(1).item() < 0.5:
            x[i] = x[i].flip(-1)
        x[i] = (x[i] + 0.05 * torch.randn_like(x[i])).clamp(0, 1)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
