"""timm ResNet-50 trained under bf16 autocast in NCHW: the convolutions pay for the layout.

Loop: ``timm.create_model("resnet50")`` from its config (no weights), timm's SGD (nesterov),
bf16 autocast around forward and loss (timm's ``--amp --amp-dtype bfloat16``), batch 128 of
ImageNet-shaped uint8 images from a DataLoader (4 workers, pinned memory) normalized on the GPU
as timm's prefetch loader does. The images are a pool drawn once from a seeded generator, so
the loader keeps up. ``--channels-last`` (timm's own flag) is off by default.

Held back: compute. In NCHW the bf16 convolutions run slower kernels than in NHWC (and cuDNN
transposes around some of them); the GPU is busy, but not on the fastest path.

--fix: ``--channels-last``: the model and each input batch in ``torch.channels_last``.
"""

from __future__ import annotations

import timm
import torch
from _corpus import Clock, SyntheticImages, parser, pick_device
from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
from timm.optim import create_optimizer_v2
from torch.utils.data import DataLoader

LIBRARY = "timm"
LABEL = "timm ResNet-50 bf16 training at batch 128 in NCHW: compute-bound off the NHWC kernels"
EXPECTED = {"bottleneck": "compute", "pick": "channels_last"}
FIX = "--channels-last: model and input batches in torch.channels_last"


def main() -> None:
    p = parser(__doc__, iters=80)
    p.add_argument("-b", "--batch-size", type=int, default=None, help="128 on cuda, 4 on cpu")
    p.add_argument("-j", "--workers", type=int, default=4)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--weight-decay", type=float, default=1e-4)
    p.add_argument("--channels-last", action="store_true", help="NHWC model and inputs")
    args = p.parse_args()
    dev = pick_device(args.device)
    cuda = dev.type == "cuda"
    batch_size = args.batch_size or (128 if cuda else 4)
    img_size = 224 if cuda else 64
    channels_last = args.channels_last or args.fix
    # bf16 autocast is the run's precision on cuda; a CPU without bf16 units would crawl.
    amp = cuda

    torch.backends.cudnn.benchmark = True
    model = timm.create_model("resnet50", pretrained=False, num_classes=1000).to(dev)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    optimizer = create_optimizer_v2(
        model, "sgd", lr=args.lr, weight_decay=args.weight_decay, momentum=0.9
    )
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)

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
    with Clock("timm_resnet_nchw", args, dev) as clock:
        while step < args.iters:
            for images, target in loader:
                x = images.to(dev, non_blocking=True).float().sub_(mean).div_(std)
                if channels_last:
                    x = x.contiguous(memory_format=torch.channels_last)
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
