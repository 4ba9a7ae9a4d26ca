"""Fix snippets for what watching a run finds: input pipeline, syncs, copies, placement, precision.

Importing this module adds its snippets to ``SNIPPETS``, so ``render``/``fix`` know them.
Python templates use ``{name!r}`` where a literal goes (values stay valid Python) and plain
``{name}`` only inside comments.
"""

from __future__ import annotations

from .catalogue import SNIPPETS, Snippet

WORKLOAD_SNIPPETS = [
    Snippet(
        "loader.workers",
        "python",
        "from torch.utils.data import DataLoader\n"
        "\n"
        "# Worker processes prepare the next batches while the GPU computes the current one;\n"
        "# pinned batches copy asynchronously with .to(device, non_blocking=True).\n"
        "loader = DataLoader(\n"
        "    dataset,\n"
        "    batch_size={batch_size!r},\n"
        "    shuffle=True,\n"
        "    num_workers={workers!r},\n"
        "    pin_memory=True,\n"
        "    persistent_workers=True,\n"
        "    prefetch_factor=4,\n"
        ")\n",
        {"batch_size": 64, "workers": 8},
    ),
    Snippet(
        "loop.augment_on_gpu",
        "python",
        "# The loop body does {cpu_ms} ms of CPU tensor work per step while the GPU waits.\n"
        "# Either move the batch first and run the same transforms on the GPU ...\n"
        "x = x.to(device, non_blocking=True)\n"
        "x = augment(x)  # torch / torchvision.transforms.v2 ops accept CUDA tensors\n"
        "\n"
        "# ... or do them in Dataset.__getitem__ and let DataLoader workers run them:\n"
        "loader = DataLoader(\n"
        "    dataset, batch_size=batch_size, num_workers={workers!r}, pin_memory=True\n"
        ")\n",
        {"cpu_ms": 12.5, "workers": 8},
    ),
    Snippet(
        "batch.larger",
        "python",
        "# Each step launches the same kernels whatever the batch; at batch {batch_size} the\n"
        "# launches, not the math, set the pace. Grow the batch (and scale the learning rate),\n"
        "# the DataLoader's other arguments as they are:\n"
        "loader = DataLoader(dataset, batch_size={suggested!r})\n",
        {"batch_size": 8, "suggested": 256},
    ),
    # The same advice for a loop that makes or slices its own tensors: no DataLoader named,
    # since the script has none (the fix must fit the script).
    Snippet(
        "loop.augment_on_gpu_tensors",
        "python",
        "# The loop body does {cpu_ms} ms of CPU tensor work per step while the GPU waits.\n"
        "# Move the batch first and run the same transforms on the GPU:\n"
        "x = x.to(device, non_blocking=True)\n"
        "x = augment(x)  # torch / torchvision.transforms.v2 ops accept CUDA tensors\n",
        {"cpu_ms": 12.5},
    ),
    Snippet(
        "batch.larger_tensors",
        "python",
        "# Each step launches the same kernels whatever the batch; at batch {batch_size} the\n"
        "# launches, not the math, set the pace. Make or slice {suggested} items per step where\n"
        "# the loop builds its batch (and scale the learning rate).\n",
        {"batch_size": 8, "suggested": 256},
    ),
    Snippet(
        "copy.pin_memory_tensors",
        "python",
        "# {site}: non_blocking=True from pageable memory still blocks the host for the\n"
        "# whole copy. Pin the tensor you copy from, once, where it is made:\n"
        "x_host = x_host.pin_memory()\n",
        {"site": "train.py:17"},
    ),
    Snippet(
        "launch.compile",
        "python",
        "import torch\n"
        "\n"
        "# Fuse the many small kernels and replay the step as a CUDA graph: one launch instead\n"
        "# of about {launches} per step.\n"
        "model = torch.compile(model, mode='reduce-overhead')\n",
        {"launches": 400},
    ),
    Snippet(
        "launch.compile_mode",
        "python",
        "import torch\n"
        "\n"
        "# Compile once the model is built and on the GPU, before the training loop: the\n"
        "# first steps compile (once per process), the steps after run the fused kernels.\n"
        "# mode='reduce-overhead' also replays them as CUDA graphs: static shapes, and no\n"
        "# .item()/.cpu() inside the model. In place: the state_dict keeps its keys.\n"
        "model.compile(mode={mode!r})\n",
        {"mode": "reduce-overhead"},
    ),
    Snippet(
        "precision.autocast",
        "python",
        "import torch\n"
        "\n"
        "torch.set_float32_matmul_precision('high')  # TF32 for the matmuls left in float32\n"
        "scaler = torch.amp.GradScaler('cuda', enabled={dtype!r} == 'float16')\n"
        "for x, y in loader:\n"
        "    with torch.autocast('cuda', dtype=getattr(torch, {dtype!r})):\n"
        "        loss = loss_fn(model(x), y)\n"
        "    optimizer.zero_grad(set_to_none=True)\n"
        "    scaler.scale(loss).backward()\n"
        "    scaler.step(optimizer)\n"
        "    scaler.update()\n",
        {"dtype": "bfloat16"},
    ),
    Snippet(
        "precision.trainer",
        "python",
        "from transformers import TrainingArguments\n"
        "\n"
        "# The Trainer then runs the forward and the loss under autocast ({dtype}); keep the\n"
        "# arguments you pass today and add the switch.\n"
        "training_args = TrainingArguments(output_dir='out', bf16={bf16!r}, fp16={fp16!r})\n",
        {"dtype": "bfloat16", "bf16": True, "fp16": False},
    ),
    Snippet(
        "precision.lightning",
        "python",
        "import lightning as L\n"
        "\n"
        "# Lightning runs training_step under autocast and, for 16-mixed, scales the loss.\n"
        "trainer = L.Trainer(precision={precision!r})\n",
        {"precision": "bf16-mixed"},
    ),
    Snippet(
        "precision.accelerate",
        "python",
        "from accelerate import Accelerator\n"
        "\n"
        "# accelerator.prepare(model, ...) then runs the model's forward under autocast, and\n"
        "# accelerator.backward(loss) scales the loss for fp16.\n"
        "accelerator = Accelerator(mixed_precision={mixed_precision!r})\n",
        {"mixed_precision": "bf16"},
    ),
    Snippet(
        "memory.channels_last",
        "python",
        "import torch\n"
        "\n"
        "# Tensor Core convolutions want NHWC; with NCHW cuDNN transposes around every conv.\n"
        "model = model.to(memory_format=torch.channels_last)\n"
        "for x, y in loader:\n"
        "    x = x.to(device, non_blocking=True).to(memory_format=torch.channels_last)\n",
    ),
    Snippet(
        "sync.defer_item",
        "python",
        "import torch\n"
        "\n"
        "# {site}: `{code}` makes the host wait for the GPU every step, so the GPU\n"
        "# idles while the host prepares the next one. Keep the value on the GPU and read it\n"
        "# every few steps:\n"
        "running = torch.zeros((), device=device)\n"
        "for step, (x, y) in enumerate(loader):\n"
        "    loss = train_step(x, y)\n"
        "    running += loss.detach()\n"
        "    if step % {every!r} == 0:\n"
        "        print(f'loss {{running.item() / {every!r}:.4f}}')\n"
        "        running.zero_()\n",
        {"site": "train.py:42", "code": "total += loss.item()", "every": 50},
    ),
    Snippet(
        "copy.pin_memory",
        "python",
        "# {site}: non_blocking=True from pageable memory still blocks the host for the\n"
        "# whole copy. Copy from pinned memory: let the DataLoader pin the batches ...\n"
        "loader = DataLoader(dataset, batch_size=batch_size, num_workers=4, pin_memory=True)\n"
        "for x, y in loader:\n"
        "    x = x.to(device, non_blocking=True)\n"
        "\n"
        "# ... or pin a tensor you copy from again and again, once:\n"
        "x_host = x_host.pin_memory()\n",
        {"site": "train.py:17"},
    ),
    Snippet(
        "placement.to_device",
        "python",
        "import torch\n"
        "\n"
        "device = torch.device({device!r})\n"
        "model = model.to(device)  # before creating the optimizer\n"
        "optimizer = torch.optim.AdamW(model.parameters())\n"
        "for x, y in loader:\n"
        "    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)\n",
        {"device": "cuda"},
    ),
    Snippet(
        "placement.one_device",
        "python",
        "# Parameters on {devices}: every step moves activations between them.\n"
        "model = model.to(device)\n"
        "x = x.to(device, non_blocking=True)\n",
        {"devices": "cpu, cuda"},
    ),
    Snippet(
        "placement.move_module",
        "python",
        "# {what}\n"
        "# stays on the CPU while the rest of the model is on {device_type}. Move it where it is\n"
        "# built, before the optimizer is built (an optimizer built earlier must be built again\n"
        "# to update the moved parameters), and drop the copy to the CPU that feeds it{copy}.\n"
        "{module} = {module}.to({device})\n",
        {
            "what": "head (Sequential, 33.6 M parameters)",
            "device_type": "cuda",
            "copy": ": feats.cpu()",
            "module": "head",
            "device": "dev",
        },
    ),
    Snippet(
        "parallel.ddp",
        "python",
        "# DataParallel copies the model to each GPU every step and runs them from one\n"
        "# Python thread. On one GPU, drop the wrapper; on several, use DDP, one process per\n"
        "# GPU (torchrun --nproc-per-node={gpus} train.py):\n"
        "import os\n"
        "\n"
        "import torch\n"
        "import torch.distributed as dist\n"
        "\n"
        "dist.init_process_group('nccl')\n"
        "rank = int(os.environ['LOCAL_RANK'])\n"
        "torch.cuda.set_device(rank)\n"
        "model = torch.nn.parallel.DistributedDataParallel(model.to(rank), device_ids=[rank])\n"
        "sampler = torch.utils.data.distributed.DistributedSampler(dataset)\n",
        {"gpus": 1},
    ),
    Snippet(
        "memory.larger_batch",
        "python",
        "# The step peaked at {peak_gib} GiB of {capacity_gib} GiB: room for a batch about\n"
        "# {factor}x larger, which keeps the GPU busier per launch (the DataLoader's other\n"
        "# arguments as they are):\n"
        "loader = DataLoader(dataset, batch_size={suggested!r})\n",
        {"peak_gib": 10.5, "capacity_gib": 80.0, "factor": 4, "suggested": 256},
    ),
    Snippet(
        "memory.larger_batch_tensors",
        "python",
        "# The step peaked at {peak_gib} GiB of {capacity_gib} GiB: room for a batch about\n"
        "# {factor}x larger ({suggested} items), which keeps the GPU busier per launch. Make or\n"
        "# slice that many items per step where the loop builds its batch.\n",
        {"peak_gib": 10.5, "capacity_gib": 80.0, "factor": 4, "suggested": 256},
    ),
    Snippet(
        "memory.reduce",
        "python",
        "import os\n"
        "\n"
        "import torch\n"
        "\n"
        "# Peak {peak_gib} GiB of {capacity_gib} GiB.\n"
        "# Less fragmentation (set before CUDA starts):\n"
        "os.environ.setdefault('PYTORCH_CUDA_ALLOC_CONF', 'expandable_segments:True')\n"
        "# Half the activation memory with autocast; recompute activations instead of storing:\n"
        "with torch.autocast('cuda', dtype=torch.bfloat16):\n"
        "    out = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)\n",
        {"peak_gib": 76.0, "capacity_gib": 80.0},
    ),
    Snippet(
        "infer.batch_requests",
        "python",
        "import torch\n"
        "\n"
        "# One request per forward leaves the GPU waiting on launches. Group requests:\n"
        "with torch.inference_mode():\n"
        "    for i in range(0, len(requests), {batch!r}):\n"
        "        batch = torch.stack(requests[i : i + {batch!r}]).to(device, non_blocking=True)\n"
        "        outputs = model(batch)\n",
        {"batch": 64},
    ),
    Snippet(
        "phase.eval_metrics_on_gpu",
        "python",
        "import torch\n"
        "\n"
        "# {site}: `{code}` reads a value back every batch of the evaluation, and the\n"
        "# host waits for the GPU each time. Accumulate on the GPU and read once, at the end:\n"
        "def evaluate(model, val_loader, loss_fn, device):\n"
        "    model.eval()\n"
        "    total_loss = torch.zeros((), device=device)\n"
        "    correct = torch.zeros((), device=device, dtype=torch.long)\n"
        "    seen = 0\n"
        "    with torch.inference_mode():\n"
        "        for x, y in val_loader:\n"
        "            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)\n"
        "            out = model(x)\n"
        "            total_loss += loss_fn(out, y) * len(y)\n"
        "            correct += (out.argmax(-1) == y).sum()\n"
        "            seen += len(y)\n"
        "    model.train()\n"
        "    return total_loss.item() / seen, correct.item() / seen  # the one read-back\n"
        "\n"
        "\n"
        "# It takes {share}% of the run. Evaluating every {twice} steps instead of {period}\n"
        "# halves that, for a validation curve with half the points:\n"
        "EVAL_EVERY = {twice!r}\n",
        {
            "site": "train.py:88",
            "code": "correct += (pred == y).sum().item()",
            "period": 50,
            "twice": 100,
            "share": 30,
        },
    ),
    Snippet(
        "phase.eval_less_often",
        "python",
        "# {site}: the evaluation takes {share}% of the run, every {period} steps.\n"
        "# Every {twice} steps instead halves that, for a validation curve with half the points;\n"
        "# a fixed subset of the validation set cuts each evaluation instead.\n"
        "EVAL_EVERY = {twice!r}\n"
        "for step, batch in enumerate(train_loader):\n"
        "    train_step(batch)\n"
        "    if (step + 1) % EVAL_EVERY == 0:\n"
        "        evaluate(model, val_loader)\n",
        {"site": "train.py:88", "period": 50, "twice": 100, "share": 30},
    ),
    Snippet(
        "phase.keep_workers",
        "python",
        "from torch.utils.data import DataLoader\n"
        "\n"
        "# {site}: every {period} steps the DataLoader starts its {workers} worker processes\n"
        "# anew ({ms} ms, {share}% of the run). Kept alive, they start once; a worker_init_fn\n"
        "# then runs once per worker, not once per epoch.\n"
        "loader = DataLoader(\n"
        "    dataset,\n"
        "    batch_size=64,\n"
        "    shuffle=True,\n"
        "    num_workers={workers!r},\n"
        "    persistent_workers=True,\n"
        ")\n",
        {"site": "train.py:40", "period": 24, "workers": 8, "ms": 900, "share": 40},
    ),
    Snippet(
        "phase.checkpoint_less_often",
        "python",
        "import threading\n"
        "\n"
        "import torch\n"
        "\n"
        "# {site}: saving takes {ms} ms every {period} steps ({share}% of the run).\n"
        "# Save every {twice} steps instead (a crash then loses up to that many steps of work),\n"
        "# and write from a thread: only the copy to the host holds up training.\n"
        "SAVE_EVERY = {twice!r}\n"
        "\n"
        "\n"
        "def save_in_background(model, path):\n"
        "    state = {{k: v.detach().to('cpu', copy=True)\n"
        "             for k, v in model.state_dict().items()}}\n"
        "    writer = threading.Thread(target=torch.save, args=(state, path))\n"
        "    writer.start()\n"
        "    return writer  # join() it before the next save and at the end of training\n",
        {"site": "train.py:120", "ms": 850, "period": 100, "twice": 200, "share": 12},
    ),
    Snippet(
        "optim.fused",
        "python",
        "import torch\n"
        "\n"
        "# {site}: torch.optim.{name} updates {tensors} parameter tensors with several kernel\n"
        "# launches each; fused=True runs the whole update as a few kernels (CUDA, floating-point\n"
        "# parameters; torch >= 2.4 for SGD). Same update, same results up to rounding.\n"
        "optimizer_class = getattr(torch.optim, {name!r})\n"
        "optimizer = optimizer_class(model.parameters(), lr=1e-3, fused=True)\n",
        {"site": "train.py:30", "name": "AdamW", "tensors": 800},
    ),
    Snippet(
        "precision.float32",
        "python",
        "import numpy as np\n"
        "import torch\n"
        "\n"
        "# {site}: the model and its inputs are float64. float64 never runs on TF32 or bf16\n"
        "# Tensor Cores (autocast leaves float64 ops alone), and outside data-center GPUs its\n"
        "# rate is 1/32-1/64 of float32's. Make both float32 where they are made:\n"
        "model = model.float()  # instead of .double() / .to(torch.float64)\n"
        "x = torch.from_numpy(array.astype(np.float32))  # or torch.from_numpy(array).float()\n"
        "# ... then run the matmuls in bf16 on Tensor Cores:\n"
        'with torch.autocast("cuda", dtype=torch.bfloat16):\n'
        "    out = model(x)\n",
        {"site": "train.py:12"},
    ),
    Snippet(
        "infer.inference_mode",
        "python",
        "import torch\n"
        "\n"
        "# Without it every forward records autograd history it never uses.\n"
        "model.eval()\n"
        "with torch.inference_mode():\n"
        "    outputs = model(batch)\n",
    ),
]

for _s in WORKLOAD_SNIPPETS:
    SNIPPETS.setdefault(_s.id, _s)
