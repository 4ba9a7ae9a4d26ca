"""The measured what-if's code: its snippets (``measured_snippets.py``, rendered by the one
engine, ``fixes``) filled with the user's DataLoader arguments and the winners', with what the
rendered call leaves out; and one training loop with every winner (``combined``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from . import SNIPPETS


def loader_args(loader: Any, changes: Mapping[str, Any] | None = None) -> str:
    """``DataLoader(...)`` arguments as the user has them, with ``changes`` applied."""
    changes = dict(changes or {})
    args = ["dataset"]
    bs = changes.get("batch_size", getattr(loader, "batch_size", None))
    if bs is not None:
        args.append(f"batch_size={bs}")
    if type(getattr(loader, "sampler", None)).__name__ == "RandomSampler":  # no torch import
        args.append("shuffle=True")
    if getattr(loader, "drop_last", False):
        args.append("drop_last=True")
    workers = int(changes.get("num_workers", getattr(loader, "num_workers", 0)) or 0)
    if workers:
        args.append(f"num_workers={workers}")
    if changes.get("pin_memory", getattr(loader, "pin_memory", False)):
        args.append("pin_memory=True")
    if workers and changes.get("persistent_workers", getattr(loader, "persistent_workers", False)):
        args.append("persistent_workers=True")
    pf = changes.get("prefetch_factor", getattr(loader, "prefetch_factor", None))
    if workers and pf not in (None, 2):
        args.append(f"prefetch_factor={pf}")
    return ", ".join(args)


def other_loader_arguments(loader: Any) -> list[str]:
    """Arguments of the user's loader the rendered call leaves out (to keep, as a comment)."""
    from torch.utils.data.dataloader import default_collate

    out = []
    if getattr(loader, "collate_fn", default_collate) not in (default_collate, None):
        out.append("collate_fn")
    if getattr(loader, "batch_size", 1) is None:
        out.append("batch_sampler")
    sampler = getattr(loader, "sampler", None)
    if sampler is not None and type(sampler).__name__ not in ("RandomSampler", "SequentialSampler"):
        out.append("sampler")
    if getattr(loader, "worker_init_fn", None) is not None:
        out.append("worker_init_fn")
    if getattr(loader, "generator", None) is not None:
        out.append("generator")
    return out


def render(snippet_id: str, loader: Any = None, **params: Any) -> str:
    """Fill a catalogue template; loader snippets get the user's DataLoader arguments."""
    code = SNIPPETS[snippet_id].fill(**params)
    keep = other_loader_arguments(loader) if loader is not None else []
    if keep and "DataLoader(" in code:
        code = f"# Keep your other DataLoader arguments as they are: {', '.join(keep)}.\n" + code
    return code


def combined_loop(loader: Any, changes: Mapping[str, Any], **rest: Any) -> str:
    """``combined`` for the winners' ``changes`` as an in-process arm keys them (its
    ``source`` "device": the dataset kept on the GPU)."""
    return combined(
        loader,
        non_blocking=bool(changes.get("non_blocking")),
        autocast=changes.get("autocast"),
        channels_last=bool(changes.get("channels_last")),
        dataset_on_gpu=changes.get("source") == "device",
        **rest,
    )


def combined(
    loader: Any,
    *,
    loader_changes: Mapping[str, Any] | None = None,
    non_blocking: bool = False,
    autocast: str | None = None,
    channels_last: bool = False,
    setup: Sequence[str] = (),
    dataset_on_gpu: bool = False,
    lr_factor: int = 1,
    device_type: str = "cuda",
    speedup: str = "",
    title: str = "All measured winners together",
) -> str:
    """One training loop with every winning change, in the order they must be applied.

    ``setup``: the lines that turn the winners on before the loop (their knobs' ``setup_code``,
    in the registry's order); ``channels_last`` also converts the inputs.
    ``title`` heads it: the DataLoader winners alone (``whatif.loader_combined``) are this same
    loop with only ``loader_changes`` and ``non_blocking`` set.
    """
    lines = [
        f"# {title}{': ' + speedup if speedup else ''}.",
        "import torch",
        "",
    ]
    lines += setup
    if lr_factor > 1:
        lines += [
            f"for group in optimizer.param_groups:  # batch x{lr_factor}: scale lr, run once",
            f"    group['lr'] = group['lr'] * {lr_factor}",
        ]
    if autocast == "float16":
        lines.append(f'scaler = torch.amp.GradScaler("{device_type}")')
    body: list[str] = []
    ind = "    "
    if dataset_on_gpu:
        bs = dict(loader_changes or {}).get("batch_size", getattr(loader, "batch_size", None) or 1)
        lines += [
            "items = [dataset[i] for i in range(len(dataset))]",
            "xs = torch.stack([torch.as_tensor(x) for x, _ in items]).to(device)",
            "ys = torch.stack([torch.as_tensor(y) for _, y in items]).to(device)",
            "del items",
        ]
        if channels_last:
            lines.append("xs = xs.contiguous(memory_format=torch.channels_last)")
        lines += [
            "for epoch in range(num_epochs):",
            "    order = torch.randperm(len(xs), device=device)",
            f"    for start in range(0, len(xs), {bs}):",
            f"        idx = order[start : start + {bs}]",
            "        inputs, targets = xs[idx], ys[idx]",
        ]
        ind = "        "
    else:
        if loader_changes or loader is not None:
            keep = other_loader_arguments(loader) if loader is not None else []
            if keep:
                lines.append(
                    f"# Keep your other DataLoader arguments as they are: {', '.join(keep)}."
                )
            lines.append(
                f"loader = torch.utils.data.DataLoader({loader_args(loader, loader_changes)})"
            )
        lines.append("for inputs, targets in loader:")
        nb = ", non_blocking=True" if non_blocking else ""
        cl = ", memory_format=torch.channels_last" if channels_last else ""
        body += [f"inputs = inputs.to(device{nb}{cl})", f"targets = targets.to(device{nb})"]
    if autocast:
        body += [
            f'with torch.autocast(device_type="{device_type}", dtype=torch.{autocast}):',
            "    loss = loss_fn(model(inputs), targets)",
        ]
    else:
        body.append("loss = loss_fn(model(inputs), targets)")
    body.append("optimizer.zero_grad(set_to_none=True)")
    if autocast == "float16":
        body += ["scaler.scale(loss).backward()", "scaler.step(optimizer)", "scaler.update()"]
    else:
        body += ["loss.backward()", "optimizer.step()"]
    lines += [ind + b for b in body]
    return "\n".join(lines) + "\n"
