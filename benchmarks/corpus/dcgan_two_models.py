"""DCGAN at 64x64, a discriminator step then a generator step per batch, in fp32.

The loop, in the manner of the pytorch/examples DCGAN script: a ``Generator`` of transposed
convolutions and a ``Discriminator`` of strided convolutions, both with BatchNorm and DCGAN's
N(0, 0.02) init, one Adam each (lr 2e-4, beta1 0.5), ``BCELoss``. Every iteration updates
``netD`` on a batch of real images and a batch of fakes, then ``netG`` through ``netD``. The
"real" images are a synthetic uint8 bank (64x64 RGB blobs from a seeded generator) scaled to
[-1, 1] per item by a two-worker DataLoader; items are the real images of an iteration.

Sizes: ``--batchSize 64`` at ``--imageSize 64`` with ``--ngf``/``--ndf`` 128 on CUDA, about
1.1 TFLOP of convolution per iteration (three forward and backward passes through netD, one
through netG). At the example's width of 64 an iteration is about 0.28 TFLOP, near 2 ms on an
H200, no more than the host needs to launch its ~250 kernels, so it would sit on the line
between launch overhead and compute; at 128 the GPU's fp32 (TF32 in cuDNN) convolution time,
several ms, is what the step waits for: compute.

--fix: both models and the real batch in ``channels_last`` and the forward passes under bf16
``torch.autocast`` (the BCE loss computed in fp32 outside it); the training is otherwise the same.
"""

from __future__ import annotations

import contextlib

import torch
from _corpus import Clock, parser, pick_device
from torch import nn
from torch.utils.data import DataLoader, Dataset

LIBRARY = "torch"
LABEL = "DCGAN 64x64, batch 64, ngf/ndf 128, two models and two optimizers in fp32: compute-bound"
EXPECTED = {"bottleneck": "compute", "pick": "together"}
FIX = "channels_last models and inputs + bf16 torch.autocast around the forward passes"


class Generator(nn.Module):
    def __init__(self, nz: int, ngf: int, nc: int = 3) -> None:
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 8),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf * 4),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False),
            nn.Tanh(),
        )

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.main(z)


class Discriminator(nn.Module):
    def __init__(self, ndf: int, nc: int = 3) -> None:
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 4),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 4, ndf * 8, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 8),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False),
            nn.Sigmoid(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.main(x).view(-1)


def weights_init(m: nn.Module) -> None:
    name = type(m).__name__
    if "Conv" in name:
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif "BatchNorm" in name:
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.zeros_(m.bias)


class BlobImages(Dataset):
    """Stand-in for an ImageFolder: smooth coloured blobs, uint8, scaled to [-1, 1] per item."""

    def __init__(self, length: int, size: int, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        coarse = torch.rand(length, 3, size // 8, size // 8, generator=g)
        smooth = nn.functional.interpolate(coarse, size=(size, size), mode="bilinear")
        self.images = (smooth * 255).to(torch.uint8)

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, idx: int) -> tuple[torch.Tensor, int]:
        return self.images[idx].float().div_(127.5).sub_(1.0), 0


def main() -> None:
    p = parser(__doc__, iters=1000)
    p.add_argument("--workers", type=int, default=2, help="number of data loading workers")
    p.add_argument("--batchSize", type=int, default=None, help="input batch size (64)")
    p.add_argument("--imageSize", type=int, default=64, help="height / width of the images")
    p.add_argument("--nz", type=int, default=100, help="size of the latent z vector")
    p.add_argument("--ngf", type=int, default=None, help="generator width (128; 16 on CPU)")
    p.add_argument("--ndf", type=int, default=None, help="discriminator width (128; 16 on CPU)")
    p.add_argument("--lr", type=float, default=0.0002)
    p.add_argument("--beta1", type=float, default=0.5)
    p.add_argument("--log-every", type=int, default=50, help="iterations between loss prints")
    args = p.parse_args()
    dev = pick_device(args.device)
    cuda = dev.type == "cuda"
    args.batchSize = args.batchSize or (64 if cuda else 16)
    args.ngf = args.ngf or (128 if cuda else 16)
    args.ndf = args.ndf or (128 if cuda else 16)
    torch.manual_seed(999)

    dataset = BlobImages(8192 if cuda else 512, args.imageSize)
    dataloader = DataLoader(
        dataset,
        batch_size=args.batchSize,
        shuffle=True,
        num_workers=args.workers,
        pin_memory=cuda,
        persistent_workers=args.workers > 0,
        drop_last=True,
    )

    netG = Generator(args.nz, args.ngf).to(dev)
    netG.apply(weights_init)
    netD = Discriminator(args.ndf).to(dev)
    netD.apply(weights_init)
    memory_format = torch.channels_last if args.fix else torch.contiguous_format
    netG = netG.to(memory_format=memory_format)
    netD = netD.to(memory_format=memory_format)

    def amp() -> contextlib.AbstractContextManager:
        # bf16 needs no GradScaler; BCELoss is not autocast-safe, so it stays outside.
        if args.fix:
            return torch.autocast(dev.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    criterion = nn.BCELoss()
    real_label, fake_label = 1.0, 0.0
    optimizerD = torch.optim.Adam(netD.parameters(), lr=args.lr, betas=(args.beta1, 0.999))
    optimizerG = torch.optim.Adam(netG.parameters(), lr=args.lr, betas=(args.beta1, 0.999))

    step = 0
    epoch = 0
    with Clock("dcgan_two_models", args, dev) as clock:
        while step < args.iters:
            for i, (data, _) in enumerate(dataloader):
                real = data.to(dev, non_blocking=True).contiguous(memory_format=memory_format)
                b_size = real.size(0)
                label = torch.full((b_size,), real_label, dtype=torch.float, device=dev)

                # (1) netD: maximize log(D(x)) + log(1 - D(G(z)))
                netD.zero_grad()
                with amp():
                    output = netD(real)
                errD_real = criterion(output.float(), label)
                errD_real.backward()
                D_x = output.detach().float().mean()

                noise = torch.randn(b_size, args.nz, 1, 1, device=dev)
                with amp():
                    fake = netG(noise)
                    output = netD(fake.detach())
                label.fill_(fake_label)
                errD_fake = criterion(output.float(), label)
                errD_fake.backward()
                errD = errD_real + errD_fake
                optimizerD.step()

                # (2) netG: maximize log(D(G(z)))
                netG.zero_grad()
                label.fill_(real_label)  # fake labels are real for the generator cost
                with amp():
                    output = netD(fake)
                errG = criterion(output.float(), label)
                errG.backward()
                optimizerG.step()

                step += 1
                clock.mark(b_size)
                if i % args.log_every == 0:
                    print(
                        f"[{epoch}][{i}/{len(dataloader)}] Loss_D: {errD.item():.4f} "
                        f"Loss_G: {errG.item():.4f} D(x): {D_x.item():.4f}"
                    )
                if step >= args.iters:
                    break
            epoch += 1
        clock.done()


if __name__ == "__main__":
    main()
