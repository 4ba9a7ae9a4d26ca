"""torchvision ResNet-50 inference in fp32 at batch 64: the GPU computes on the slow path.

Loop: ``torchvision.models.resnet50(weights=None)`` in ``eval()``, forward passes under
``torch.no_grad()`` over batches of 64 normalized images that were made once on the GPU (an
offline scoring run over a preloaded set); top-1 agreement with the labels is summed on the GPU
and read once at the end.

Held back: compute. The convolutions run in fp32 (TF32 at best) in NCHW; the GPU stays busy but
bf16 NHWC kernels would do the same forward in a fraction of the time.

--fix: bf16 ``torch.autocast`` around the forward, model and inputs in ``torch.channels_last``,
and ``torch.inference_mode()`` instead of ``torch.no_grad()``.
"""

from __future__ import annotations

import torch
import torchvision
from _corpus import Clock, parser, pick_device

LIBRARY = "torchvision"
LABEL = "torchvision ResNet-50 fp32 NCHW inference at batch 64: compute-bound on slow kernels"
EXPECTED = {"bottleneck": "compute", "pick": "together"}
FIX = "bf16 autocast + channels_last model and inputs + torch.inference_mode()"

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def make_batches(
    n: int, batch_size: int, size: int, device: torch.device
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Normalized float images and labels from a seeded generator, moved to the device once."""
    g = torch.Generator().manual_seed(0)
    mean = torch.tensor(MEAN).view(1, 3, 1, 1)
    std = torch.tensor(STD).view(1, 3, 1, 1)
    batches = []
    for _ in range(n):
        raw = torch.randint(0, 256, (batch_size, 3, size, size), dtype=torch.uint8, generator=g)
        x = (raw.float() / 255 - mean) / std
        y = torch.randint(0, 1000, (batch_size,), generator=g)
        batches.append((x.to(device), y.to(device)))
    return batches


def main() -> None:
    p = parser(__doc__, iters=1000)
    p.add_argument("-b", "--batch-size", type=int, default=None, help="64 on cuda, 4 on cpu")
    args = p.parse_args()
    dev = pick_device(args.device)
    cuda = dev.type == "cuda"
    batch_size = args.batch_size or (64 if cuda else 4)
    size = 224 if cuda else 96

    model = torchvision.models.resnet50(weights=None).to(dev).eval()
    if args.fix:
        model = model.to(memory_format=torch.channels_last)
    batches = make_batches(8, batch_size, size, dev)

    # The CPU smoke test runs the fix's code path without bf16 (too slow without bf16 units).
    amp = args.fix and cuda
    grad_off = torch.inference_mode if args.fix else torch.no_grad
    correct = torch.zeros((), dtype=torch.long, device=dev)
    with Clock("tv_resnet50_infer", args, dev) as clock, grad_off():
        for i in range(args.iters):
            x, y = batches[i % len(batches)]
            if args.fix:
                x = x.contiguous(memory_format=torch.channels_last)
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=amp):
                logits = model(x)
            correct += (logits.argmax(1) == y).sum()
            clock.mark(len(x))
        clock.done()
    print(f"top-1 agreement: {correct.item() / (args.iters * batch_size):.4f}")


if __name__ == "__main__":
    main()
