"""torch's float32 matmul precision: read it whole, change one switch, put it back exactly.

Since torch 2.9 the switch lives in a table of (backend, op) -> 'none' | 'ieee' | 'tf32', and the
legacy views (``allow_tf32``, ``get_float32_matmul_precision``) raise when the table was set in a
way they cannot express. So the benchmark changes only ('cuda', 'matmul') through the new API and
restores that one entry; older torch gets the legacy flag.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

_BACKENDS = ("generic", "cuda", "cudnn", "mkldnn")
_OPS = ("all", "matmul", "conv", "rnn")
_LEGACY = (
    "_get_cublas_allow_tf32",
    "_get_float32_matmul_precision",
    "_get_cudnn_allow_tf32",
    "_get_cublas_allow_fp16_reduced_precision_reduction",
    "_get_cublas_allow_bf16_reduced_precision_reduction",
    "_get_cudnn_enabled",
    "_get_cudnn_benchmark",
    "_get_cudnn_deterministic",
    "_get_deterministic_algorithms",
)


def snapshot() -> dict[str, Any]:
    """Every matmul/conv precision flag torch exposes, as found (a getter that raises is recorded
    as its error text, so two snapshots still compare equal when nothing changed)."""
    import torch

    out: dict[str, Any] = {}
    getter = getattr(torch._C, "_get_fp32_precision_getter", None)
    if getter is not None:
        for backend in _BACKENDS:
            for op in _OPS:
                try:
                    out[f"fp32_precision.{backend}.{op}"] = getter(backend, op)
                except Exception:  # not every pair exists: absent is a value too
                    out[f"fp32_precision.{backend}.{op}"] = "<absent>"
    for name in _LEGACY:
        fn = getattr(torch._C, name, None)
        if fn is None:
            continue
        try:
            out[name] = fn()
        except Exception as exc:  # a mixed legacy/new state: the error is the value
            out[name] = f"<raises {type(exc).__name__}>"
    return out


def _has_precision_api() -> bool:
    import torch

    return hasattr(torch._C, "_get_fp32_precision_getter") and hasattr(
        torch._C, "_set_fp32_precision_setter"
    )


@contextmanager
def matmul_fp32_precision(mode: Literal["ieee", "tf32"]) -> Iterator[None]:
    """Within the block, cuBLAS float32 matmuls use full fp32 ('ieee') or TF32 ('tf32');
    the previous setting is restored on any exit, KeyboardInterrupt included."""
    import torch

    if _has_precision_api():
        before = torch._C._get_fp32_precision_getter("cuda", "matmul")
        torch._C._set_fp32_precision_setter("cuda", "matmul", mode)
        try:
            yield
        finally:
            torch._C._set_fp32_precision_setter("cuda", "matmul", before)
    else:
        legacy = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
        try:
            yield
        finally:
            torch.backends.cuda.matmul.allow_tf32 = legacy
