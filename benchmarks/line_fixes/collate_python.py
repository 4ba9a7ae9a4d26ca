"""Variable-length sequences padded by a Python collate_fn in the main process (no workers).

EXPECT: worker processes
"""

import random

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

dev = "cuda" if torch.cuda.is_available() else "cpu"
random.seed(0)
torch.manual_seed(0)


class Seqs(Dataset):
    def __init__(self, n: int) -> None:
        self.lens = [random.randint(20, 200) for _ in range(n)]

    def __len__(self) -> int:
        return len(self.lens)

    def __getitem__(self, i: int) -> tuple[list[int], int]:
        rng = random.Random(i)
        return [rng.randrange(1, 5000) for _ in range(self.lens[i])], i % 5


def collate(items: list[tuple[list[int], int]]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(t) for t, _ in items)
    ids = [t + [0] * (width - len(t)) for t, _ in items]
    return torch.tensor(ids), torch.tensor([y for _, y in items])


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.EmbeddingBag(5000, 64)
        self.out = nn.Linear(64, 5)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.out(self.emb(ids))


model = Model().to(dev)
opt = torch.optim.Adam(model.parameters())
loader = DataLoader(Seqs(20000), batch_size=64, shuffle=True, collate_fn=collate)
for ids, y in loader:
    ids, y = ids.to(dev), y.to(dev)
    loss = nn.functional.cross_entropy(model(ids), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
