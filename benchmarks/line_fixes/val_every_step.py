"""A validation batch run through the model, and its loss read, at every training step.

On a GPU the host also waits on its .item(), and the sync finding names the line too.

EXPECT: The model runs again at
"""

import torch
from torch import nn

dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 10)).to(dev)
opt = torch.optim.Adam(model.parameters())
xv = torch.randn(512, 128, device=dev)
yv = torch.randint(0, 10, (512,), device=dev)
history = []
for _ in range(300):
    x = torch.randn(64, 128, device=dev)
    y = torch.randint(0, 10, (64,), device=dev)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        history.append(nn.functional.cross_entropy(model(xv), yv).item())
