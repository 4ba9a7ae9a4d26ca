"""Datasheet float64 matrix rates of the GPUs in ``peaks.py``: what a float64 model's matmuls
run at, set against the float32 rate they would run at instead (``rules/float64_math.py``).

Vendor figures, as in ``peaks.py``; none is a measurement. Two kinds of part:

* Data-center parts with full float64 units. From Ampere on (A100, A30, H100, H200, GH200)
  they also have float64 Tensor Cores, which cuBLAS uses for DGEMM by default: the rate here is
  that one (the datasheet's "FP64 Tensor Core"), which equals the part's float32 (non-TF32)
  rate. A float64 model there loses little on its matmuls against plain float32; it loses
  TF32's and bf16's Tensor Cores, which float64 never runs on.
* Every other part (Turing's T4, GA10x and Ada cards, GeForce): a few float64 units per SM,
  1/32 (Turing) or 1/64 (GA10x, Ada, consumer Blackwell) of the float32 rate, as their
  whitepapers give it; those datasheets print no float64 figure.

Parts not listed (data-center Blackwell among them: its datasheets give float64 for whole
systems) have no rate here; a finding then gives a range instead of a figure.
"""

from __future__ import annotations

from dataclasses import dataclass

from .peaks import GpuPeaks, lookup

_A100 = "NVIDIA A100 datasheet, FP64 Tensor Core"
_H100 = "NVIDIA H100 datasheet, FP64 Tensor Core"
_H200 = "NVIDIA H200 datasheet, FP64 Tensor Core"
_GH200 = "NVIDIA GH200 Grace Hopper Superchip datasheet, FP64 Tensor Core"

FULL_RATE: dict[str, tuple[float, str]] = {
    "Tesla P100 PCIe 12GB": (4.7, "NVIDIA Tesla P100 datasheet, FP64"),
    "Tesla P100 PCIe 16GB": (4.7, "NVIDIA Tesla P100 datasheet, FP64"),
    "Tesla P100 SXM2": (5.3, "NVIDIA Tesla P100 datasheet, FP64"),
    "Tesla V100S PCIe": (8.2, "NVIDIA V100S datasheet, FP64"),
    "Tesla V100 PCIe": (7.0, "NVIDIA Tesla V100 datasheet, FP64"),
    "Tesla V100 SXM2": (7.8, "NVIDIA Tesla V100 datasheet, FP64"),
    "A100 80GB PCIe": (19.5, _A100),
    "A100 40GB PCIe": (19.5, _A100),
    "A100 80GB SXM": (19.5, _A100),
    "A100 40GB SXM": (19.5, _A100),
    "A30": (10.3, "NVIDIA A30 datasheet, FP64 Tensor Core"),
    "H100 NVL": (60.0, _H100),
    "H100 PCIe": (51.0, _H100),
    "H100 SXM": (67.0, _H100),
    "GH200 144GB HBM3e": (67.0, _GH200),
    "GH200 96GB HBM3": (67.0, _GH200),
    "H200 NVL": (60.0, _H200),
    "H200 SXM": (67.0, _H200),
}
"""Parts with full float64 units: dense TFLOP/s and where the figure comes from."""

_TURING = (32, "NVIDIA Turing architecture whitepaper: FP64 at 1/32 of FP32")
_GA10X = (64, "NVIDIA Ampere GA102 GPU architecture whitepaper: FP64 at 1/64 of FP32")
_ADA = (64, "NVIDIA Ada Lovelace GPU architecture whitepaper: FP64 at 1/64 of FP32")
_RTXBW = (64, "NVIDIA RTX Blackwell GPU architecture whitepaper: FP64 at 1/64 of FP32")

FRACTION: dict[str, tuple[int, str]] = {
    "Tesla T4": _TURING,
    "A10": _GA10X,
    "A40": _GA10X,
    "RTX A6000": _GA10X,
    "GeForce RTX 3090": _GA10X,
    "L4": _ADA,
    "L40S": _ADA,
    "L40": _ADA,
    "RTX 6000 Ada Generation": _ADA,
    "GeForce RTX 4090": _ADA,
    "GeForce RTX 5090": _RTXBW,
}
"""Parts with few float64 units: their float64 rate as a fraction (1/n) of their float32."""


@dataclass(frozen=True)
class Fp64Rate:
    peaks: GpuPeaks
    """The part's datasheet row (its float32, TF32 and bf16 rates)."""
    tflops: float
    """Its dense float64 matrix rate."""
    source: str


def fp64_rate(device_name: str | None) -> Fp64Rate | None:
    """The float64 matrix rate of the GPU torch names, or None where gpusight has none."""
    peaks = lookup(device_name)
    if peaks is None:
        return None
    if peaks.name in FULL_RATE:
        tflops, source = FULL_RATE[peaks.name]
        return Fp64Rate(peaks, tflops, source)
    if peaks.name in FRACTION and peaks.fp32:
        n, source = FRACTION[peaks.name]
        return Fp64Rate(peaks, round(peaks.fp32 / n, 3), source)
    return None
