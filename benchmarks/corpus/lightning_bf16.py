"""A mid-size causal transformer LM under Lightning in 32-bit precision, batch 64: compute-bound.

The loop: ``L.Trainer(max_steps=...).fit`` of a ``LightningModule`` decoder-only transformer
(8 pre-norm blocks, 768 wide, 12 heads, causal ``scaled_dot_product_attention``, 8k vocabulary,
AdamW) on a ``LightningDataModule`` of synthetic 128-token sequences, 64 a batch, generated per
index. The Trainer keeps its default ``precision="32-true"``. A ``Callback.on_train_batch_end``
marks the clock with the batch's length.

What holds the GPU back: nothing outside it - each step is ~3 TFLOP of fp32 matmuls (full fp32:
float32 matmul precision is left at "highest"), so the GPU is busy the whole step.

--fix: ``L.Trainer(precision="bf16-mixed")``.
"""

from __future__ import annotations

import tempfile
from typing import Any

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from _corpus import Clock, parser, pick_device
from torch.utils.data import DataLoader, Dataset

LIBRARY = "lightning"
LABEL = "Lightning 8x768 causal transformer LM, batch 64 x 128 tokens, 32-true: compute-bound"
EXPECTED = {"bottleneck": "compute", "pick": "autocast"}
FIX = 'L.Trainer(precision="bf16-mixed") (was the default "32-true")'


class RepeatingSequences(Dataset):
    """Sequence ``i``: a random motif repeated to ``seq_len + 1`` tokens, from seed ``i``."""

    def __init__(self, n: int, vocab_size: int, seq_len: int) -> None:
        self.n = n
        self.vocab_size = vocab_size
        self.seq_len = seq_len

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(i)
        period = int(torch.randint(4, 17, (), generator=g))
        motif = torch.randint(0, self.vocab_size, (period,), generator=g)
        return motif.repeat(self.seq_len // period + 2)[: self.seq_len + 1]


class SequenceDataModule(L.LightningDataModule):
    def __init__(
        self,
        batch_size: int = 64,
        num_workers: int = 2,
        vocab_size: int = 8192,
        seq_len: int = 128,
        n: int = 50_000,
    ) -> None:
        super().__init__()
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.vocab_size = vocab_size
        self.seq_len = seq_len
        self.n = n

    def setup(self, stage: str) -> None:
        self.train_set = RepeatingSequences(self.n, self.vocab_size, self.seq_len)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(
            self.train_set,
            batch_size=self.batch_size,
            shuffle=True,
            num_workers=self.num_workers,
            drop_last=True,
        )


class Block(nn.Module):
    def __init__(self, d_model: int, n_head: int) -> None:
        super().__init__()
        self.n_head = n_head
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


class TransformerLM(L.LightningModule):
    def __init__(
        self,
        vocab_size: int = 8192,
        seq_len: int = 128,
        d_model: int = 768,
        n_head: int = 12,
        n_layer: int = 8,
        lr: float = 3e-4,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(seq_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> Any:
        inputs, targets = batch[:, :-1], batch[:, 1:]
        logits = self(inputs)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.parameters(), lr=self.hparams.lr, weight_decay=0.1)


class ClockCallback(L.Callback):
    """Marks the script's clock at the end of every training batch with its length."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def on_train_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        self.clock.mark(len(batch))


def main() -> None:
    p = parser(__doc__, iters=80)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--num_workers", type=int, default=2)
    p.add_argument("--precision", default="32-true")
    args = p.parse_args()
    if args.fix:
        args.precision = "bf16-mixed"
    dev = pick_device(args.device)
    L.seed_everything(0, verbose=False)

    if dev.type == "cuda":
        dm = SequenceDataModule(batch_size=args.batch_size, num_workers=args.num_workers)
        model = TransformerLM()
    else:  # a small model so the CPU smoke test is quick
        dm = SequenceDataModule(
            batch_size=args.batch_size, num_workers=args.num_workers, vocab_size=512, seq_len=32
        )
        model = TransformerLM(vocab_size=512, seq_len=32, d_model=64, n_head=4, n_layer=2)

    clock = Clock("lightning_bf16", args, dev)
    with tempfile.TemporaryDirectory() as root:
        trainer = L.Trainer(
            max_steps=args.iters,
            accelerator="auto" if dev.type == "cuda" else "cpu",
            devices=1,
            precision=args.precision,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            default_root_dir=root,
            callbacks=[ClockCallback(clock)],
        )
        with clock:
            trainer.fit(model, datamodule=dm)
            clock.done()


if __name__ == "__main__":
    main()
