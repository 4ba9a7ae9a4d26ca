"""BERT-base sequence classification in a hand-written loop, fp32: the GPU is busy doing fp32 math.

The loop: a ``BertForSequenceClassification`` built from a BERT-base ``BertConfig`` trains on
synthetic sentences of 128-384 made-up words. A WordLevel tokenizer over the made-up vocabulary
is built in the script and wrapped in ``PreTrainedTokenizerFast``; the Dataset tokenizes each
sentence when it is fetched and ``DataCollatorWithPadding`` pads a batch of 16 into a
``BatchEncoding`` (``input_ids``, ``attention_mask``, ``labels``) that goes to ``model(**batch)``.

What holds the GPU back: nothing outside it - every matmul runs in fp32 (no tensor cores, TF32
off by default), so the step is long and compute-bound.

--fix: the forward runs under ``torch.autocast(dtype=torch.bfloat16)``.
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
    BertConfig,
    BertForSequenceClassification,
    DataCollatorWithPadding,
    PreTrainedTokenizerFast,
    get_scheduler,
)

LIBRARY = "transformers"
LABEL = "BERT-base classification, custom loop, batch 16 of 128-384 tokens in fp32: compute-bound"
EXPECTED = {"bottleneck": "compute", "pick": "autocast"}
FIX = "bf16 autocast around the forward (torch.autocast(dtype=torch.bfloat16))"

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def build_tokenizer(n_words: int) -> PreTrainedTokenizerFast:
    """A word-level tokenizer over words ``w0 .. w{n-1}``, BERT's special tokens first."""
    vocab = {tok: i for i, tok in enumerate(SPECIALS)}
    vocab.update({f"w{i}": len(SPECIALS) + i for i in range(n_words)})
    core = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )


class SyntheticSentences(Dataset):
    """Sentence ``i`` is drawn from a generator seeded with ``i``; tokenized on fetch."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerFast,
        n: int,
        n_words: int,
        lengths: tuple[int, int],
        max_length: int,
    ) -> None:
        self.tokenizer = tokenizer
        self.n = n
        self.n_words = n_words
        self.lengths = lengths
        self.max_length = max_length

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, object]:
        rng = np.random.default_rng(i)
        length = int(rng.integers(self.lengths[0], self.lengths[1] + 1))
        # Zipf-like word frequencies, as in text; the label depends on the words.
        ids = np.minimum(rng.zipf(1.3, size=length), self.n_words) - 1
        text = " ".join(f"w{j}" for j in ids)
        enc = self.tokenizer(text, truncation=True, max_length=self.max_length)
        enc["labels"] = int((ids < 10).mean() > 0.5)
        return dict(enc)


def main() -> None:
    p = parser(__doc__, iters=100)
    p.add_argument("--batch-size", "-b", type=int, default=16)
    p.add_argument("--lr", type=float, default=3e-5)
    p.add_argument("--workers", "-j", type=int, default=0)
    args = p.parse_args()
    dev = pick_device(args.device)
    torch.manual_seed(0)

    if dev.type == "cuda":
        n_words, lengths = 30522 - len(SPECIALS), (128, 384)
        config = BertConfig(
            vocab_size=30522,
            hidden_size=768,
            num_hidden_layers=12,
            num_attention_heads=12,
            intermediate_size=3072,
            max_position_embeddings=512,
            num_labels=2,
        )
    else:  # a small BERT so the CPU smoke test is quick
        n_words, lengths = 2000 - len(SPECIALS), (16, 48)
        config = BertConfig(
            vocab_size=2000,
            hidden_size=128,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=256,
            max_position_embeddings=128,
            num_labels=2,
        )
    tokenizer = build_tokenizer(n_words)
    config.pad_token_id = tokenizer.pad_token_id
    data = SyntheticSentences(tokenizer, 100_000, n_words, lengths, config.max_position_embeddings)
    loader = DataLoader(
        data,
        batch_size=args.batch_size,
        shuffle=True,
        collate_fn=DataCollatorWithPadding(tokenizer),
        num_workers=args.workers,
    )

    model = BertForSequenceClassification(config).to(dev)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    scheduler = get_scheduler(
        "linear", optimizer, num_warmup_steps=args.iters // 10, num_training_steps=args.iters
    )

    model.train()
    step = 0
    with Clock("hf_bert_custom_loop", args, dev) as clock:
        while step < args.iters:
            for batch in loader:
                batch = batch.to(dev)
                with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=args.fix):
                    outputs = model(**batch)
                outputs.loss.backward()
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                step += 1
                clock.mark(batch["input_ids"].shape[0], shape=batch["input_ids"].shape[1])
                if step >= args.iters:
                    break
        clock.done()


if __name__ == "__main__":
    main()
