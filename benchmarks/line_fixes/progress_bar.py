"""A tqdm progress bar given the loss with .item() every step.

EXPECT: Log less often
"""

import torch
from torch import nn
from tqdm import tqdm

dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)).to(dev)
opt = torch.optim.Adam(model.parameters())
data = torch.randn(40000, 64, device=dev)
target = torch.randint(0, 10, (40000,), device=dev)
bar = tqdm(range(0, 40000, 32), mininterval=0)
for i in bar:
    x, y = data[i : i + 32], target[i : i + 32]
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    bar.set_postfix(loss=loss.item())
