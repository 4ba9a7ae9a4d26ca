"""Which device the benchmarks run on, why they cannot, and cleaning up after them."""

from __future__ import annotations

import math
from typing import Any

from ..report import Benchmark

NO_CUDA = "no CUDA device"


def cuda_unavailable_reason() -> str | None:
    """None when a CUDA device can be used; otherwise why not, starting with 'no CUDA device'
    or 'torch is not installed'."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if getattr(torch.version, "cuda", None) is None:
        return f"{NO_CUDA}: torch {torch.__version__} is a build without CUDA"
    try:
        available = torch.cuda.is_available()
    except Exception as exc:  # a broken driver can raise here rather than return False
        return f"{NO_CUDA}: {exc}"
    if not available:
        return f"{NO_CUDA}: torch.cuda.is_available() is False (driver missing or no GPU visible)"
    return None


def resolve_device(device: int | str | Any | None) -> int:
    """A CUDA device index from None (the current device), an int, 'cuda:N' or a torch.device."""
    import torch

    if device is None:
        return int(torch.cuda.current_device())
    if isinstance(device, int):
        return device
    dev = torch.device(device)
    if dev.type != "cuda":
        raise ValueError(f"benchmarks need a CUDA device, got {dev}")
    return int(dev.index) if dev.index is not None else int(torch.cuda.current_device())


def skipped(bench_id: str, label: str, unit: str, reason: str) -> Benchmark:
    return Benchmark(id=bench_id, label=label, value=None, unit=unit, skipped=reason)


def failed(bench_id: str, label: str, unit: str, exc: BaseException) -> Benchmark:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return skipped(bench_id, label, unit, f"failed: {type(exc).__name__}: {first[:300]}")


def finite(value: float | None, digits: int = 4) -> float | None:
    """Rounded to ``digits`` significant digits; None for None, NaN or infinity (JSON has none)."""
    if value is None or not math.isfinite(value):
        return None
    if value == 0:
        return 0.0
    return float(f"{value:.{digits}g}")


def band(lo: float, hi: float, digits: int = 4) -> tuple[float, float] | None:
    a, b = finite(lo, digits), finite(hi, digits)
    if a is None or b is None:
        return None
    return (min(a, b), max(a, b))


def release_device_memory() -> None:
    """Give the blocks the benchmarks freed back to the driver, so the user's process holds
    no more GPU memory than before (the caching allocator would keep them reserved)."""
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        torch.cuda.empty_cache()


def release_pinned_memory() -> None:
    """Free cached pinned host blocks: torch keeps freed pinned memory for reuse otherwise."""
    import torch

    for fn in (
        getattr(torch._C, "_host_emptyCache", None),
        getattr(getattr(torch, "accelerator", None), "empty_host_cache", None),
    ):
        if fn is not None:
            try:
                fn()
                return
            except Exception:  # not built for this accelerator: try the next spelling
                continue
