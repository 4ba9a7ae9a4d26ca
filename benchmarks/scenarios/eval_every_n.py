"""A language model evaluated every 8 steps, its metrics read back batch by batch.

Each validation batch calls ``.item()`` on its loss and copies its predictions to the host for a
numpy accuracy: two syncs a batch, 32 an evaluation. On an H200 those reads cost nearly nothing
(the host waits for the forward it would wait for anyway: metrics kept on the GPU ran 0.94x,
h200-run21); the evaluation's cost is its 16 forwards. Fix: evaluate every 16 steps instead
of 8, the change gpusight's estimate is made for (half the points on the validation curve; the
training is unchanged).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _common import Steps, parse_args, pick_device
from torch import nn

LABEL = "evaluation every 8 steps with two syncs per validation batch"
EXPECTED = {"bottleneck": "between_steps", "finding": "code.eval_phase"}
REQUIRES_CUDA = False
EVAL_EVERY = 8
VAL_BATCHES = 16


class TinyLM(nn.Module):
    def __init__(self, vocab: int, d: int, heads: int, layers: int, seq: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(1, seq, d))
        block = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True)
        self.blocks = nn.TransformerEncoder(block, layers)
        self.norm = nn.LayerNorm(d)
        self.out = nn.Linear(d, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens) + self.pos[:, : tokens.shape[1]]
        mask = nn.Transformer.generate_square_subsequent_mask(tokens.shape[1], device=h.device)
        return self.out(self.norm(self.blocks(h, mask=mask, is_causal=True)))


def evaluate(model: nn.Module, batches: list[torch.Tensor]) -> tuple[float, float]:
    import numpy as np

    model.eval()
    total_loss, correct, seen = 0.0, 0, 0
    with torch.no_grad():
        for tokens in batches:
            logits = model(tokens[:, :-1]).float()
            target = tokens[:, 1:]
            loss = F.cross_entropy(logits.flatten(0, 1), target.flatten())
            total_loss += loss.item()  # the planted syncs
            pred = logits.argmax(-1).cpu().numpy()
            correct += int(np.sum(pred == target.cpu().numpy()))
            seen += target.numel()
    model.train()
    return total_loss / len(batches), correct / seen


def main() -> None:
    args = parse_args(__doc__, iters=60)
    dev = pick_device(args.device)
    gpu = dev.type == "cuda"
    vocab, d, heads, layers, batch, seq = (
        (8192, 512, 8, 4, 32, 256) if gpu else (512, 32, 4, 1, 4, 16)
    )
    torch.manual_seed(0)
    model = TinyLM(vocab, d, heads, layers, seq).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=gpu)
    data = torch.randint(0, vocab, (64, batch, seq + 1), device=dev)
    val = [torch.randint(0, vocab, (batch, seq + 1), device=dev) for _ in range(VAL_BATCHES)]
    amp = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=gpu)
    every = 2 * EVAL_EVERY if args.fix else EVAL_EVERY
    with Steps("eval_every_n", args, dev, batch * seq) as steps:
        for i in range(args.iters):
            tokens = data[i % len(data)]
            with amp:
                logits = model(tokens[:, :-1])
                loss = F.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if i % every == every - 1:
                with amp:
                    evaluate(model, val)
            steps.mark()


if __name__ == "__main__":
    main()
