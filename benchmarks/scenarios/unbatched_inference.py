"""Inference one request at a time: each forward carries a single sample.

A forward costs about the same launches for 1 sample as for 64, so one-at-a-time serving is
bound by launch overhead. Fix: group 64 requests per forward.
"""

from __future__ import annotations

import torch
from _common import Steps, parse_args, pick_device
from torch import nn

LABEL = "inference one request per forward (batch 1)"
EXPECTED = {"bottleneck": "launch_overhead", "finding": "infer.unbatched"}
REQUIRES_CUDA = True


def build(dev: torch.device) -> tuple[nn.Module, list[torch.Tensor]]:
    """The model (eval) and the requests as they arrive on the host; also ``cost/parts.py``'s."""
    gpu = dev.type == "cuda"
    d, layers, seq = (512, 4, 64) if gpu else (32, 2, 8)
    enc = nn.TransformerEncoderLayer(d, 8 if gpu else 4, 4 * d, dropout=0.0, batch_first=True)
    model = nn.Sequential(nn.TransformerEncoder(enc, layers), nn.Linear(d, 2)).to(dev).eval()
    return model, [torch.randn(seq, d) for _ in range(256)]


def main() -> None:
    args = parse_args(__doc__, iters=60)
    dev = pick_device(args.device)
    gpu = dev.type == "cuda"
    model, requests = build(dev)
    group = args.batch or (64 if args.fix else 1)
    answers: list[torch.Tensor] = []
    with Steps("unbatched_inference", args, dev, group) as steps, torch.inference_mode():
        for i in range(args.iters):
            start = (i * group) % len(requests)
            batch = torch.stack(requests[start : start + group]).to(dev)
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=gpu):
                out = model(batch)
            answers.append(out[:, 0].argmax(-1).cpu())  # each answer goes back to its client
            steps.mark()


if __name__ == "__main__":
    main()
