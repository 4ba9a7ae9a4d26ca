"""A t5-small-sized seq2seq model in a hand-written loop, batch 8 in fp32: host-bound steps.

The loop: ``T5ForConditionalGeneration`` from a ``T5Config`` (d_model 512, 6+6 layers, 8 heads)
learns a made-up "translation" of synthetic sentences: the target is the source's first words
reversed and shifted in the vocabulary. A WordLevel tokenizer over the made-up words is built in
the script; the Dataset tokenizes each pair (``text_target=``) when it is fetched and
``DataCollatorForSeq2Seq`` pads sources with the pad id and ``labels`` with -100 and adds the
``decoder_input_ids``. AdamW, fp32, batch 8 from ``--batch-size``.

What holds the GPU back: 8 short pairs are too little work for the step's ~2000 kernels (an
encoder, a decoder with cross-attention, the backward and AdamW), so the GPU waits on the host
launching them.

--fix: ``--batch-size 64``.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch
from _corpus import Clock, parser, pick_device
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from torch.utils.data import DataLoader, Dataset
from transformers import (
    DataCollatorForSeq2Seq,
    PreTrainedTokenizerFast,
    T5Config,
    T5ForConditionalGeneration,
)

LIBRARY = "transformers"
LABEL = "T5-small-sized seq2seq, custom loop, batch 8 short pairs in fp32: launch-bound"
EXPECTED = {"bottleneck": "launch_overhead", "pick": "batch"}
FIX = "--batch-size 64 (was 8)"

SPECIALS = ["<pad>", "</s>", "<unk>"]  # T5's ids: pad 0, eos 1, unk 2


def build_tokenizer(n_words: int) -> PreTrainedTokenizerFast:
    """A word-level tokenizer over words ``w0 .. w{n-1}`` that appends ``</s>`` like T5's."""
    vocab = {tok: i for i, tok in enumerate(SPECIALS)}
    vocab.update({f"w{i}": len(SPECIALS) + i for i in range(n_words)})
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.post_processor = processors.TemplateProcessing(
        single="$A </s>", special_tokens=[("</s>", vocab["</s>"])]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", eos_token="</s>", unk_token="<unk>"
    )


class SyntheticPairs(Dataset):
    """Pair ``i`` from a generator seeded with ``i``, tokenized on fetch."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerFast,
        n: int,
        n_words: int,
        src_len: tuple[int, int],
        tgt_len: tuple[int, int],
    ) -> None:
        self.tokenizer = tokenizer
        self.n = n
        self.n_words = n_words
        self.src_len = src_len
        self.tgt_len = tgt_len

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, list[int]]:
        rng = np.random.default_rng(i)
        src_n = int(rng.integers(self.src_len[0], self.src_len[1] + 1))
        tgt_n = min(src_n, int(rng.integers(self.tgt_len[0], self.tgt_len[1] + 1)))
        src = rng.integers(0, self.n_words, size=src_n)
        tgt = (src[:tgt_n][::-1] + 7) % self.n_words
        enc = self.tokenizer(
            " ".join(f"w{j}" for j in src),
            text_target=" ".join(f"w{j}" for j in tgt),
            truncation=True,
            max_length=128,
        )
        return dict(enc)


def main() -> None:
    p = parser(__doc__, iters=300)
    p.add_argument("--batch-size", "-b", type=int, default=8)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--workers", "-j", type=int, default=0)
    args = p.parse_args()
    if args.fix:
        args.batch_size = 64
    dev = pick_device(args.device)
    torch.manual_seed(0)

    if dev.type == "cuda":
        n_words, src_len, tgt_len = 32128 - len(SPECIALS), (16, 64), (8, 32)
        config = T5Config(
            vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8
        )
    else:  # a small T5 so the CPU smoke test is quick
        n_words, src_len, tgt_len = 1000 - len(SPECIALS), (8, 24), (4, 12)
        config = T5Config(vocab_size=1000, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4)
    tokenizer = build_tokenizer(n_words)
    config.pad_token_id = tokenizer.pad_token_id
    config.eos_token_id = tokenizer.eos_token_id
    config.decoder_start_token_id = tokenizer.pad_token_id  # T5 starts decoding from <pad>

    model = T5ForConditionalGeneration(config).to(dev)
    collator = DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100)
    loader = DataLoader(
        SyntheticPairs(tokenizer, 100_000, n_words, src_len, tgt_len),
        batch_size=args.batch_size,
        shuffle=True,
        collate_fn=collator,
        num_workers=args.workers,
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)

    model.train()
    step = 0
    with Clock("hf_t5_seq2seq", args, dev) as clock:
        while step < args.iters:
            for batch in loader:
                batch = {k: v.to(dev) for k, v in batch.items()}
                loss = model(**batch).loss
                loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                step += 1
                # Source and target lengths, as the what-if tells a new batch shape: the
                # steady rate leaves out each pair's first step, as the what-if's does.
                lengths = (batch["input_ids"].shape[1], batch["labels"].shape[1])
                clock.mark(batch["input_ids"].shape[0], shape=lengths)
                if step >= args.iters:
                    break
        clock.done()


if __name__ == "__main__":
    main()
