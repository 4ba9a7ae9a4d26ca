"""Fix snippets for several GPUs and for inference serving: idle GPUs, stragglers, collectives
that do not overlap, a slow NCCL link, and one request per forward.

Importing this module adds its snippets to ``SNIPPETS``, so ``render``/``fix`` know them.
Python templates use ``{name!r}`` where a literal goes and plain ``{name}`` only inside comments.
"""

from __future__ import annotations

from .catalogue import SNIPPETS, Snippet

SCALING_SNIPPETS = [
    Snippet(
        "dist.use_all_gpus",
        "python",
        "# {idle} of {gpus} GPUs on this machine did no work. Start one process per GPU:\n"
        "#   torchrun --nproc-per-node={gpus} train.py\n"
        "# and give each process its own GPU and its own share of the data:\n"
        "import os\n"
        "\n"
        "import torch\n"
        "import torch.distributed as dist\n"
        "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "from torch.utils.data import DataLoader\n"
        "from torch.utils.data.distributed import DistributedSampler\n"
        "\n"
        "local_rank = int(os.environ['LOCAL_RANK'])\n"
        "torch.cuda.set_device(local_rank)  # without it every process lands on GPU 0\n"
        "dist.init_process_group('nccl')\n"
        "model = DDP(model.to(local_rank), device_ids=[local_rank])\n"
        "sampler = DistributedSampler(dataset)\n"
        "loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=4,\n"
        "                    pin_memory=True)\n"
        "for epoch in range(epochs):\n"
        "    sampler.set_epoch(epoch)  # a different shuffle each epoch\n"
        "    for x, y in loader:\n"
        "        ...\n",
        {"idle": 1, "gpus": 2},
    ),
    Snippet(
        "dist.balance",
        "python",
        "# Rank {rank} spends {extra_ms} ms more per step on its own work than the median\n"
        "# rank, and every other rank waits for it inside the gradient all-reduce.\n"
        "# Give every rank the same work: equal shards and fixed shapes per step ...\n"
        "from torch.utils.data.distributed import DistributedSampler\n"
        "\n"
        "sampler = DistributedSampler(dataset, drop_last=True)  # equal batches per rank\n"
        "# ... keep rank-0-only work (logging, checkpoints, evaluation) out of the step or\n"
        "# every few hundred steps, and give each rank the same number of loader workers.\n"
        "if step % 500 == 0 and dist.get_rank() == 0:\n"
        "    save_checkpoint(model)\n",
        {"rank": 1, "extra_ms": 12.5},
    ),
    Snippet(
        "dist.overlap",
        "python",
        "# Collectives left {exposed_ms} ms per step with the GPU doing nothing else.\n"
        "# DDP overlaps the all-reduce of each gradient bucket with the rest of backward:\n"
        "import contextlib\n"
        "\n"
        "from torch.distributed.algorithms.ddp_comm_hooks import default_hooks\n"
        "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "\n"
        "model = DDP(\n"
        "    model,\n"
        "    device_ids=[local_rank],\n"
        "    bucket_cap_mb=50,  # fewer, larger all-reduces (default 25)\n"
        "    gradient_as_bucket_view=True,  # no copy into the buckets\n"
        "    static_graph=True,  # the same graph every step: buckets fixed after step 1\n"
        ")\n"
        "# Half the bytes on the wire (gradients are averaged in bf16):\n"
        "model.register_comm_hook(None, default_hooks.bf16_compress_hook)\n"
        "# Or all-reduce less often: accumulate {accumulate} micro-batches per optimizer step.\n"
        "for i, (x, y) in enumerate(loader):\n"
        "    last = (i + 1) % {accumulate!r} == 0\n"
        "    ctx = contextlib.nullcontext() if last else model.no_sync()\n"
        "    with ctx:\n"
        "        loss_fn(model(x), y).backward()\n"
        "    if last:\n"
        "        optimizer.step()\n"
        "        optimizer.zero_grad(set_to_none=True)\n",
        {"exposed_ms": 8.0, "accumulate": 4},
    ),
    Snippet(
        "dist.nccl_check",
        "shell",
        "# All-reduce reached {busbw} GB/s bus bandwidth against {ceiling} GB/s for the link.\n"
        "nvidia-smi topo -m          # NV# between the GPUs means NVLink; PIX/PHB/SYS mean PCIe\n"
        "nvidia-smi nvlink --status  # every link up, at full speed?\n"
        "# Which transport NCCL picked (P2P/NVL, P2P/IPC, SHM or NET) and why:\n"
        "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH torchrun --nproc-per-node={gpus} train.py\n"
        "# NCCL_P2P_DISABLE=1 or NCCL_SHM_DISABLE=1 left set in the environment forces a\n"
        "# slower path:\n"
        "env | grep '^NCCL_'\n",
        {"busbw": 40.0, "ceiling": 450.0, "gpus": 2},
    ),
    Snippet(
        "infer.dynamic_batching",
        "python",
        "import asyncio\n"
        "\n"
        "import torch\n"
        "\n"
        "# One request per forward ran at {single} samples/s; batches of {batch} at {batched}.\n"
        "# A micro-batcher: requests wait at most max_wait_s to share one forward.\n"
        "\n"
        "\n"
        "class MicroBatcher:\n"
        "    def __init__(self, model, max_batch={batch!r}, max_wait_s={wait_s!r}):\n"
        "        self.model = model\n"
        "        self.max_batch = max_batch\n"
        "        self.max_wait_s = max_wait_s\n"
        "        self.queue = asyncio.Queue()\n"
        "\n"
        "    async def infer(self, x):\n"
        "        done = asyncio.get_running_loop().create_future()\n"
        "        await self.queue.put((x, done))\n"
        "        return await done\n"
        "\n"
        "    async def run(self):\n"
        "        loop = asyncio.get_running_loop()\n"
        "        while True:\n"
        "            items = [await self.queue.get()]\n"
        "            deadline = loop.time() + self.max_wait_s\n"
        "            while len(items) < self.max_batch:\n"
        "                left = deadline - loop.time()\n"
        "                if left <= 0:\n"
        "                    break\n"
        "                try:\n"
        "                    items.append(await asyncio.wait_for(self.queue.get(), left))\n"
        "                except asyncio.TimeoutError:\n"
        "                    break\n"
        "            device = next(self.model.parameters()).device\n"
        "            batch = torch.stack([x for x, _ in items]).to(device, non_blocking=True)\n"
        "            with torch.inference_mode():\n"
        "                out = self.model(batch).cpu()\n"
        "            for (_, done), y in zip(items, out):\n"
        "                done.set_result(y)\n"
        "\n"
        "\n"
        "# batcher = MicroBatcher(model.eval())\n"
        "# asyncio.create_task(batcher.run())   # once, in the server's event loop\n"
        "# y = await batcher.infer(x)            # in each request handler\n",
        {"single": 850.0, "batch": 64, "batched": 21000.0, "wait_s": 0.005},
    ),
    Snippet(
        "infer.autocast",
        "python",
        "import torch\n"
        "\n"
        "# bf16 on Tensor Cores: measured {speedup}x faster per forward here. Check that the\n"
        "# outputs stay within your tolerance before serving them.\n"
        "model.eval()\n"
        "with torch.inference_mode(), torch.autocast('cuda', dtype=torch.bfloat16):\n"
        "    outputs = model(batch)\n",
        {"speedup": 1.8},
    ),
    Snippet(
        "infer.cuda_graphs",
        "python",
        "import torch\n"
        "\n"
        "# Replaying the forward as one CUDA graph: measured {speedup}x faster here (the\n"
        "# launches, not the math, set the pace). Static shapes: one graph per batch size.\n"
        "static_x = torch.zeros({shape}, device='cuda')  # the shape of one batch\n"
        "stream = torch.cuda.Stream()\n"
        "stream.wait_stream(torch.cuda.current_stream())\n"
        "with torch.cuda.stream(stream), torch.no_grad():\n"
        "    for _ in range(3):  # warm up outside the graph\n"
        "        model(static_x)\n"
        "torch.cuda.current_stream().wait_stream(stream)\n"
        "graph = torch.cuda.CUDAGraph()\n"
        "with torch.no_grad(), torch.cuda.graph(graph):\n"
        "    static_y = model(static_x)\n"
        "\n"
        "\n"
        "def infer(x):\n"
        "    static_x.copy_(x)\n"
        "    graph.replay()\n"
        "    return static_y.clone()\n"
        "\n"
        "\n"
        "# Or let torch.compile capture it: model = torch.compile(model, mode='reduce-overhead')\n",
        {"speedup": 2.5, "shape": "(1, 3, 224, 224)"},
    ),
]

for _s in SCALING_SNIPPETS:
    SNIPPETS.setdefault(_s.id, _s)
