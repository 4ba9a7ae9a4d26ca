"""A small GPT-2 trained under bf16 autocast, evaluated every 20 steps with per-batch host reads.

The loop: ``GPT2LMHeadModel`` from a 6-layer, 512-wide ``GPT2Config`` trains as a causal LM on
synthetic token sequences (batch 16 x 256 tokens) under bf16 autocast. Every ``--eval-steps``
(20) steps it evaluates 10 batches under ``model.eval()`` and ``torch.no_grad()``, and for each
batch reads ``loss.item()`` and moves the argmax predictions and labels to numpy with
``.cpu().numpy()`` for a next-token accuracy. The clock marks only training steps (items =
sequences); the evaluation's time falls between two marks.

What holds the GPU back: each eval batch blocks the host on the device twice (the ``.item()``
and the ``.cpu()``), so the GPU drains and then waits while the host launches the next forward:
the evaluations run serially, host then device.

--fix: the evaluation sums loss and correct predictions on the GPU and reads them once at its end.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import math

import numpy as np
import torch
from _corpus import Clock, parser, pick_device
from torch.utils.data import DataLoader, Dataset
from transformers import GPT2Config, GPT2LMHeadModel

LIBRARY = "transformers"
LABEL = "GPT-2 6x512 bf16 training, eval every 20 steps reading .item()/.cpu() per batch"
EXPECTED = {"bottleneck": "between_steps", "pick": None}
FIX = "eval metrics summed on the GPU and read once per evaluation, not per batch"


class PatternSequences(Dataset):
    """Sequence ``i``: an arithmetic token pattern with noise, seeded by ``i``."""

    def __init__(self, n: int, vocab_size: int, seq_len: int, offset: int = 0) -> None:
        self.n = n
        self.vocab_size = vocab_size
        self.seq_len = seq_len
        self.offset = offset  # eval items come from other seeds than training items

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        g = torch.Generator().manual_seed(self.offset + i)
        start, stride = torch.randint(0, self.vocab_size, (2,), generator=g).tolist()
        ids = (start + stride * torch.arange(self.seq_len)) % self.vocab_size
        noise = torch.rand(self.seq_len, generator=g) < 0.1
        ids[noise] = torch.randint(0, self.vocab_size, (int(noise.sum()),), generator=g)
        return {"input_ids": ids, "labels": ids.clone()}


def evaluate_per_batch(
    model: GPT2LMHeadModel, loader: DataLoader, dev: torch.device
) -> tuple[float, float]:
    """Loss and accuracy read back batch by batch, the way many hand-written loops do it."""
    losses: list[float] = []
    correct, total = 0, 0
    for batch in loader:
        batch = {k: v.to(dev) for k, v in batch.items()}
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            out = model(**batch)
        losses.append(out.loss.item())
        preds = out.logits[:, :-1].argmax(-1).cpu().numpy()
        labels = batch["labels"][:, 1:].cpu().numpy()
        correct += int(np.sum(preds == labels))
        total += labels.size
    return float(np.mean(losses)), correct / total


def evaluate_on_device(
    model: GPT2LMHeadModel, loader: DataLoader, dev: torch.device
) -> tuple[float, float]:
    """The same numbers, summed on the device and read once."""
    loss_sum = torch.zeros((), device=dev)
    correct = torch.zeros((), dtype=torch.long, device=dev)
    total, n = 0, 0
    for batch in loader:
        batch = {k: v.to(dev) for k, v in batch.items()}
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            out = model(**batch)
        loss_sum += out.loss.float()
        labels = batch["labels"][:, 1:]
        correct += (out.logits[:, :-1].argmax(-1) == labels).sum()
        total += labels.numel()
        n += 1
    return loss_sum.item() / n, correct.item() / total


def main() -> None:
    p = parser(__doc__, iters=800)
    p.add_argument("--batch-size", "-b", type=int, default=16)
    p.add_argument("--eval-steps", type=int, default=20, help="evaluate every this many steps")
    p.add_argument("--eval-batches", type=int, default=10)
    p.add_argument("--lr", type=float, default=3e-4)
    args = p.parse_args()
    dev = pick_device(args.device)
    torch.manual_seed(0)

    if dev.type == "cuda":
        config = GPT2Config(vocab_size=50257, n_positions=256, n_embd=512, n_layer=6, n_head=8)
    else:  # a small GPT-2 so the CPU smoke test is quick
        config = GPT2Config(vocab_size=1000, n_positions=32, n_embd=64, n_layer=2, n_head=2)
    seq_len = config.n_positions
    train_loader = DataLoader(
        PatternSequences(100_000, config.vocab_size, seq_len),
        batch_size=args.batch_size,
        shuffle=True,
    )
    eval_loader = DataLoader(
        PatternSequences(
            args.batch_size * args.eval_batches, config.vocab_size, seq_len, offset=10**7
        ),
        batch_size=args.batch_size,
    )
    model = GPT2LMHeadModel(config).to(dev)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
    evaluate = evaluate_on_device if args.fix else evaluate_per_batch

    model.train()
    step = 0
    with Clock("hf_gpt2_eval_every", args, dev) as clock:
        while step < args.iters:
            for batch in train_loader:
                batch = {k: v.to(dev) for k, v in batch.items()}
                with torch.autocast(dev.type, dtype=torch.bfloat16):
                    loss = model(**batch).loss
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                step += 1
                clock.mark(batch["input_ids"].shape[0])
                if step >= args.iters:
                    break
                if step % args.eval_steps == 0:
                    model.eval()
                    with torch.no_grad():
                        eval_loss, eval_acc = evaluate(model, eval_loader, dev)
                    model.train()
                    if step % (10 * args.eval_steps) == 0:
                        print(
                            f"step {step} eval loss {eval_loss:.3f} "
                            f"ppl {math.exp(min(eval_loss, 20.0)):.1f} acc {eval_acc:.3f}"
                        )
        clock.done()


if __name__ == "__main__":
    main()
