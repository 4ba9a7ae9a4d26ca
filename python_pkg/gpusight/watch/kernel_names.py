"""What a GPU kernel is, read from its name and from the op that launched it. Pure, no torch.

Kernel names are the only thing a trace says about a kernel, and vendors rename them between
library versions (cuBLAS on Hopper went from ``sm90_xmma_gemm_*`` and ``cutlass_80_tensorop_*``
to ``nvjet_*``). So the dtype comes first from the launching aten op's input types (recorded
with ``record_shapes``), and the name patterns are the fallback.
"""

from __future__ import annotations

from typing import Literal

KernelKind = Literal["matmul", "conv", "attention", "layout", "nccl", "other"]

# Innermost aten ops whose kernels are the matmul / conv / attention work.
MATMUL_OPS = frozenset(
    {
        "aten::mm",
        "aten::addmm",
        "aten::bmm",
        "aten::baddbmm",
        "aten::addbmm",
        "aten::matmul",
        "aten::linear",
        "aten::_addmm_activation",
        "aten::_scaled_mm",
        "aten::_int_mm",
        "aten::addmv",
        "aten::mv",
        "aten::dot",
    }
)
CONV_OPS = frozenset(
    {
        "aten::cudnn_convolution",
        "aten::cudnn_convolution_transpose",
        "aten::convolution_backward",
        "aten::_convolution",
        "aten::convolution",
        "aten::conv2d",
        "aten::conv1d",
        "aten::conv3d",
        "aten::_conv_depthwise2d",
        "aten::miopen_convolution",
    }
)
ATTENTION_OPS = frozenset(
    {
        "aten::_scaled_dot_product_flash_attention",
        "aten::_scaled_dot_product_efficient_attention",
        "aten::_scaled_dot_product_cudnn_attention",
        "aten::_flash_attention_forward",
        "aten::_flash_attention_backward",
        "aten::_efficient_attention_forward",
        "aten::_efficient_attention_backward",
        "aten::_scaled_dot_product_flash_attention_backward",
        "aten::_scaled_dot_product_efficient_attention_backward",
        "aten::_scaled_dot_product_cudnn_attention_backward",
    }
)

# Profiler "Input type" strings -> short dtype names.
_DTYPES = {
    "float": "fp32",
    "double": "fp64",
    "c10::half": "fp16",
    "half": "fp16",
    "c10::bfloat16": "bf16",
    "bfloat16": "bf16",
    "c10::float8_e4m3fn": "fp8",
    "c10::float8_e5m2": "fp8",
    "c10::float8_e4m3fnuz": "fp8",
    "c10::float8_e5m2fnuz": "fp8",
    "signed char": "int8",
    "int": "int32",
    "long int": "int64",
}

_TC_MARKERS = (
    "tensorop",
    "s16816",
    "h16816",
    "i16832",
    "s1688",
    "h1688",
    "h884",
    "s884",
    "hmma",
    "imma",
    "wgmma",
    "gmma",
    "tf32",
    "bf16",
    "fp16",
    "f16",
    "e4m3",
    "nvjet",
    "flash",
    "fmha",
)
_SIMT_MARKERS = ("sgemm", "simt", "dgemm", "gemv", "f32f32_f32f32_f32")


def op_family(op_name: str) -> KernelKind | None:
    if op_name in MATMUL_OPS:
        return "matmul"
    if op_name in CONV_OPS:
        return "conv"
    if op_name in ATTENTION_OPS:
        return "attention"
    return None


def dtype_of(input_types: object) -> str | None:
    """The dtype of an op's first tensor input, from the profiler's ``Input type`` list."""
    if not isinstance(input_types, list):
        return None
    for t in input_types:
        if isinstance(t, str) and t:
            return _DTYPES.get(t.strip().lower(), t.strip().lower() or None)
    return None


def kernel_kind(name: str) -> KernelKind:
    n = name.lower()
    if "nccl" in n:
        return "nccl"
    if "nchwtonhwc" in n or "nhwctonchw" in n:
        return "layout"
    if "flash" in n or "fmha" in n or "attention" in n:
        return "attention"
    if (
        "conv" in n
        or "fprop" in n
        or "dgrad" in n
        or "wgrad" in n
        or "winograd" in n
        or "implicit_gemm" in n
    ):
        return "conv"
    if "gemm" in n or "nvjet" in n or "xmma" in n or "cutlass" in n or "gemv" in n:
        return "matmul"
    return "other"


def tensor_cores(name: str) -> bool | None:
    """True/False when the name says whether Tensor Cores ran; None when it does not say."""
    n = name.lower()
    if any(m in n for m in _TC_MARKERS):
        # "xmma_gemm_f32f32_f32f32_f32" is the float32 path without TF32; tf32 names say so.
        if any(m in n for m in _SIMT_MARKERS) and "tf32" not in n:
            return False
        return True
    if any(m in n for m in _SIMT_MARKERS):
        return False
    return None


def dtype_from_name(name: str) -> str | None:
    n = name.lower()
    if "e4m3" in n or "e5m2" in n or "fp8" in n:
        return "fp8"
    if "bf16" in n:
        return "bf16"
    if "tf32" in n or "s1688" in n or "s16816" in n:
        return "tf32"
    if "f16" in n or "half" in n or "h1688" in n or "h16816" in n or "h884" in n or "hgemm" in n:
        return "fp16"
    if "sgemm" in n or "f32f32_f32f32_f32" in n:
        return "fp32"
    if "dgemm" in n:
        return "fp64"
    return None
