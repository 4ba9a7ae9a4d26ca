"""The gradient norm read parameter by parameter for a log, every step.

EXPECT: Read one value for all the tensors
"""

import torch
from torch import nn

dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = nn.Sequential(*[nn.Linear(64, 64) for _ in range(20)]).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
norms = []
for _ in range(400):
    loss = model(torch.randn(16, 64, device=dev)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    total_norm = sum(p.grad.norm().item() ** 2 for p in model.parameters()) ** 0.5
    norms.append(total_norm)
    opt.step()
