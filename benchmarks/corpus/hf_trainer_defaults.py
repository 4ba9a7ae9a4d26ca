"""BERT-base classification under the Hugging Face ``Trainer`` with its defaults: host-bound steps.

The loop: ``Trainer.train()`` on a ``BertForSequenceClassification`` built from a BERT-base
``BertConfig``, over synthetic pre-tokenized examples (16-64 tokens padded to 64, as
``padding="max_length"`` leaves them) collated by the Trainer's default collator.
``TrainingArguments`` keep their defaults where users leave them: 8 examples a device, fp32, no
DataLoader workers; ``max_steps`` comes from ``--iters``. A ``TrainerCallback`` marks the
clock at each ``on_step_end``.

What holds the GPU back: 8 x 64 tokens is too little work per kernel for a BERT-base step, so
the GPU waits on the host issuing the step's hundreds of kernels (and the Trainer's own
per-step bookkeeping).

--fix: ``per_device_train_batch_size=64``, ``bf16=True`` and ``dataloader_num_workers=4``.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import tempfile

import torch
from _corpus import Clock, parser, pick_device
from torch.utils.data import Dataset
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    Trainer,
    TrainerCallback,
    TrainerControl,
    TrainerState,
    TrainingArguments,
)

LIBRARY = "transformers"
LABEL = "HF Trainer defaults on BERT-base, batch 8 x 64 tokens fp32: launch-bound"
EXPECTED = {"bottleneck": "launch_overhead", "pick": "together"}
FIX = "TrainingArguments(per_device_train_batch_size=64, bf16=True, dataloader_num_workers=4)"
TRUTH_ARGS = {
    "autocast": ["--bf16"],
    "tf32": ["--tf32"],
    "nan_check": ["--no-nan-filter"],
    "set_nan_check": ["--no-nan-filter"],
}


class PaddedExamples(Dataset):
    """Example ``i``: 16..``seq_len`` random token ids padded to ``seq_len``, from seed ``i``."""

    def __init__(self, n: int, vocab_size: int, seq_len: int) -> None:
        self.n = n
        self.vocab_size = vocab_size
        self.seq_len = seq_len

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        g = torch.Generator().manual_seed(i)
        length = int(torch.randint(16, self.seq_len + 1, (), generator=g))
        input_ids = torch.zeros(self.seq_len, dtype=torch.long)  # 0 is [PAD]
        input_ids[:length] = torch.randint(5, self.vocab_size, (length,), generator=g)
        attention_mask = (torch.arange(self.seq_len) < length).long()
        label = int(input_ids[1] % 2)  # something the model can learn
        return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": label}


class ClockCallback(TrainerCallback):
    """Marks the script's clock at every optimizer step with the examples it took."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def on_step_end(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        **kwargs: object,
    ) -> None:
        self.clock.mark(args.train_batch_size * args.gradient_accumulation_steps)


def main() -> None:
    p = parser(__doc__, iters=200)
    p.add_argument("--per_device_train_batch_size", type=int, default=8)
    p.add_argument("--learning_rate", type=float, default=5e-5)
    p.add_argument("--dataloader_num_workers", type=int, default=0)
    p.add_argument("--bf16", action="store_true", help="TrainingArguments(bf16=True)")
    p.add_argument("--tf32", action="store_true", help="TrainingArguments(tf32=True) (CUDA)")
    off = "TrainingArguments(logging_nan_inf_filter=False)"
    p.add_argument("--no-nan-filter", action="store_true", help=off)
    args = p.parse_args()
    dev = pick_device(args.device)
    if args.fix:
        args.per_device_train_batch_size = 64
        args.dataloader_num_workers = 4

    if dev.type == "cuda":
        config = BertConfig(
            vocab_size=30522,
            hidden_size=768,
            num_hidden_layers=12,
            num_attention_heads=12,
            intermediate_size=3072,
            num_labels=2,
        )
        seq_len = 64
    else:  # a small BERT so the CPU smoke test is quick
        config = BertConfig(
            vocab_size=2000,
            hidden_size=128,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=256,
            num_labels=2,
        )
        seq_len = 32
    torch.manual_seed(0)
    model = BertForSequenceClassification(config)
    train_data = PaddedExamples(50_000, config.vocab_size, seq_len)

    with tempfile.TemporaryDirectory() as output_dir:
        training_args = TrainingArguments(
            output_dir=output_dir,
            max_steps=args.iters,
            per_device_train_batch_size=args.per_device_train_batch_size,
            learning_rate=args.learning_rate,
            bf16=args.fix or args.bf16,
            tf32=True if args.tf32 else None,  # None: torch's own setting, as users leave it
            dataloader_num_workers=args.dataloader_num_workers,
            report_to="none",
            save_strategy="no",
            disable_tqdm=True,
            logging_nan_inf_filter=not args.no_nan_filter,
            use_cpu=dev.type == "cpu",
        )
        clock = Clock("hf_trainer_defaults", args, dev)
        trainer = Trainer(
            model=model,
            args=training_args,
            train_dataset=train_data,
            callbacks=[ClockCallback(clock)],
        )
        with clock:
            trainer.train()
            clock.done()


if __name__ == "__main__":
    main()
