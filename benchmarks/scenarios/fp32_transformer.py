"""A transformer trained in float32 with TF32 off (torch's defaults): no Tensor Cores.

Fix: bf16 autocast, and TF32 for the matmuls that stay in float32.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _common import Steps, parse_args, pick_device
from torch import nn

LABEL = "float32 transformer, TF32 off, no autocast"
EXPECTED = {"bottleneck": "precision", "finding": "load.amp_unused"}
REQUIRES_CUDA = True


def main() -> None:
    args = parse_args(__doc__, iters=25)
    dev = pick_device(args.device)
    gpu = dev.type == "cuda"
    d, heads, layers, batch, seq = (1024, 16, 4, 16, 512) if gpu else (64, 4, 2, 2, 32)
    if args.fix:
        torch.set_float32_matmul_precision("high")
    else:
        torch.set_float32_matmul_precision("highest")  # the default, said out loud
    layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True)
    model = nn.Sequential(nn.TransformerEncoder(layer, layers), nn.Linear(d, 1000)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(batch, seq, d, device=dev)
    y = torch.randint(0, 1000, (batch * seq,), device=dev)
    amp = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=args.fix and gpu)
    with Steps("fp32_transformer", args, dev, batch * seq) as steps:
        for _ in range(args.iters):
            with amp:
                loss = F.cross_entropy(model(x).flatten(0, 1), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            steps.mark()


if __name__ == "__main__":
    main()
