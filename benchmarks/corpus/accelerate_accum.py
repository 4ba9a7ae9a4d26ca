"""A transformer-encoder classifier under accelerate with 4-step gradient accumulation, in fp32.

The loop: ``Accelerator(gradient_accumulation_steps=4)`` prepares a 6-layer, 768-wide
``nn.TransformerEncoder`` classifier, its AdamW and a DataLoader of dicts (``input_ids``,
``labels``; micro-batches of 32 sequences of 256 tokens). Each micro-batch runs under
``with accelerator.accumulate(model):`` with ``accelerator.backward(loss)``; the optimizer really
steps every fourth one, where ``accelerator.sync_gradients`` is set, and the clock marks there
with the sequences of the four micro-batches.

What holds the GPU back: nothing outside it - accelerate's default precision is "no", so every
matmul runs in fp32 and the long steps are compute-bound.

--fix: ``Accelerator(mixed_precision="bf16", ...)``, which runs the forward under bf16 autocast.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from _corpus import Clock, parser, pick_device
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.utils.data import DataLoader, Dataset

LIBRARY = "accelerate"
LABEL = "accelerate, grad accumulation 4 x 32 seqs of 256, 6x768 encoder in fp32: compute-bound"
EXPECTED = {"bottleneck": "compute", "pick": "autocast"}
FIX = 'Accelerator(mixed_precision="bf16", gradient_accumulation_steps=4)'


class TokenSequences(Dataset):
    """Sequence ``i`` from a generator seeded with ``i``; its label is which half of the
    vocabulary most of its tokens come from."""

    def __init__(self, n: int, vocab_size: int, seq_len: int) -> None:
        self.n = n
        self.vocab_size = vocab_size
        self.seq_len = seq_len

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        g = torch.Generator().manual_seed(i)
        label = i % 2
        bias = torch.rand(self.seq_len, generator=g) < 0.6
        ids = torch.randint(0, self.vocab_size // 2, (self.seq_len,), generator=g)
        ids = torch.where(bias == bool(label), ids + self.vocab_size // 2, ids)
        return {"input_ids": ids, "labels": torch.tensor(label)}


class EncoderClassifier(nn.Module):
    def __init__(
        self, vocab_size: int, seq_len: int, d_model: int, nhead: int, layers: int, classes: int
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Parameter(torch.zeros(1, seq_len, d_model))
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward=4 * d_model, batch_first=True, norm_first=True
        )
        # Nested tensors only help padded inference; norm_first rules them out anyway.
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, classes)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(input_ids) + self.pos[:, : input_ids.shape[1]]
        x = self.encoder(x)
        return self.head(self.norm(x).mean(dim=1))


def main() -> None:
    p = parser(__doc__, iters=30)
    p.add_argument("--per_device_train_batch_size", type=int, default=32)
    p.add_argument("--gradient_accumulation_steps", type=int, default=4)
    p.add_argument("--learning_rate", type=float, default=1e-4)
    p.add_argument("--num_workers", type=int, default=0)
    args = p.parse_args()
    dev = pick_device(args.device)

    accelerator = Accelerator(
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        mixed_precision="bf16" if args.fix else "no",
        cpu=dev.type == "cpu",
    )
    set_seed(0)
    if dev.type == "cuda":
        vocab, seq_len, d_model, nhead, layers = 32000, 256, 768, 12, 6
    else:  # a small encoder so the CPU smoke test is quick
        vocab, seq_len, d_model, nhead, layers = 1000, 16, 64, 4, 2

    data = TokenSequences(64 * 1024, vocab, seq_len)
    loader = DataLoader(
        data,
        batch_size=args.per_device_train_batch_size,
        shuffle=True,
        num_workers=args.num_workers,
        drop_last=True,
    )
    model = EncoderClassifier(vocab, seq_len, d_model, nhead, layers, classes=2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=0.01)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

    model.train()
    step = 0
    seen = 0  # sequences since the last optimizer step
    with Clock("accelerate_accum", args, dev) as clock:
        while step < args.iters:
            for batch in loader:
                with accelerator.accumulate(model):
                    logits = model(batch["input_ids"])
                    loss = F.cross_entropy(logits, batch["labels"])
                    accelerator.backward(loss)
                    if accelerator.sync_gradients:
                        accelerator.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                    optimizer.zero_grad()
                seen += batch["input_ids"].shape[0]
                if accelerator.sync_gradients:
                    step += 1
                    clock.mark(seen)
                    seen = 0
                    if step >= args.iters:
                        break
        clock.done()


if __name__ == "__main__":
    main()
