"""A tuned baseline: bf16 autocast, TF32, data already on the GPU, fused AdamW, no host syncs.

The GPU sets the pace; gpusight should say "compute" and raise no warnings. ``--fix`` changes
nothing (there is nothing to fix).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _common import Steps, parse_args, pick_device
from torch import nn

LABEL = "tuned baseline: bf16 autocast transformer, data on the GPU"
EXPECTED = {"bottleneck": "compute", "finding": None}
REQUIRES_CUDA = False


def main() -> None:
    args = parse_args(__doc__)
    dev = pick_device(args.device)
    gpu = dev.type == "cuda"
    torch.set_float32_matmul_precision("high")
    d, heads, layers, batch, seq = (1024, 16, 4, 32, 512) if gpu else (64, 4, 2, 2, 32)
    layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True)
    model = nn.Sequential(nn.TransformerEncoder(layer, layers), nn.Linear(d, 1000)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=gpu)
    x = torch.randn(batch, seq, d, device=dev)
    y = torch.randint(0, 1000, (batch * seq,), device=dev)
    with Steps("healthy", args, dev, batch * seq) as steps:
        for _ in range(args.iters):
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=gpu):
                loss = F.cross_entropy(model(x).flatten(0, 1), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            steps.mark()


if __name__ == "__main__":
    main()
