"""torchvision ResNet-18 trained on a transforms-v2 pipeline run in the main process: data-bound.

Loop: a torchvision classification training loop (the shape of the reference recipe: SGD with
momentum, label smoothing, ``-b``/``-j``/``--lr`` arguments) over a Dataset of synthetic uint8
3x256x256 images, each made from a generator seeded with its index and wrapped as a
``tv_tensors.Image``, then augmented per item by a ``transforms.v2`` pipeline: RandomResizedCrop
to 224, RandomHorizontalFlip, ColorJitter, ToDtype(float32, scale) and Normalize. ResNet-18 at
batch 128 in fp32. ``--workers`` defaults to 0, so every augmentation runs in the training
process between steps.

Held back: the input pipeline. 128 crops, flips and colour jitters per step on one CPU thread
take far longer than the GPU's forward and backward; the GPU waits for each batch.

--fix: ``-j 12``: ``num_workers=12``, ``pin_memory=True``, ``persistent_workers=True``.
"""

from __future__ import annotations

import torch
import torchvision
from _corpus import Clock, parser, pick_device
from torch.utils.data import DataLoader, Dataset
from torchvision import tv_tensors
from torchvision.transforms import v2

LIBRARY = "torchvision"
LABEL = "torchvision ResNet-18 training, transforms v2 per item with 0 workers: loader-bound"
EXPECTED = {"bottleneck": "input_pipeline", "pick": "loader_together"}
FIX = "-j 12: DataLoader num_workers=12, pin_memory=True, persistent_workers=True"
# The script's own switches for the settings a what-if row sets ("{}": the row's value).
TRUTH_ARGS = {
    "set_num_workers": ["-j", "{}"],
    "set_persistent_workers": ["--persistent-workers"],
    "set_pin_memory": ["--pin-memory"],
}


def train_transform(crop: int) -> v2.Compose:
    return v2.Compose(
        [
            v2.RandomResizedCrop(crop, antialias=True),
            v2.RandomHorizontalFlip(),
            v2.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.4),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
            v2.ToPureTensor(),
        ]
    )


class SyntheticImageFolder(Dataset[tuple[torch.Tensor, int]]):
    """What an ImageFolder of decoded 256x256 photos hands the transforms: each item a uint8
    image from a generator seeded with its index, and a label."""

    def __init__(self, length: int, size: int, transform: v2.Compose, classes: int = 1000) -> None:
        self.length = length
        self.size = size
        self.transform = transform
        self.classes = classes

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        g = torch.Generator().manual_seed(index)
        raw = torch.randint(0, 256, (3, self.size, self.size), dtype=torch.uint8, generator=g)
        return self.transform(tv_tensors.Image(raw)), index % self.classes


def main() -> None:
    p = parser(__doc__, iters=30)
    p.add_argument("-b", "--batch-size", type=int, default=None, help="128 on cuda, 8 on cpu")
    p.add_argument("-j", "--workers", type=int, default=0, help="data loading workers")
    p.add_argument("--pin-memory", action="store_true", help="pin the loader's batches")
    p.add_argument("--persistent-workers", action="store_true", help="keep workers across epochs")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--wd", "--weight-decay", type=float, default=1e-4, dest="weight_decay")
    p.add_argument("--label-smoothing", type=float, default=0.1)
    args = p.parse_args()
    dev = pick_device(args.device)
    cuda = dev.type == "cuda"
    batch_size = args.batch_size or (128 if cuda else 8)
    workers = 12 if args.fix else args.workers
    crop = 224 if cuda else 112

    torch.backends.cudnn.benchmark = True
    dataset = SyntheticImageFolder(length=100_000, size=256, transform=train_transform(crop))
    loader = DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=True,
        num_workers=workers,
        pin_memory=(args.fix or args.pin_memory) and cuda,
        persistent_workers=(args.fix or args.persistent_workers) and workers > 0,
        drop_last=True,
    )
    model = torchvision.models.resnet18(weights=None, num_classes=1000).to(dev)
    optimizer = torch.optim.SGD(
        model.parameters(), lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay
    )
    criterion = torch.nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)

    model.train()
    step = 0
    with Clock("tv_transforms_loader", args, dev) as clock:
        while step < args.iters:
            for image, target in loader:
                image = image.to(dev, non_blocking=True)
                target = target.to(dev, non_blocking=True)
                output = model(image)
                loss = criterion(output, target)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                clock.mark(len(image))
                step += 1
                if step >= args.iters:
                    break
        clock.done()


if __name__ == "__main__":
    main()
