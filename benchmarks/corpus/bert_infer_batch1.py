"""BERT-base embedding server answering one request at a time: batch-1 inference, fp32.

The loop: a ``BertModel`` built from a base-sized ``BertConfig`` (12 layers, hidden 768, no
weights downloaded) under ``torch.inference_mode()``, serving a queue of synthetic text
requests. A ``PreTrainedTokenizerFast`` over a WordLevel model of made-up words (built here with
the ``tokenizers`` package) pads or truncates each request to 64 tokens; the pooled output of
each request is kept on the device and gathered at the end. Items are requests.

What holds the GPU back: ``--batch-size 1``. One 64-token sequence is ~14 GFLOP, a fraction of a
millisecond on an H200, while the host needs several ms to run the tokenizer, move three small
tensors and launch the forward's ~200 kernels: the GPU idles between tiny kernels (launch
overhead).

--fix: ``--batch-size 64``, the queue served in groups of 64 requests, one forward each.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from _corpus import Clock, parser, pick_device
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

LIBRARY = "transformers"
LABEL = "transformers BERT-base inference, one 64-token request per forward in fp32: launch-bound"
EXPECTED = {"bottleneck": "launch_overhead", "pick": "batch"}
FIX = "--batch-size 64 (64 requests per forward instead of 1)"

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
SEQ_LEN = 64


def made_up_words(count: int, seed: int = 0) -> list[str]:
    """Pronounceable nonsense words of two or three syllables."""
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
    g = torch.Generator().manual_seed(seed)
    words: set[str] = set()
    while len(words) < count:
        n = int(torch.randint(2, 4, (1,), generator=g))
        idx = torch.randint(0, len(syllables), (n,), generator=g).tolist()
        words.add("".join(syllables[i] for i in idx))
    return sorted(words)


def build_tokenizer(words: list[str]) -> PreTrainedTokenizerFast:
    vocab = {tok: i for i, tok in enumerate(SPECIALS + words)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )


def make_requests(words: list[str], count: int, seed: int = 1) -> list[str]:
    """Texts of 40-90 words, Zipf-like word frequencies (a few words are very common)."""
    g = torch.Generator().manual_seed(seed)
    ranks = torch.arange(1, len(words) + 1, dtype=torch.float)
    weights = 1.0 / ranks
    texts = []
    for _ in range(count):
        n = int(torch.randint(40, 91, (1,), generator=g))
        idx = torch.multinomial(weights, n, replacement=True, generator=g).tolist()
        texts.append(" ".join(words[i] for i in idx))
    return texts


def main() -> None:
    p = parser(__doc__, iters=500)
    p.add_argument("--batch-size", type=int, default=1, help="requests per forward")
    p.add_argument("--num-requests", type=int, default=2048, help="size of the request queue")
    args = p.parse_args()
    if args.fix:
        args.batch_size = 64
    dev = pick_device(args.device)
    torch.manual_seed(0)

    words = made_up_words(30522 - len(SPECIALS))
    tokenizer = build_tokenizer(words)
    requests = make_requests(words, args.num_requests)
    if dev.type == "cuda":
        config = BertConfig(
            vocab_size=len(tokenizer),
            hidden_size=768,
            num_hidden_layers=12,
            num_attention_heads=12,
            intermediate_size=3072,
            max_position_embeddings=512,
        )
    else:
        # A small BERT for the CPU smoke run; the loop is the same.
        config = BertConfig(
            vocab_size=len(tokenizer),
            hidden_size=128,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=512,
        )
    model = BertModel(config).to(dev).eval()

    served = 0
    answers: list[torch.Tensor] = []
    with Clock("bert_infer_batch1", args, dev) as clock, torch.inference_mode():
        while served < args.iters:
            for start in range(0, len(requests), args.batch_size):
                texts = requests[start : start + args.batch_size]
                enc = tokenizer(
                    texts,
                    padding="max_length",
                    truncation=True,
                    max_length=SEQ_LEN,
                    return_tensors="pt",
                ).to(dev)
                out = model(**enc)
                # Stays on the device: copying each answer back would sync every request.
                answers.append(out.pooler_output)
                served += 1
                clock.mark(len(texts))
                if served >= args.iters:
                    break
        clock.done()
    embeddings = torch.cat(answers).cpu()
    print(f"served {embeddings.shape[0]} requests, embedding dim {embeddings.shape[1]}")


if __name__ == "__main__":
    main()
