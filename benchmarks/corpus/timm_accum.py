"""timm ConvNeXt-Tiny trained with gradient accumulation over micro-batches of 16: host-bound.

Loop: ``timm.create_model("convnext_tiny")`` from its config (no weights), timm's AdamW, bf16
autocast on cuda (timm's ``--amp --amp-dtype bfloat16``), ImageNet-shaped uint8 images from a
DataLoader (4 workers, pinned memory) normalized on the GPU. A memory-shy recipe: micro-batch
16 (``-b``), ``--accum-steps 8`` (an effective batch of 128), the loss divided by the
accumulation count, an optimizer step every 8 micro-batches, and each micro-step's
``loss.item()`` appended to the log list. The clock marks each optimizer step with the images
of its micro-batches.

Held back: launch overhead (and a host sync per micro-step). ConvNeXt-Tiny at 16 images is
hundreds of small kernels the GPU finishes faster than the host issues them, eight times a step,
and every ``.item()`` drains the queue so the host can never run ahead.

--fix: ``-b 128 --accum-steps 1`` (the same effective batch in one micro-batch) and the loss
summed on the GPU, read with one ``.item()`` per optimizer step.
"""

from __future__ import annotations

import timm
import torch
from _corpus import Clock, SyntheticImages, parser, pick_device
from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
from timm.optim import create_optimizer_v2
from torch.utils.data import DataLoader

LIBRARY = "timm"
LABEL = "timm ConvNeXt-Tiny, micro-batch 16 x 8 accumulation, .item() per micro-step: host-bound"
EXPECTED = {"bottleneck": "launch_overhead", "pick": "accumulation"}
FIX = "-b 128 --accum-steps 1 (same effective batch), loss read once per optimizer step"
# The script's own switches for the settings a what-if row sets ("{}": the row's value).
TRUTH_ARGS = {"set_batch_size": ["-b", "{}"], "set_accumulation": ["--accum-steps", "{}"]}


def main() -> None:
    p = parser(__doc__, iters=60)
    p.add_argument("-b", "--batch-size", type=int, default=None, help="micro-batch: 16 (cpu 2)")
    p.add_argument("--accum-steps", type=int, default=None, help="micro-batches per step: 8")
    p.add_argument("-j", "--workers", type=int, default=4)
    p.add_argument("--lr", type=float, default=4e-3)
    p.add_argument("--weight-decay", type=float, default=0.05)
    args = p.parse_args()
    dev = pick_device(args.device)
    cuda = dev.type == "cuda"
    # The fix keeps the effective batch: 16 x 8 becomes 128 x 1 (2 x 8 -> 16 x 1 on a CPU).
    micro = 16 if cuda else 2
    accum = 8
    if args.fix:
        micro, accum = micro * accum, 1
    micro = args.batch_size or micro
    accum = args.accum_steps or accum
    img_size = 224 if cuda else 64
    amp = cuda  # bf16 on a CPU without bf16 units would crawl

    torch.backends.cudnn.benchmark = True
    model = timm.create_model("convnext_tiny", pretrained=False, num_classes=1000).to(dev)
    optimizer = create_optimizer_v2(model, "adamw", lr=args.lr, weight_decay=args.weight_decay)
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)

    dataset = SyntheticImages(length=100_000, size=img_size, pool=256 if cuda else 32)
    loader = DataLoader(
        dataset,
        batch_size=micro,
        shuffle=True,
        num_workers=args.workers,
        pin_memory=cuda,
        drop_last=True,
        persistent_workers=args.workers > 0,
    )
    mean = torch.tensor(IMAGENET_DEFAULT_MEAN, device=dev).view(1, 3, 1, 1) * 255
    std = torch.tensor(IMAGENET_DEFAULT_STD, device=dev).view(1, 3, 1, 1) * 255

    model.train()
    losses: list[float] = []
    step = 0
    micro_step = 0
    seen = 0
    loss_sum = torch.zeros((), device=dev)
    optimizer.zero_grad(set_to_none=True)
    with Clock("timm_accum", args, dev) as clock:
        while step < args.iters:
            for images, target in loader:
                x = images.to(dev, non_blocking=True).float().sub_(mean).div_(std)
                target = target.to(dev, non_blocking=True)
                with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=amp):
                    output = model(x)
                    loss = loss_fn(output, target) / accum
                loss.backward()
                if args.fix:
                    loss_sum += loss.detach()  # stays on the GPU until the step's one read
                else:
                    losses.append(loss.item() * accum)
                seen += len(images)
                micro_step += 1
                if micro_step % accum:
                    continue
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                if args.fix:
                    losses.append(loss_sum.item())
                    loss_sum.zero_()
                clock.mark(seen)
                seen = 0
                step += 1
                if step >= args.iters:
                    break
        clock.done()
    print(f"last loss {losses[-1]:.4f}")


if __name__ == "__main__":
    main()
