"""ImageNet-style ResNet-18 training under nn.DataParallel, fed by four loader workers.

The loop, in the manner of the pytorch/examples ImageNet script run with synthetic data: a
torchvision ``resnet18(weights=None)`` wrapped in ``nn.DataParallel`` (one GPU here), SGD with
momentum and weight decay, a ``StepLR`` schedule, cross-entropy, ``-b/--batch-size 256``. Each
item of the dataset is an image made on the fly: a uint8 3x256x256 tensor from a generator seeded
by its index, then ``RandomResizedCrop(224)``, a horizontal flip, conversion to float and
per-channel normalisation (torchvision ``transforms.v2`` on tensors), a few ms of CPU per image.

What holds the GPU back: ``-j/--workers`` defaults to 4. Four processes making 256 such images a
step cannot keep up with ResNet-18 on an H200, so the GPU waits on the loader (input pipeline).
DataParallel over a single device adds little: it hands the batch straight to the module.

--fix: ``-j 14``, fourteen loader workers on the 16-core host; the model, batch and schedule are
the same.
"""

from __future__ import annotations

import torch
import torchvision
from _corpus import Clock, parser, pick_device
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torchvision.transforms import v2

LIBRARY = "torchvision"
LABEL = (
    "torchvision ResNet-18 in DataParallel, per-image CPU augmentation on 4 workers: input-bound"
)
EXPECTED = {"bottleneck": "input_pipeline", "pick": "workers"}
FIX = "-j 14 (DataLoader num_workers 4 -> 14)"

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


class SyntheticImageNet(Dataset):
    """Random uint8 images, one per index, with the usual training augmentation."""

    def __init__(self, length: int, source_size: int, crop: int, num_classes: int = 1000) -> None:
        self.length = length
        self.source_size = source_size
        self.num_classes = num_classes
        self.transform = v2.Compose(
            [
                v2.RandomResizedCrop(crop, antialias=True),
                v2.RandomHorizontalFlip(),
                v2.ToDtype(torch.float32, scale=True),
                v2.Normalize(MEAN, STD),
            ]
        )

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, idx: int) -> tuple[torch.Tensor, int]:
        g = torch.Generator().manual_seed(idx)
        size = (3, self.source_size, self.source_size)
        img = torch.randint(0, 256, size, generator=g, dtype=torch.uint8)
        target = int(torch.randint(0, self.num_classes, (1,), generator=g))
        return self.transform(img), target


def main() -> None:
    p = parser(__doc__, iters=60)
    p.add_argument("-a", "--arch", default="resnet18", help="torchvision model name")
    p.add_argument("-j", "--workers", type=int, default=4, help="data loading workers")
    p.add_argument("-b", "--batch-size", type=int, default=None, help="mini-batch size (256)")
    p.add_argument("--lr", "--learning-rate", type=float, default=0.1, dest="lr")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--wd", "--weight-decay", type=float, default=1e-4, dest="weight_decay")
    p.add_argument("-p", "--print-freq", type=int, default=10)
    args = p.parse_args()
    dev = pick_device(args.device)
    cuda = dev.type == "cuda"
    if args.batch_size is None:
        args.batch_size = 256 if cuda else 16
    if args.fix:
        args.workers = 14 if cuda else 2
    torch.manual_seed(0)

    model = torchvision.models.get_model(args.arch, weights=None)
    # One GPU: DataParallel scatters to cuda:0 and calls the module directly.
    model = nn.DataParallel(model).to(dev)
    criterion = nn.CrossEntropyLoss().to(dev)
    optimizer = torch.optim.SGD(
        model.parameters(), args.lr, momentum=args.momentum, weight_decay=args.weight_decay
    )
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30, gamma=0.1)

    # Sizes for a CPU smoke run are small; the GPU run uses ImageNet's.
    source, crop = (256, 224) if cuda else (72, 64)
    train_dataset = SyntheticImageNet(
        length=1_281_167 if cuda else 4096, source_size=source, crop=crop
    )
    train_loader = DataLoader(
        train_dataset,
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=args.workers,
        pin_memory=cuda,
    )

    step = 0
    epoch = 0
    with Clock("imagenet_dataparallel", args, dev) as clock:
        while step < args.iters:
            model.train()
            for i, (images, target) in enumerate(train_loader):
                images = images.to(dev, non_blocking=True)
                target = target.to(dev, non_blocking=True)
                output = model(images)
                loss = criterion(output, target)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                step += 1
                clock.mark(images.size(0))
                if i % args.print_freq == 0:
                    print(f"Epoch: [{epoch}][{i}/{len(train_loader)}] Loss {loss.item():.4e}")
                if step >= args.iters:
                    break
            scheduler.step()
            epoch += 1
        clock.done()


if __name__ == "__main__":
    main()
