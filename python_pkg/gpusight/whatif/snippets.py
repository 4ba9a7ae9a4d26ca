"""Fix snippets for measured what-ifs: one template per fix, filled with the measured winners.

Templates are ``string.Template`` text (``$name``), so that Python's own braces stay literal.
Every filled template is valid Python (the tests ``compile()`` each one and execute those that
run on a CPU) and names only what a training script has: ``torch``, ``model``, ``optimizer``,
``loss_fn``, ``dataset``, ``loader``, ``device`` (and ``num_epochs`` for the GPU-resident dataset).
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from torch.utils.data import RandomSampler


@dataclass(frozen=True)
class Snippet:
    id: str
    finding_id: str
    text: str  # one sentence: what the code does
    template: str
    example: dict[str, Any] = field(default_factory=dict)  # fills the template in tests
    needs: tuple[str, ...] = ("torch",)
    cpu_runnable: bool = True  # executing it on a CPU is meaningful (tests run it)

    def fill(self, **params: Any) -> str:
        return string.Template(self.template).substitute({**self.example, **params})


_STEP = """\
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
"""

_LOADER_EXAMPLE = {"loader_args": "dataset, batch_size=8, shuffle=True", "speedup": "1.00x"}
_LOADER_ONLY = (
    "# Measured: $speedup faster per step ($what).\n"
    "loader = torch.utils.data.DataLoader($loader_args)\n"
)

CATALOGUE: dict[str, Snippet] = {
    s.id: s
    for s in (
        Snippet(
            "whatif.num_workers",
            "load.input_bound",
            "Load batches in worker processes, so the next batch is ready when the step ends.",
            _LOADER_ONLY,
            {**_LOADER_EXAMPLE, "what": "num_workers sweep 2: 1.00x"},
            ("torch", "dataset"),
        ),
        Snippet(
            "whatif.persistent_workers",
            "load.input_bound",
            "Keep the worker processes alive between epochs instead of starting them again.",
            _LOADER_ONLY,
            {**_LOADER_EXAMPLE, "what": "workers kept across epochs"},
            ("torch", "dataset"),
        ),
        Snippet(
            "whatif.prefetch_factor",
            "load.input_bound",
            "Let each worker prepare more batches ahead, to ride out slow ones.",
            _LOADER_ONLY,
            {**_LOADER_EXAMPLE, "what": "4 batches ahead per worker"},
            ("torch", "dataset"),
        ),
        Snippet(
            "whatif.pin_memory",
            "code.pageable_copy",
            "Pin batches in page-locked memory and copy them without blocking the host.",
            "# Measured: $speedup faster per step. A non_blocking copy from pageable memory still\n"
            "# blocks the host for the whole copy; from pinned memory it overlaps with compute.\n"
            "loader = torch.utils.data.DataLoader($loader_args)\n"
            "for inputs, targets in loader:\n"
            "    inputs = inputs.to(device, non_blocking=True)\n"
            "    targets = targets.to(device, non_blocking=True)\n"
            "    loss = loss_fn(model(inputs), targets)\n" + _STEP,
            {**_LOADER_EXAMPLE},
            ("torch", "dataset", "device", "model", "loss_fn", "optimizer"),
        ),
        Snippet(
            "whatif.batch_size",
            "load.small_batch",
            "Larger batches: more samples per step, fewer launches per sample.",
            "# Measured: $speedup more samples per second at batch_size=$batch_size\n"
            "# ($factor x yours).\n"
            "# A larger batch changes the optimisation: scale the learning rate with it (linear\n"
            "# scaling rule, with some warm-up steps) and check the loss curve still matches.\n"
            "loader = torch.utils.data.DataLoader($loader_args)\n"
            "for group in optimizer.param_groups:  # run once\n"
            "    group['lr'] = group['lr'] * $factor\n",
            {
                **_LOADER_EXAMPLE,
                "loader_args": "dataset, batch_size=16, shuffle=True",
                "batch_size": 16,
                "factor": 2,
            },
            ("torch", "dataset", "optimizer"),
        ),
        Snippet(
            "whatif.autocast_bf16",
            "load.amp_unused",
            "Run the forward pass and the loss in bfloat16 autocast (tensor cores).",
            "# Measured: $speedup faster per step with bf16 autocast (weights stay float32).\n"
            "for inputs, targets in loader:\n"
            "    inputs, targets = inputs.to(device), targets.to(device)\n"
            '    with torch.autocast(device_type="$device_type", dtype=torch.bfloat16):\n'
            "        loss = loss_fn(model(inputs), targets)\n" + _STEP,
            {"speedup": "1.00x", "device_type": "cuda"},
            ("torch", "loader", "device", "model", "loss_fn", "optimizer"),
        ),
        Snippet(
            "whatif.autocast_fp16",
            "load.amp_unused",
            "Run the forward pass in float16 autocast, with a GradScaler against underflow.",
            "# Measured: $speedup faster per step with fp16 autocast (this GPU has no bf16).\n"
            'scaler = torch.amp.GradScaler("$device_type")\n'
            "for inputs, targets in loader:\n"
            "    inputs, targets = inputs.to(device), targets.to(device)\n"
            '    with torch.autocast(device_type="$device_type", dtype=torch.float16):\n'
            "        loss = loss_fn(model(inputs), targets)\n"
            "    optimizer.zero_grad(set_to_none=True)\n"
            "    scaler.scale(loss).backward()\n"
            "    scaler.step(optimizer)\n"
            "    scaler.update()\n",
            {"speedup": "1.00x", "device_type": "cuda"},
            ("torch", "loader", "device", "model", "loss_fn", "optimizer"),
        ),
        Snippet(
            "whatif.channels_last",
            "load.channels_last",
            "Keep the model and image batches in channels_last (NHWC) memory format.",
            "# Measured: $speedup faster per step in channels_last.\n"
            "model = model.to(memory_format=torch.channels_last)\n"
            "for inputs, targets in loader:\n"
            "    inputs = inputs.to(device, memory_format=torch.channels_last)\n"
            "    targets = targets.to(device)\n"
            "    loss = loss_fn(model(inputs), targets)\n" + _STEP,
            {"speedup": "1.00x"},
            ("torch", "loader", "device", "model", "loss_fn", "optimizer"),
        ),
        Snippet(
            "whatif.tf32",
            "cfg.tf32_disabled",
            "Let float32 matmuls and convolutions use TF32 tensor cores.",
            "# Measured: $speedup faster per step. TF32 keeps float32's range with a 10-bit\n"
            "# mantissa; most training is unaffected, check yours if it is precision-sensitive.\n"
            'torch.set_float32_matmul_precision("high")\n'
            "torch.backends.cudnn.allow_tf32 = True\n",
            {"speedup": "1.00x"},
        ),
        Snippet(
            "whatif.cudnn_benchmark",
            "cfg.cudnn_benchmark_off",
            "Let cudnn time its convolution algorithms once and keep the fastest.",
            "# Measured: $speedup faster per step. Best when input shapes do not change.\n"
            "torch.backends.cudnn.benchmark = True\n",
            {"speedup": "1.00x"},
        ),
        Snippet(
            "whatif.dataset_on_gpu",
            "load.memory_headroom",
            "Keep the whole dataset on the GPU and index batches there.",
            "# Measured: $speedup faster per step. The dataset ($dataset_gb GB) fits in free GPU\n"
            "# memory ($free_gb GB). Random per-item augmentations must then run on the GPU too.\n"
            "items = [dataset[i] for i in range(len(dataset))]\n"
            "xs = torch.stack([torch.as_tensor(x) for x, _ in items]).to(device)\n"
            "ys = torch.stack([torch.as_tensor(y) for _, y in items]).to(device)\n"
            "del items\n"
            "for epoch in range(num_epochs):\n"
            "    order = torch.randperm(len(xs), device=device)\n"
            "    for start in range(0, len(xs), $batch_size):\n"
            "        idx = order[start : start + $batch_size]\n"
            "        inputs, targets = xs[idx], ys[idx]\n"
            "        loss = loss_fn(model(inputs), targets)\n"
            "        optimizer.zero_grad(set_to_none=True)\n"
            "        loss.backward()\n"
            "        optimizer.step()\n",
            {"speedup": "1.00x", "dataset_gb": 0.1, "free_gb": 1.0, "batch_size": 8},
            ("torch", "dataset", "device", "model", "loss_fn", "optimizer", "num_epochs"),
        ),
        Snippet(
            "whatif.compile",
            "load.launch_bound",
            "Compile the model: fused kernels, fewer launches per step.",
            "# Measured: $speedup faster per step, after $compile_s s of compiling (once).\n"
            "model = torch.compile(model)\n",
            {"speedup": "1.00x", "compile_s": 0.0},
            ("torch", "model"),
            cpu_runnable=False,  # runnable, but compiling takes minutes on a small CPU
        ),
    )
}


def loader_args(loader: Any, changes: Mapping[str, Any] | None = None) -> str:
    """``DataLoader(...)`` arguments as the user has them, with ``changes`` applied."""
    changes = dict(changes or {})
    args = ["dataset"]
    bs = changes.get("batch_size", getattr(loader, "batch_size", None))
    if bs is not None:
        args.append(f"batch_size={bs}")
    if isinstance(getattr(loader, "sampler", None), RandomSampler):
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
    snip = CATALOGUE[snippet_id]
    code = snip.fill(**params)
    keep = other_loader_arguments(loader) if loader is not None else []
    if keep and "DataLoader(" in code:
        code = f"# Keep your other DataLoader arguments as they are: {', '.join(keep)}.\n" + code
    return code


def combined(
    loader: Any,
    *,
    loader_changes: Mapping[str, Any] | None = None,
    non_blocking: bool = False,
    autocast: str | None = None,
    channels_last: bool = False,
    tf32: bool = False,
    cudnn_benchmark: bool = False,
    compile: bool = False,
    dataset_on_gpu: bool = False,
    lr_factor: int = 1,
    device_type: str = "cuda",
    speedup: str = "",
    title: str = "All measured winners together",
) -> str:
    """One training loop with every winning change, in the order they must be applied.

    ``title`` heads it: the DataLoader winners alone (``whatif.loader_combined``) are this same
    loop with only ``loader_changes`` and ``non_blocking`` set.
    """
    lines = [
        f"# {title}{': ' + speedup if speedup else ''}.",
        "import torch",
        "",
    ]
    if tf32:
        lines += [
            'torch.set_float32_matmul_precision("high")',
            "torch.backends.cudnn.allow_tf32 = True",
        ]
    if cudnn_benchmark:
        lines.append("torch.backends.cudnn.benchmark = True")
    if channels_last:
        lines.append("model = model.to(memory_format=torch.channels_last)")
    if compile:
        lines.append("model = torch.compile(model)")
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
