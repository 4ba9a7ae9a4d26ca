"""timm ViT-B/16 trained in plain fp32 with AdamW: the GPU is busy, but on slow fp32 matmuls.

Loop: ``timm.create_model("vit_base_patch16_224")`` from its config (no weights), timm's AdamW
(``create_optimizer_v2``, no weight decay on norms and biases), label-smoothed cross entropy,
batch 64 of ImageNet-shaped uint8 images from a DataLoader (4 workers, pinned memory) that are
normalized on the GPU the way timm's prefetch loader does it. The images come from a pool drawn
once from a seeded generator, so the loader is cheap and never the bottleneck.

Held back: compute. Every matmul of the ViT runs in fp32 (TF32 is off for matmuls by default),
far below what the H200's tensor cores do in bf16.

--fix: ``torch.autocast("cuda", dtype=torch.bfloat16)`` around forward and loss (timm's
``--amp --amp-dtype bfloat16``), nothing else changed.
"""

from __future__ import annotations

import timm
import torch
from _corpus import Clock, SyntheticImages, parser, pick_device
from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
from timm.optim import create_optimizer_v2
from torch.utils.data import DataLoader

LIBRARY = "timm"
LABEL = "timm ViT-B/16 training in fp32 at batch 64: compute-bound on fp32 matmuls"
EXPECTED = {"bottleneck": "compute", "pick": "autocast"}
FIX = "bf16 torch.autocast around forward and loss (timm --amp --amp-dtype bfloat16)"


def main() -> None:
    p = parser(__doc__, iters=60)
    p.add_argument("-b", "--batch-size", type=int, default=None, help="64 on cuda, 4 on cpu")
    p.add_argument("-j", "--workers", type=int, default=4)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--weight-decay", type=float, default=0.05)
    p.add_argument("--smoothing", type=float, default=0.1)
    p.add_argument("--amp", action="store_true", help="bf16 autocast (what --fix turns on)")
    args = p.parse_args()
    dev = pick_device(args.device)
    cuda = dev.type == "cuda"
    batch_size = args.batch_size or (64 if cuda else 4)
    img_size = 224 if cuda else 64  # a CPU smoke test cannot afford 196 tokens an image
    # bf16 matmuls on a CPU without bf16 units run far slower than fp32: the fix is CUDA's.
    amp = (args.amp or args.fix) and cuda
    if (args.amp or args.fix) and not cuda:
        print("note: bf16 autocast is skipped on the CPU (it is the fix on cuda)")

    torch.backends.cudnn.benchmark = True
    model = timm.create_model(
        "vit_base_patch16_224", pretrained=False, num_classes=1000, img_size=img_size
    ).to(dev)
    optimizer = create_optimizer_v2(model, "adamw", lr=args.lr, weight_decay=args.weight_decay)
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=args.smoothing)

    dataset = SyntheticImages(length=100_000, size=img_size, pool=256 if cuda else 32)
    loader = DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=True,
        num_workers=args.workers,
        pin_memory=cuda,
        drop_last=True,
        persistent_workers=args.workers > 0,
    )
    mean = torch.tensor(IMAGENET_DEFAULT_MEAN, device=dev).view(1, 3, 1, 1) * 255
    std = torch.tensor(IMAGENET_DEFAULT_STD, device=dev).view(1, 3, 1, 1) * 255

    model.train()
    step = 0
    with Clock("timm_vit_fp32", args, dev) as clock:
        while step < args.iters:
            for images, target in loader:
                x = images.to(dev, non_blocking=True).float().sub_(mean).div_(std)
                target = target.to(dev, non_blocking=True)
                with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=amp):
                    output = model(x)
                    loss = loss_fn(output, target)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                clock.mark(len(images))
                step += 1
                if step >= args.iters:
                    break
        clock.done()


if __name__ == "__main__":
    main()
