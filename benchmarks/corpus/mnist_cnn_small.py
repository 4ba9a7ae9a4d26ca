"""MNIST-style two-conv CNN trained at batch 64: a tiny step, launch-bound on an H200.

The loop, in the manner of the pytorch/examples MNIST script: ``Net`` (two 3x3 convs, max-pool,
dropout, two linear layers, ``log_softmax``), ``F.nll_loss``, ``Adadelta`` with a ``StepLR``
stepped per epoch, a ``DataLoader`` over 60000 synthetic 1x28x28 digits (a uint8 tensor made from
a seeded generator, normalised once like ``ToTensor`` + ``Normalize``), two persistent
loader workers and pinned memory on CUDA, and ``loss.item()`` logged every ``--log-interval``
batches.

What holds the GPU back: at ``--batch-size 64`` each step's kernels finish in microseconds, so
the step takes as long as the host needs to launch them (forward, backward, Adadelta): launch
overhead.

--fix: ``--batch-size 1024``, sixteen times the images per launch; everything else the same.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _corpus import Clock, parser, pick_device
from torch import nn
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, Dataset

LIBRARY = "torch"
LABEL = "MNIST two-conv CNN at batch 64: launch-bound"
EXPECTED = {"bottleneck": "launch_overhead", "pick": "batch"}
FIX = "--batch-size 1024 (from 64)"


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return F.log_softmax(self.fc2(x), dim=1)


class SyntheticDigits(Dataset):
    """Stands in for torchvision's MNIST: uint8 images and labels held in memory."""

    def __init__(self, length: int, seed: int = 1) -> None:
        g = torch.Generator().manual_seed(seed)
        self.targets = torch.randint(0, 10, (length,), generator=g)
        noise = torch.randint(0, 64, (length, 28, 28), generator=g, dtype=torch.uint8)
        # A bright bar whose row depends on the label, so there is something to learn.
        rows = (2 + 2 * self.targets).view(-1, 1, 1)
        bar = (torch.arange(28).view(1, 28, 1) - rows).abs() <= 1
        pixels = torch.where(bar, torch.tensor(220, dtype=torch.uint8), noise)
        # ToTensor + Normalize((0.1307,), (0.3081,)) once up front, so a batch is a cheap gather.
        self.data = (pixels.unsqueeze(1).float().div_(255) - 0.1307) / 0.3081

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.data[idx], self.targets[idx]


def main() -> None:
    p = parser(__doc__, iters=2500)
    p.add_argument("--batch-size", type=int, default=64, help="input batch size for training")
    p.add_argument("--lr", type=float, default=1.0, help="learning rate")
    p.add_argument("--gamma", type=float, default=0.7, help="learning rate step gamma")
    p.add_argument("--log-interval", type=int, default=10, help="batches between loss logs")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    dev = pick_device(args.device)
    if args.fix:
        # 256 where a CPU smoke run has to compute it all on two cores.
        args.batch_size = 1024 if dev.type == "cuda" else 256
    torch.manual_seed(args.seed)

    train_kwargs: dict = {"batch_size": args.batch_size, "shuffle": True}
    if dev.type == "cuda":
        # Two workers so a 1024 batch is ready in time; persistent so they are not re-forked
        # every epoch (an epoch is 59 steps at 1024).
        train_kwargs.update({"num_workers": 2, "pin_memory": True, "persistent_workers": True})
    train_loader = DataLoader(
        SyntheticDigits(60000 if dev.type == "cuda" else 4096), **train_kwargs
    )

    model = Net().to(dev)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)

    step = 0
    epoch = 0
    with Clock("mnist_cnn_small", args, dev) as clock:
        while step < args.iters:
            epoch += 1
            model.train()
            for batch_idx, (data, target) in enumerate(train_loader):
                data, target = data.to(dev), target.to(dev)
                optimizer.zero_grad()
                output = model(data)
                loss = F.nll_loss(output, target)
                loss.backward()
                optimizer.step()
                step += 1
                clock.mark(len(data))
                if batch_idx % args.log_interval == 0:
                    print(
                        f"Train Epoch: {epoch} [{batch_idx * len(data)}/"
                        f"{len(train_loader.dataset)}]\tLoss: {loss.item():.6f}"
                    )
                if step >= args.iters:
                    break
            scheduler.step()
        clock.done()


if __name__ == "__main__":
    main()
