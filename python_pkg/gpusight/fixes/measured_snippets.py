"""The measured what-if's snippets (``gpusight.diagnose``): one template per change, filled with the
measured winners (``whatif/findings.py``). Every filled template is valid Python (the tests
``compile()`` each one and run those that run on a CPU) and names only what a training script
has: ``torch``, ``model``, ``optimizer``, ``loss_fn``, ``dataset``, ``loader``, ``device`` (and
``num_epochs`` for the GPU-resident dataset). ``{loader_args}`` is the user's DataLoader arguments
with the winners' (``whatif/snippets.loader_args``): code, not a literal.
"""

from __future__ import annotations

from .catalogue import SNIPPETS, Snippet

_STEP = "    optimizer.zero_grad(set_to_none=True)\n    loss.backward()\n    optimizer.step()\n"
_LOADER_EXAMPLE = {"loader_args": "dataset, batch_size=8, shuffle=True", "speedup": "1.00x"}
_LOADER_ONLY = (
    "# Measured: {speedup} faster per step ({what}).\n"
    "loader = torch.utils.data.DataLoader({loader_args})\n"
)

MEASURED_SNIPPETS = [
    Snippet(
        "whatif.num_workers",
        "python",
        _LOADER_ONLY,
        {
            **_LOADER_EXAMPLE,
            "what": "num_workers sweep 2: 1.00x",
        },
        finding_id="load.input_bound",
        text="Load batches in worker processes, so the next batch is ready when the step ends.",
        needs=("torch", "dataset"),
    ),
    Snippet(
        "whatif.persistent_workers",
        "python",
        _LOADER_ONLY,
        {
            **_LOADER_EXAMPLE,
            "what": "workers kept across epochs",
        },
        finding_id="load.input_bound",
        text="Keep the worker processes alive between epochs instead of starting them again.",
        needs=("torch", "dataset"),
    ),
    Snippet(
        "whatif.prefetch_factor",
        "python",
        _LOADER_ONLY,
        {
            **_LOADER_EXAMPLE,
            "what": "4 batches ahead per worker",
        },
        finding_id="load.input_bound",
        text="Let each worker prepare more batches ahead, to ride out slow ones.",
        needs=("torch", "dataset"),
    ),
    Snippet(
        "whatif.pin_memory",
        "python",
        "# Measured: {speedup} faster per step. A non_blocking copy from pageable memory still\n"
        "# blocks the host for the whole copy; from pinned memory it overlaps with compute.\n"
        "loader = torch.utils.data.DataLoader({loader_args})\n"
        "for inputs, targets in loader:\n"
        "    inputs = inputs.to(device, non_blocking=True)\n"
        "    targets = targets.to(device, non_blocking=True)\n"
        "    loss = loss_fn(model(inputs), targets)\n" + _STEP,
        dict(_LOADER_EXAMPLE),
        finding_id="code.pageable_copy",
        text="Pin batches in page-locked memory and copy them without blocking the host.",
        needs=("torch", "dataset", "device", "model", "loss_fn", "optimizer"),
    ),
    Snippet(
        "whatif.batch_size",
        "python",
        "# Measured: {speedup} more samples per second at batch_size={batch_size}\n"
        "# ({factor} x yours).\n"
        "# A larger batch changes the optimisation: scale the learning rate with it (linear\n"
        "# scaling rule, with some warm-up steps) and check the loss curve still matches.\n"
        "loader = torch.utils.data.DataLoader({loader_args})\n"
        "for group in optimizer.param_groups:  # run once\n"
        "    group['lr'] = group['lr'] * {factor!r}\n",
        {
            **_LOADER_EXAMPLE,
            "loader_args": "dataset, batch_size=16, shuffle=True",
            "batch_size": 16,
            "factor": 2,
        },
        finding_id="load.small_batch",
        text="Larger batches: more samples per step, fewer launches per sample.",
        needs=("torch", "dataset", "optimizer"),
    ),
    Snippet(
        "whatif.autocast_bf16",
        "python",
        "# Measured: {speedup} faster per step with bf16 autocast (weights stay float32).\n"
        "for inputs, targets in loader:\n"
        "    inputs, targets = inputs.to(device), targets.to(device)\n"
        "    with torch.autocast(device_type={device_type!r}, dtype=torch.bfloat16):\n"
        "        loss = loss_fn(model(inputs), targets)\n" + _STEP,
        {"speedup": "1.00x", "device_type": "cuda"},
        finding_id="load.amp_unused",
        text="Run the forward pass and the loss in bfloat16 autocast (tensor cores).",
        needs=("torch", "loader", "device", "model", "loss_fn", "optimizer"),
    ),
    Snippet(
        "whatif.autocast_fp16",
        "python",
        "# Measured: {speedup} faster per step with fp16 autocast (this GPU has no bf16).\n"
        "scaler = torch.amp.GradScaler({device_type!r})\n"
        "for inputs, targets in loader:\n"
        "    inputs, targets = inputs.to(device), targets.to(device)\n"
        "    with torch.autocast(device_type={device_type!r}, dtype=torch.float16):\n"
        "        loss = loss_fn(model(inputs), targets)\n"
        "    optimizer.zero_grad(set_to_none=True)\n"
        "    scaler.scale(loss).backward()\n"
        "    scaler.step(optimizer)\n"
        "    scaler.update()\n",
        {"speedup": "1.00x", "device_type": "cuda"},
        finding_id="load.amp_unused",
        text="Run the forward pass in float16 autocast, with a GradScaler against underflow.",
        needs=("torch", "loader", "device", "model", "loss_fn", "optimizer"),
    ),
    Snippet(
        "whatif.channels_last",
        "python",
        "# Measured: {speedup} faster per step in channels_last.\n"
        "model = model.to(memory_format=torch.channels_last)\n"
        "for inputs, targets in loader:\n"
        "    inputs = inputs.to(device, memory_format=torch.channels_last)\n"
        "    targets = targets.to(device)\n"
        "    loss = loss_fn(model(inputs), targets)\n" + _STEP,
        {"speedup": "1.00x"},
        finding_id="load.channels_last",
        text="Keep the model and image batches in channels_last (NHWC) memory format.",
        needs=("torch", "loader", "device", "model", "loss_fn", "optimizer"),
    ),
    Snippet(
        "whatif.tf32",
        "python",
        "# Measured: {speedup} faster per step. TF32 keeps float32's range with a 10-bit\n"
        "# mantissa; most training is unaffected, check yours if it is precision-sensitive.\n"
        'torch.set_float32_matmul_precision("high")\n'
        "torch.backends.cudnn.allow_tf32 = True\n",
        {"speedup": "1.00x"},
        finding_id="cfg.tf32_disabled",
        text="Let float32 matmuls and convolutions use TF32 tensor cores.",
    ),
    Snippet(
        "whatif.cudnn_benchmark",
        "python",
        "# Measured: {speedup} faster per step. Best when input shapes do not change.\n"
        "torch.backends.cudnn.benchmark = True\n",
        {"speedup": "1.00x"},
        finding_id="cfg.cudnn_benchmark_off",
        text="Let cudnn time its convolution algorithms once and keep the fastest.",
    ),
    Snippet(
        "whatif.dataset_on_gpu",
        "python",
        "# Measured: {speedup} faster per step. The dataset ({dataset_gb} GB) fits in free GPU\n"
        "# memory ({free_gb} GB). Random per-item augmentations must then run on the GPU too.\n"
        "items = [dataset[i] for i in range(len(dataset))]\n"
        "xs = torch.stack([torch.as_tensor(x) for x, _ in items]).to(device)\n"
        "ys = torch.stack([torch.as_tensor(y) for _, y in items]).to(device)\n"
        "del items\n"
        "for epoch in range(num_epochs):\n"
        "    order = torch.randperm(len(xs), device=device)\n"
        "    for start in range(0, len(xs), {batch_size!r}):\n"
        "        idx = order[start : start + {batch_size!r}]\n"
        "        inputs, targets = xs[idx], ys[idx]\n"
        "        loss = loss_fn(model(inputs), targets)\n"
        "        optimizer.zero_grad(set_to_none=True)\n"
        "        loss.backward()\n"
        "        optimizer.step()\n",
        {"speedup": "1.00x", "dataset_gb": 0.1, "free_gb": 1.0, "batch_size": 8},
        finding_id="load.memory_headroom",
        text="Keep the whole dataset on the GPU and index batches there.",
        needs=("torch", "dataset", "device", "model", "loss_fn", "optimizer", "num_epochs"),
    ),
    Snippet(
        "whatif.compile",
        "python",
        "# Measured: {speedup} faster per step, after {compile_s} s of compiling (once).\n"
        "model = torch.compile(model)\n",
        {"speedup": "1.00x", "compile_s": 0.0},
        finding_id="load.launch_bound",
        text="Compile the model: fused kernels, fewer launches per step.",
        needs=("torch", "model"),
        cpu_runnable=False,
    ),
]

for _s in MEASURED_SNIPPETS:
    SNIPPETS.setdefault(_s.id, _s)
