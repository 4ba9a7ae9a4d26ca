"""A convolutional VAE on 64x64 images held in pageable CPU memory, with a loss.item() per step.

The loop: synthetic 1x64x64 grey images (smooth blobs in [0, 1] from a seeded generator) in one
CPU tensor; each step takes a contiguous slice of 128 images, moves it with
``.to(device, non_blocking=True)``, runs a VAE (four strided convs to a 128-d latent, four
transposed convs back, sigmoid output), the usual BCE + KL loss summed over the batch, and Adam.
The loss is read with ``loss.item()`` every step for the running average it prints.

What holds the GPU back: two syncs a step. ``non_blocking=True`` from pageable memory is not
asynchronous: CUDA stages the 2 MB through its own pinned buffer while the host waits, and the
``.item()`` at the end of the step waits for the GPU to drain. The GPU then sits idle while the
host copies the next batch and starts launching again.

Which of the two costs more was set before any GPU run as the ``.item()`` (host sync). An H100
(``benchmarks/results/h100-run34``) measured the pageable copy at 0.77 ms of a 3.87 ms step
(20%) and the GPU idle after the ``.item()`` at 0.03 ms: the copy is the cost, the ``.item()``
waits for a GPU the copy had already drained, and ``--fix`` gained 1.20x, about the copy's
share. The expected verdict is the copy's (``memory_transfer``, ``code.pageable_copy``).

--fix: the image tensor pinned once up front (``.pin_memory()``, so each slice's copy is truly
asynchronous) and the running loss kept on the GPU, read once at the end; the training is the
same. No outside knob removes an ``.item()``, so no what-if row matches it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _corpus import Clock, parser, pick_device
from torch import nn

LIBRARY = "torch"
LABEL = "conv VAE 64x64, batches copied from pageable memory and loss.item() per step: copies block"
EXPECTED = {"bottleneck": "memory_transfer", "pick": None}
FIX = "data tensor .pin_memory() and the running loss kept on the GPU (one .item() at the end)"

LATENT = 128


class VAE(nn.Module):
    def __init__(self, width: int, latent: int = LATENT) -> None:
        super().__init__()
        w = width
        self.encoder = nn.Sequential(
            nn.Conv2d(1, w, 4, 2, 1),  # 32x32
            nn.LeakyReLU(0.2),
            nn.Conv2d(w, w * 2, 4, 2, 1),  # 16x16
            nn.LeakyReLU(0.2),
            nn.Conv2d(w * 2, w * 4, 4, 2, 1),  # 8x8
            nn.LeakyReLU(0.2),
            nn.Conv2d(w * 4, w * 8, 4, 2, 1),  # 4x4
            nn.LeakyReLU(0.2),
            nn.Flatten(),
        )
        flat = w * 8 * 4 * 4
        self.fc_mu = nn.Linear(flat, latent)
        self.fc_logvar = nn.Linear(flat, latent)
        self.fc_dec = nn.Linear(latent, flat)
        self.decoder = nn.Sequential(
            nn.Unflatten(1, (w * 8, 4, 4)),
            nn.ConvTranspose2d(w * 8, w * 4, 4, 2, 1),
            nn.ReLU(),
            nn.ConvTranspose2d(w * 4, w * 2, 4, 2, 1),
            nn.ReLU(),
            nn.ConvTranspose2d(w * 2, w, 4, 2, 1),
            nn.ReLU(),
            nn.ConvTranspose2d(w, 1, 4, 2, 1),
        )

    def reparameterize(self, mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
        std = torch.exp(0.5 * logvar)
        return mu + torch.randn_like(std) * std

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h = self.encoder(x)
        mu, logvar = self.fc_mu(h), self.fc_logvar(h)
        z = self.reparameterize(mu, logvar)
        return torch.sigmoid(self.decoder(self.fc_dec(z))), mu, logvar


def loss_function(
    recon_x: torch.Tensor, x: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor
) -> torch.Tensor:
    bce = F.binary_cross_entropy(recon_x, x, reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


def make_images(count: int, seed: int = 0) -> torch.Tensor:
    """Smooth blobs: coarse noise upsampled, squashed into [0, 1]. [count, 1, 64, 64] float32."""
    g = torch.Generator().manual_seed(seed)
    coarse = torch.randn(count, 1, 8, 8, generator=g)
    return torch.sigmoid(2.0 * F.interpolate(coarse, size=(64, 64), mode="bicubic")).contiguous()


def main() -> None:
    p = parser(__doc__, iters=3000)
    p.add_argument("--batch-size", type=int, default=128, help="input batch size for training")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--width", type=int, default=None, help="encoder base channels (64; 8 on CPU)")
    p.add_argument("--num-images", type=int, default=None, help="images held in memory")
    p.add_argument("--log-interval", type=int, default=100)
    args = p.parse_args()
    dev = pick_device(args.device)
    cuda = dev.type == "cuda"
    torch.manual_seed(1)

    images = make_images(args.num_images or (16384 if cuda else 1024))
    if args.fix and cuda:
        # Page-locked, so the slices below are copied by DMA while the host runs ahead.
        images = images.pin_memory()
    model = VAE(args.width or (64 if cuda else 8)).to(dev)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    bs = args.batch_size
    num_batches = len(images) // bs

    step = 0
    seen = 0
    epoch = 0
    train_loss: float | torch.Tensor = torch.zeros((), device=dev) if args.fix else 0.0
    with Clock("vae_pinned_copy", args, dev) as clock:
        while step < args.iters:
            epoch += 1
            model.train()
            for b in torch.randperm(num_batches).tolist():
                data = images[b * bs : (b + 1) * bs].to(dev, non_blocking=True)
                optimizer.zero_grad()
                recon, mu, logvar = model(data)
                loss = loss_function(recon, data, mu, logvar)
                loss.backward()
                optimizer.step()
                if args.fix:
                    train_loss += loss.detach()
                else:
                    train_loss += loss.item()
                    if step % args.log_interval == 0:
                        avg = train_loss / (seen + bs)
                        print(f"Train Epoch: {epoch} step {step}\tLoss: {avg:.2f}")
                seen += len(data)
                step += 1
                clock.mark(len(data))
                if step >= args.iters:
                    break
        clock.done()
    print(f"====> average loss per image: {float(train_loss) / max(seen, 1):.4f}")


if __name__ == "__main__":
    main()
