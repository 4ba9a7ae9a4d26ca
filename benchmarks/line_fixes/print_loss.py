"""The loss printed every step with an f-string (formatting a tensor reads it).

EXPECT: Log less often
"""

import torch
from torch import nn

dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data = torch.randn(30000, 64, device=dev)
target = torch.randint(0, 10, (30000,), device=dev)
for step, i in enumerate(range(0, 30000, 32)):
    x, y = data[i : i + 32], target[i : i + 32]
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss:.4f}")
