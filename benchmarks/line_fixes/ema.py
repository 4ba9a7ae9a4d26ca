"""An EMA copy of the model updated from Python, one parameter at a time, after every step.

EXPECT: Update the tensors of the loop
"""

import copy

import torch
from torch import nn

dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = nn.Sequential(
    *[nn.Sequential(nn.Linear(64, 64), nn.LayerNorm(64), nn.GELU()) for _ in range(12)],
    nn.Linear(64, 10),
).to(dev)
ema = copy.deepcopy(model)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
decay = 0.999
for _ in range(400):
    x = torch.randn(32, 64, device=dev)
    y = torch.randint(0, 10, (32,), device=dev)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    with torch.no_grad():
        for pe, p in zip(ema.parameters(), model.parameters(), strict=True):
            pe.mul_(decay).add_(p.detach(), alpha=1 - decay)
