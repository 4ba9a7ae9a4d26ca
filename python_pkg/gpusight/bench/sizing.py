"""Problem sizes chosen from the device: big enough to fill the chip and defeat the L2 cache,
never larger than its free memory allows. Pure functions of :class:`DeviceLimits`, so that they
are tested without a GPU; :func:`device_limits` reads the limits off a real device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

# When the device does not say, assume an L2 as large as today's largest (Blackwell: ~126 MB),
# so that rotation errs towards more input sets, not fewer.
DEFAULT_L2_BYTES = 128 * MiB

# cuBLAS tiles of 128x128 (or larger): an n x n output has (n/128)^2 of them. Two full waves
# over the multiprocessors keep the chip filled past the tail of the last wave.
_TILE = 128
_WAVES = 2


@dataclass(frozen=True)
class DeviceLimits:
    sm_count: int
    free_bytes: int
    total_bytes: int
    l2_bytes: int = DEFAULT_L2_BYTES


def device_limits(device: Any = None) -> DeviceLimits:
    """SM count, free/total memory (``torch.cuda.mem_get_info``) and L2 size of a CUDA device."""
    import torch

    props = torch.cuda.get_device_properties(device)
    free, total = torch.cuda.mem_get_info(device)
    l2 = int(getattr(props, "L2_cache_size", 0) or 0)
    return DeviceLimits(
        sm_count=int(props.multi_processor_count),
        free_bytes=int(free),
        total_bytes=int(total),
        l2_bytes=l2 if l2 > 0 else DEFAULT_L2_BYTES,
    )


def rotation_sets(set_bytes: int, l2_bytes: int, *, factor: float = 2.0, max_sets: int = 8) -> int:
    """How many input sets to rotate among so that together they exceed ``factor`` x L2.

    One set already that large needs no rotation (1). Capped at ``max_sets``.
    """
    if set_bytes <= 0:
        raise ValueError("set_bytes must be positive")
    need = math.ceil(factor * max(l2_bytes, 0) / set_bytes)
    return max(1, min(max_sets, need))


@dataclass(frozen=True)
class MatmulSize:
    n: int
    sets: int
    bytes_needed: int
    fills_chip: bool


def matmul_size(
    limits: DeviceLimits,
    in_bytes: int,
    out_bytes: int | None = None,
    *,
    largest: int = 8192,
    smallest: int = 1024,
    mem_fraction: float = 0.25,
) -> MatmulSize | None:
    """Square size n (a power of two) and number of rotated input sets for an n x n x n product.

    Big GPUs (>= 64 SMs) get ``largest`` (8192: 1.1 TFLOP a product); smaller ones half of it.
    n is halved until the inputs of every set plus one output fit in ``mem_fraction`` of the
    free memory. None when even ``smallest`` does not fit.
    """
    out_bytes = in_bytes if out_bytes is None else out_bytes
    n = largest if limits.sm_count >= 64 else largest // 2
    budget = limits.free_bytes * mem_fraction
    while n >= smallest:
        set_bytes = 2 * n * n * in_bytes
        sets = rotation_sets(set_bytes, limits.l2_bytes)
        needed = sets * set_bytes + n * n * out_bytes
        if needed <= budget:
            fills = (n // _TILE) ** 2 >= _WAVES * max(limits.sm_count, 1)
            return MatmulSize(n=n, sets=sets, bytes_needed=needed, fills_chip=fills)
        n //= 2
    return None


def copy_sweep(
    free_device_bytes: int,
    free_host_bytes: int | None,
    *,
    lo: int = 64 * KiB,
    hi: int = 1 * GiB,
    step: int = 4,
    mem_fraction: float = 0.25,
) -> list[int]:
    """Copy sizes lo, lo*step, ... up to hi, capped so that one buffer of the largest size fits in
    ``mem_fraction`` of the free device memory and of the available host memory (the sweep
    holds one pageable and one pinned host buffer of that size)."""
    if lo <= 0 or step < 2 or hi < lo:
        raise ValueError("need 0 < lo <= hi and step >= 2")
    cap = int(free_device_bytes * mem_fraction)
    if free_host_bytes is not None:
        cap = min(cap, int(free_host_bytes * mem_fraction / 2))
    sizes: list[int] = []
    size = lo
    while size <= min(hi, cap):
        sizes.append(size)
        size *= step
    return sizes


def d2d_bytes(limits: DeviceLimits, *, largest: int = 1 * GiB, mem_fraction: float = 0.2) -> int:
    """Size of each of the two buffers of a device-to-device copy: ``largest`` (1 GiB, 20x an
    H200's L2), halved until both fit in ``mem_fraction`` of the free memory."""
    cap = int(limits.free_bytes * mem_fraction / 2)
    size = largest
    while size > cap and size > MiB:
        size //= 2
    return max(min(size, cap), 0)
