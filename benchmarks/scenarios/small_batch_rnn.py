"""A recurrent model trained 16 sequences at a time.

An LSTM's kernels are small at batch 16: each step costs about the same launches and host work
at batch 256, so the GPU mostly waits. Batches come from a DataLoader over an in-memory
dataset. Fix: a batch of 256.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _common import Steps, compiled, parse_args, pick_device
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

LABEL = "LSTM trained at batch 16: the GPU waits on launches"
EXPECTED = {"bottleneck": "launch_overhead", "finding": "load.small_batch"}
REQUIRES_CUDA = True


class Tagger(nn.Module):
    def __init__(self, vocab: int, dim: int, layers: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.rnn = nn.LSTM(dim, dim, num_layers=layers, batch_first=True)
        self.out = nn.Linear(dim, 16)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h, _ = self.rnn(self.emb(tokens))
        return self.out(h[:, -1])


def main() -> None:
    args = parse_args(__doc__, iters=80)
    dev = pick_device(args.device)
    gpu = dev.type == "cuda"
    vocab, dim, layers, seq = (10000, 256, 2, 32) if gpu else (100, 16, 1, 8)
    batch = args.batch or (256 if args.fix else 16)
    n = max(batch * 8, 4096)
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randint(0, vocab, (n, seq), generator=g), torch.randint(0, 16, (n,)))
    loader = DataLoader(data, batch_size=batch, shuffle=True, drop_last=True)
    model = compiled(Tagger(vocab, dim, layers).to(dev), args)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    with Steps("small_batch_rnn", args, dev, batch) as steps:
        done = 0
        while done < args.iters:
            for tokens, y in loader:
                tokens, y = tokens.to(dev), y.to(dev)
                loss = F.cross_entropy(model(tokens), y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                steps.mark()
                done += 1
                if done >= args.iters:
                    break


if __name__ == "__main__":
    main()
