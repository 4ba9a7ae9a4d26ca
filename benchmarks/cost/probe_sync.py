"""Per-call host cost of what the watch adds around a copy and a sync, on a CUDA device:
``Tensor.is_pinned()`` of a pageable tensor, and a ``.cpu()`` with torch's sync-debug mode off,
on "warn" (Python's default warning path, the warning ignored), and on "warn" inside a watch.

    PYTHONPATH=python_pkg python3 benchmarks/watch_cost.py --method probe-sync
"""

from __future__ import annotations

import time
import warnings

import torch
from harness.cli import Parser


def per_call_us(fn: object, n: int = 20000) -> float:
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()  # type: ignore[operator]
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
    return best


def main(argv: list[str] | None = None) -> int:
    Parser(__doc__).parse_args(argv)
    host = torch.randn(64, 512)
    dev = torch.ones(4, device="cuda")
    torch.cuda.synchronize()
    print(f"is_pinned (pageable):  {per_call_us(host.is_pinned):.2f} us")
    print(f"to(cuda) 128 KiB:      {per_call_us(lambda: host.to('cuda'), 5000):.2f} us")
    print(f".cpu() sync mode off:  {per_call_us(dev.cpu):.2f} us")
    torch.cuda.set_sync_debug_mode(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        print(f".cpu() warn, ignored:  {per_call_us(dev.cpu):.2f} us")
    torch.cuda.set_sync_debug_mode(0)
    import gpusight

    # The watch turns sync-debug mode on itself (CUDA is up) and puts it back.
    with gpusight.watch(warmup=0, profile_steps=0, stop_after_steps=False):
        print(f".cpu() in a watch:     {per_call_us(dev.cpu, 5000):.2f} us")
        print(f"to(cuda) in a watch:   {per_call_us(lambda: host.to('cuda'), 5000):.2f} us")
    return 0
