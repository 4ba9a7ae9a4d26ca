"""Data-parallel training of an MLP on every visible GPU: DDP (one process per GPU, under
torchrun) or ``nn.DataParallel`` (one process driving all GPUs). Synthetic data.

    torchrun --standalone --nproc-per-node=2 benchmarks/multi/train_mlp.py --mode ddp
    python benchmarks/multi/train_mlp.py --mode dp

The same global batch either way (DDP: split across the ranks), bf16 autocast, fused AdamW.
``--straggle-ms`` plants a straggler: rank 1 sleeps that long on the host before each forward.
The script times itself with CUDA events at each step's end (the step period on the GPU's own
stream, no host sync inside the loop) and prints ``SCENARIO_RESULT {json}`` from rank 0 (every
rank with ``--all-ranks``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("--mode", choices=("ddp", "dp"), required=True)
    p.add_argument("--iters", type=int, default=40)
    p.add_argument("--skip", type=int, default=12, help="steps the script's own timing skips")
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--batch", type=int, default=2048, help="global batch")
    p.add_argument("--straggle-ms", type=float, default=0.0)
    p.add_argument("--all-ranks", action="store_true")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: gloo, a dry run")
    return p.parse_args(argv)


def mlp(width: int, layers: int) -> nn.Module:
    blocks: list[nn.Module] = []
    for _ in range(layers):
        blocks += [nn.Linear(width, width), nn.GELU()]
    return nn.Sequential(*blocks, nn.Linear(width, 10))


class Mark:
    """A step's end: a CUDA event on the GPU (its stream's clock), the host clock on the CPU."""

    def __init__(self, gpu: bool) -> None:
        self.event = torch.cuda.Event(enable_timing=True) if gpu else None
        self.t = 0.0

    def record(self) -> None:
        if self.event is not None:
            self.event.record()
        else:
            self.t = time.perf_counter()

    def ms_until(self, other: Mark) -> float:
        if self.event is not None and other.event is not None:
            return float(self.event.elapsed_time(other.event))
        return (other.t - self.t) * 1000.0


def main(argv: list[str] | None = None) -> dict[str, object]:
    args = parse_args(argv)
    torch.manual_seed(0)
    rank, world = 0, 1
    dist = None
    gpu = args.device == "cuda"
    if args.mode == "ddp":
        import torch.distributed as dist

        local = int(os.environ["LOCAL_RANK"])
        if gpu:
            torch.cuda.set_device(local)
        dist.init_process_group("nccl" if gpu else "gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
        dev = torch.device("cuda", local) if gpu else torch.device("cpu")
        model: nn.Module = nn.parallel.DistributedDataParallel(
            mlp(args.width, args.layers).to(dev), device_ids=[local] if gpu else None
        )
        batch = args.batch // world
    else:
        dev = torch.device("cuda", 0) if gpu else torch.device("cpu")
        model = nn.DataParallel(mlp(args.width, args.layers).to(dev))
        world = torch.cuda.device_count() if gpu else 1
        batch = args.batch
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=gpu)
    x = torch.randn(batch, args.width, device=dev)
    y = torch.randint(0, 10, (batch,), device=dev)
    ends = [Mark(gpu) for _ in range(args.iters)]
    done = 0
    try:
        for i in range(args.iters):
            if args.straggle_ms and rank == 1:
                time.sleep(args.straggle_ms / 1000.0)  # the planted straggler
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=gpu):
                loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            ends[i].record()
            done = i + 1
    finally:
        if gpu:
            torch.cuda.synchronize(dev)
        times = [ends[i].ms_until(ends[i + 1]) for i in range(done - 1)]
        timed = times[args.skip :] or times
        median = statistics.median(timed) if timed else None
        result: dict[str, object] = {
            "mode": args.mode,
            "rank": rank,
            "world_size": world,
            "global_batch": args.batch,
            "steps": done,
            "median_step_ms": round(median, 4) if median else None,
            "samples_per_s": round(args.batch / median * 1000, 1) if median else None,
            "straggle_ms": args.straggle_ms,
        }
        if rank == 0 or args.all_ranks:
            print("SCENARIO_RESULT " + json.dumps(result), flush=True)
        if dist is not None and dist.is_initialized():
            dist.destroy_process_group()
    return result


if __name__ == "__main__":
    main()
