"""CPU augmentation in the training loop: crop, flip, blur and normalise each batch on the CPU.

The loop body runs tensor ops on CPU tensors between steps, so the GPU waits for them.
Fix: copy the uint8 batch (pinned, asynchronously) and run the same ops on the GPU.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _common import Steps, parse_args, pick_device
from torch import nn

LABEL = "CPU augmentation (crop, flip, blur, normalise) in the training loop"
EXPECTED = {"bottleneck": "host_cpu", "finding": "load.cpu_preprocessing"}
REQUIRES_CUDA = True

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def augment(x: torch.Tensor, crop: int) -> torch.Tensor:
    """uint8 NCHW -> normalised float crops; the same code runs on either device."""
    n, _, h, w = x.shape
    top, left = (h - crop) // 2, (w - crop) // 2
    x = x[:, :, top : top + crop, left : left + crop].float().div_(255)
    x = torch.where(torch.rand(n, 1, 1, 1, device=x.device) < 0.5, x.flip(3), x)
    k = torch.tensor([1.0, 4.0, 6.0, 4.0, 1.0], device=x.device)
    k = (k[:, None] * k[None, :]) / 256
    x = F.conv2d(x, k.expand(3, 1, 5, 5).contiguous(), padding=2, groups=3)
    mean = torch.tensor(MEAN, device=x.device).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=x.device).view(1, 3, 1, 1)
    return (x - mean) / std


def convnet(width: int) -> nn.Module:
    def block(cin: int, cout: int) -> nn.Module:
        return nn.Sequential(
            nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU(),
        )

    return nn.Sequential(
        block(3, width),
        block(width, 2 * width),
        block(2 * width, 4 * width),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4 * width, 100),
    )


def main() -> None:
    args = parse_args(__doc__)
    dev = pick_device(args.device)
    gpu = dev.type == "cuda"
    batch, size, crop, width = (128, 160, 144, 64) if gpu else (8, 40, 32, 8)
    n_batches = 8
    images = torch.randint(0, 256, (n_batches, batch, 3, size, size), dtype=torch.uint8)
    labels = torch.randint(0, 100, (n_batches, batch))
    if gpu:
        images, labels = images.pin_memory(), labels.pin_memory()
        torch.backends.cudnn.benchmark = True
    model = convnet(width).to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    amp = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=gpu)
    with Steps("cpu_augment", args, dev, batch) as steps:
        for i in range(args.iters):
            raw, y = images[i % n_batches], labels[i % n_batches].to(dev, non_blocking=True)
            if args.fix:
                x = augment(raw.to(dev, non_blocking=True), crop)
            else:
                x = augment(raw, crop).to(dev)  # the planted bottleneck: augment on the CPU
            x = x.contiguous(memory_format=torch.channels_last)
            with amp:
                loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            steps.mark()


if __name__ == "__main__":
    main()
