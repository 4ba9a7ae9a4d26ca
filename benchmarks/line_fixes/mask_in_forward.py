"""A causal mask built on the host and copied to the device in every forward.

On a GPU the device waits for it (the launch-bound finding names the line); on a CPU build the
forward's host time is the model's own compute, so no finding names it there.

EXPECT: Build the tensor at
"""

import torch
from torch import nn

dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self, d: int = 128, t: int = 128) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
        self.ff = nn.Linear(d, d)
        self.t = t

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = torch.tensor([[j > i for j in range(self.t)] for i in range(self.t)]).to(x.device)
        h, _ = self.attn(x, x, x, attn_mask=mask, need_weights=False)
        return self.ff(h)


model = Block().to(dev)
opt = torch.optim.Adam(model.parameters())
for _ in range(200):
    x = torch.randn(8, 128, 128, device=dev)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
