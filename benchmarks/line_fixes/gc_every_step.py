"""gc.collect() and torch.cuda.empty_cache() every step, "to keep memory down".

EXPECT: gc.collect
"""

import gc

import torch
from torch import nn

dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
junk = [list(range(50)) for _ in range(20000)]  # a long-lived Python heap, as real scripts have
for _ in range(300):
    x = torch.randn(64, 256, device=dev)
    y = torch.randint(0, 10, (64,), device=dev)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    gc.collect()
    torch.cuda.empty_cache()
