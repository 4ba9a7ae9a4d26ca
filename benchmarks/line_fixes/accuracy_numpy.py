"""Accuracy computed every step with numpy on the predictions copied to the host.

EXPECT: in torch on the device instead of numpy
"""

import numpy as np
import torch
from torch import nn

dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 100)).to(dev)
opt = torch.optim.Adam(model.parameters())
data = torch.randn(20000, 128, device=dev)
target = torch.randint(0, 100, (20000,), device=dev)
accs = []
for i in range(0, 20000, 64):
    x, y = data[i : i + 64], target[i : i + 64]
    out = model(x)
    loss = nn.functional.cross_entropy(out, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    pred = out.detach().cpu().numpy()
    accs.append(float(np.mean(np.argmax(pred, axis=1) == y.cpu().numpy())))
print(sum(accs) / len(accs))
