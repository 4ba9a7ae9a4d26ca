"""A 2-layer LSTM word language model (word_language_model style), batch 20: host-bound steps.

The loop: ``nn.Embedding`` -> 2-layer ``nn.LSTM`` -> linear decoder over a 10k-word vocabulary,
trained on a synthetic corpus of token ids. As in pytorch/examples' word_language_model, the
corpus is ``batchify``-ed into ``--batch_size`` columns on the device, ``get_batch(source, i)``
slices ``--bptt`` (35) rows of inputs and the flattened next-token targets, the hidden state is
detached between batches (``repackage_hidden``), gradients are clipped and SGD is applied by hand.
The clock counts sequences, the batch's columns, per step.

What holds the GPU back: 20 columns x 35 steps is a few hundred tokens - every kernel of the
step (the LSTM's per-timestep ones included) is tiny, so the GPU waits on launches.

--fix: ``--batch_size 160``.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from _corpus import Clock, parser, pick_device

LIBRARY = "torch"
LABEL = "2-layer LSTM word LM, batch 20 x bptt 35, hand-written SGD: launch-bound"
EXPECTED = {"bottleneck": "launch_overhead", "pick": "batch"}
FIX = "--batch_size 160 (was 20)"

Hidden = tuple[torch.Tensor, torch.Tensor]


class RNNModel(nn.Module):
    """Encoder, recurrent module and decoder, with dropout in between."""

    def __init__(self, ntoken: int, ninp: int, nhid: int, nlayers: int, dropout: float) -> None:
        super().__init__()
        self.ntoken = ntoken
        self.nhid = nhid
        self.nlayers = nlayers
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, input: torch.Tensor, hidden: Hidden) -> tuple[torch.Tensor, Hidden]:
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        decoded = self.decoder(self.drop(output)).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz: int) -> Hidden:
        weight = next(self.parameters())
        return (
            weight.new_zeros(self.nlayers, bsz, self.nhid),
            weight.new_zeros(self.nlayers, bsz, self.nhid),
        )


def synthetic_corpus(n_tokens: int, ntoken: int, seed: int = 0) -> torch.Tensor:
    """Token ids with a Zipf-like frequency and some bigram structure, like a text's."""
    rng = np.random.default_rng(seed)
    ids = np.minimum(rng.zipf(1.2, size=n_tokens), ntoken) - 1
    # Every third token follows from the one before, so there is something to learn.
    ids[2::3] = (ids[1::3][: len(ids[2::3])] * 7 + 1) % ntoken
    return torch.from_numpy(ids.astype(np.int64))


def batchify(data: torch.Tensor, bsz: int, device: torch.device) -> torch.Tensor:
    """Cut the stream into ``bsz`` columns: shape ``[n_tokens // bsz, bsz]``."""
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous().to(device)


def get_batch(source: torch.Tensor, i: int, bptt: int) -> tuple[torch.Tensor, torch.Tensor]:
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i : i + seq_len]
    target = source[i + 1 : i + 1 + seq_len].reshape(-1)
    return data, target


def repackage_hidden(h: Hidden) -> Hidden:
    """Detach the hidden state so backprop stops at the batch boundary."""
    return (h[0].detach(), h[1].detach())


def main() -> None:
    p = parser(__doc__, iters=1000)
    p.add_argument("--batch_size", type=int, default=20, metavar="N")
    p.add_argument("--bptt", type=int, default=35, help="sequence length")
    p.add_argument("--emsize", type=int, default=200)
    p.add_argument("--nhid", type=int, default=200)
    p.add_argument("--nlayers", type=int, default=2)
    p.add_argument("--lr", type=float, default=20.0)
    p.add_argument("--clip", type=float, default=0.25)
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument("--log-interval", type=int, default=200)
    p.add_argument("--seed", type=int, default=1111)
    args = p.parse_args()
    if args.fix:
        args.batch_size = 160
    dev = pick_device(args.device)
    torch.manual_seed(args.seed)

    # The CPU smoke test gets a smaller vocabulary: the decoder dominates there.
    ntokens = 10_000 if dev.type == "cuda" else 2_000
    n_corpus = 2_000_000 if dev.type == "cuda" else 200_000
    train_data = batchify(synthetic_corpus(n_corpus, ntokens), args.batch_size, dev)
    model = RNNModel(ntokens, args.emsize, args.nhid, args.nlayers, args.dropout).to(dev)
    criterion = nn.NLLLoss()

    model.train()
    step = 0
    total_loss = torch.zeros((), device=dev)  # read only at log intervals: no per-step sync
    with Clock("lstm_word_lm", args, dev) as clock:
        while step < args.iters:
            hidden = model.init_hidden(args.batch_size)
            for i in range(0, train_data.size(0) - 1, args.bptt):
                data, targets = get_batch(train_data, i, args.bptt)
                hidden = repackage_hidden(hidden)
                model.zero_grad()
                output, hidden = model(data, hidden)
                loss = criterion(output, targets)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
                with torch.no_grad():
                    for param in model.parameters():
                        param.add_(param.grad, alpha=-args.lr)
                total_loss += loss.detach()
                step += 1
                clock.mark(data.size(1))
                if step % args.log_interval == 0:
                    cur_loss = total_loss.item() / args.log_interval
                    print(f"step {step:5d} | loss {cur_loss:5.2f}")
                    total_loss.zero_()
                if step >= args.iters:
                    break
        clock.done()


if __name__ == "__main__":
    main()
