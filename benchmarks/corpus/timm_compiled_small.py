"""timm ResNet-18 under ``torch.compile`` at batch 32: a small step the host still paces.

Loop: ``timm.create_model("resnet18")`` from its config (no weights), wrapped in
``torch.compile(model)`` (default mode, timm's ``--torchcompile``), trained in fp32 with SGD
(momentum, nesterov) at 160 pixels (the low-resolution stage of timm's ResNet recipes), batch
32 of uint8 images from a DataLoader (6 workers, pinned memory, whole batches only so the
compiled graph sees one shape) normalized on the GPU. The images are a pool drawn once from a
seeded generator, so the loader keeps up.

Held back: launch overhead. Compiling fuses the elementwise work, but at 32 small images the
step's kernels (convolutions, fused norms, the optimizer's updates) run about as fast as the
host can issue them; the GPU waits between them.

--fix: ``--batch-size 256``: eight times the images per step for the same launches.

On ``--device cpu`` compiling takes over a minute on a small machine, so a CPU run skips it
(``--compile`` forces it); on cuda it compiles unless ``--no-compile``.
"""

from __future__ import annotations

import argparse

import timm
import torch
from _corpus import Clock, SyntheticImages, parser, pick_device
from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
from timm.optim import create_optimizer_v2
from torch.utils.data import DataLoader

LIBRARY = "timm"
LABEL = "timm ResNet-18 torch.compile fp32 training at batch 32, 160 px: launch-bound"
EXPECTED = {"bottleneck": "launch_overhead", "pick": "batch"}
FIX = "--batch-size 256 (from 32)"


def main() -> None:
    p = parser(__doc__, iters=1000)
    p.add_argument("-b", "--batch-size", type=int, default=None, help="32 on cuda, 8 on cpu")
    p.add_argument("-j", "--workers", type=int, default=6)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--weight-decay", type=float, default=5e-5)
    p.add_argument("--img-size", type=int, default=None, help="160 on cuda, 64 on cpu")
    p.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="torch.compile the model (default: on cuda yes, on cpu no)",
    )
    args = p.parse_args()
    dev = pick_device(args.device)
    cuda = dev.type == "cuda"
    # The fix is eight times the batch: 32 -> 256 (8 -> 64 in a CPU smoke test).
    batch_size = args.batch_size or (32 if cuda else 8)
    if args.fix and args.batch_size is None:
        batch_size *= 8
    img_size = args.img_size or (160 if cuda else 64)
    use_compile = cuda if args.compile is None else args.compile
    if not use_compile:
        print("note: running the model eagerly (no torch.compile)")

    torch.backends.cudnn.benchmark = True
    model = timm.create_model("resnet18", pretrained=False, num_classes=1000).to(dev)
    optimizer = create_optimizer_v2(
        model, "sgd", lr=args.lr, weight_decay=args.weight_decay, momentum=0.9
    )
    train_model = torch.compile(model) if use_compile else model
    loss_fn = torch.nn.CrossEntropyLoss()

    dataset = SyntheticImages(length=50_000, size=img_size, pool=512 if cuda else 32)
    loader = DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=True,
        num_workers=args.workers,
        pin_memory=cuda,
        drop_last=True,  # a short last batch would recompile
        persistent_workers=args.workers > 0,
    )
    mean = torch.tensor(IMAGENET_DEFAULT_MEAN, device=dev).view(1, 3, 1, 1) * 255
    std = torch.tensor(IMAGENET_DEFAULT_STD, device=dev).view(1, 3, 1, 1) * 255

    model.train()
    step = 0
    with Clock("timm_compiled_small", args, dev) as clock:
        while step < args.iters:
            for images, target in loader:
                x = images.to(dev, non_blocking=True).float().sub_(mean).div_(std)
                target = target.to(dev, non_blocking=True)
                output = train_model(x)
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
