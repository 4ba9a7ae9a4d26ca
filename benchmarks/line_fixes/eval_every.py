"""A validation pass over 50 batches every 25 training steps, inside the training loop.

EXPECT: code.eval_phase
"""

import torch
from torch import nn

dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 10)).to(dev)
opt = torch.optim.Adam(model.parameters())
val = [
    (torch.randn(256, 128, device=dev), torch.randint(0, 10, (256,), device=dev)) for _ in range(50)
]


def evaluate() -> float:
    model.eval()
    correct = 0
    with torch.no_grad():
        for vx, vy in val:
            correct += (model(vx).argmax(1) == vy).sum().item()
    model.train()
    return correct / (50 * 256)


for step in range(300):
    x = torch.randn(64, 128, device=dev)
    y = torch.randint(0, 10, (64,), device=dev)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 25 == 0:
        acc = evaluate()
