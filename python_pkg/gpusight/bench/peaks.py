"""Datasheet ceilings of common GPUs, and the theoretical rate of a PCIe link.

Every number here is a vendor figure, quoted so that a measurement can be set against it; none
is a measurement. Rates are dense (no structured sparsity): where a datasheet prints only the
sparse figure, the dense one is half of it. Tensor-core rates for fp16/bf16/fp8 are with FP32
accumulation, which is what ``torch.mm`` and ``torch._scaled_mm`` ask cuBLAS for; GeForce cards
run that at half the rate of FP16 accumulation, and their whitepapers say so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")


@dataclass(frozen=True)
class GpuPeaks:
    """Dense peak TFLOP/s per precision (None: the chip has no such unit) and memory GB/s."""

    name: str
    fp32: float | None
    tf32: float | None
    bf16: float | None
    fp16: float | None
    fp8: float | None
    memory_gbps: float | None
    source: str

    def tflops(self, precision: str) -> float | None:
        if precision not in PRECISIONS:
            raise ValueError(f"unknown precision {precision!r}; expected one of {PRECISIONS}")
        value: float | None = getattr(self, precision)
        return value


_P100 = "NVIDIA Tesla P100 datasheet"
_V100 = "NVIDIA Tesla V100 datasheet"
_A100 = "NVIDIA A100 datasheet"
_H100 = "NVIDIA H100 datasheet"
_H200 = "NVIDIA H200 datasheet"
_GH200 = "NVIDIA GH200 Grace Hopper Superchip datasheet"
_GA102 = "NVIDIA Ampere GA102 GPU architecture whitepaper"
_ADA = "NVIDIA Ada Lovelace GPU architecture whitepaper"
_RTXBW = "NVIDIA RTX Blackwell GPU architecture whitepaper"

# Rows: pattern on the normalised device name; name; dense TFLOP/s fp32, tf32, bf16, fp16, fp8;
# memory GB/s; source. First match wins, so specific names come first. Patterns use word
# boundaries: "a10" must not match "a100", nor "h200" match "gh200".
_ROWS: tuple[tuple[str, str, float | None, float | None, float | None, float | None,
                   float | None, float | None, str], ...] = (
    # Pascal: no tensor cores; fp16 at twice the fp32 rate
    (r"\bp100\b.*\b12gb", "Tesla P100 PCIe 12GB", 9.3, None, None, 18.7, None, 549, _P100),
    (r"\bp100\b.*\bpcie\b", "Tesla P100 PCIe 16GB", 9.3, None, None, 18.7, None, 732, _P100),
    (r"\bp100\b", "Tesla P100 SXM2", 10.6, None, None, 21.2, None, 732, _P100),
    # Volta
    (r"\bv100s\b", "Tesla V100S PCIe", 16.4, None, None, 130, None, 1134, "NVIDIA V100S datasheet"),
    (r"\bv100\b.*\bpcie\b", "Tesla V100 PCIe", 14, None, None, 112, None, 900, _V100),
    (r"\bv100\b", "Tesla V100 SXM2", 15.7, None, None, 125, None, 900, _V100),
    # Turing
    (r"\bt4\b", "Tesla T4", 8.1, None, None, 65, None, 320, "NVIDIA T4 datasheet"),
    # Ampere
    (r"\ba100\b.*\bpcie\b.*\b80gb\b", "A100 80GB PCIe", 19.5, 156, 312, 312, None, 1935, _A100),
    (r"\ba100\b.*\b80gb\b.*\bpcie\b", "A100 80GB PCIe", 19.5, 156, 312, 312, None, 1935, _A100),
    (r"\ba100\b.*\bpcie\b", "A100 40GB PCIe", 19.5, 156, 312, 312, None, 1555, _A100),
    (r"\ba100\b.*\b80gb\b", "A100 80GB SXM", 19.5, 156, 312, 312, None, 2039, _A100),
    (r"\ba100\b", "A100 40GB SXM", 19.5, 156, 312, 312, None, 1555, _A100),
    (r"\ba30\b", "A30", 10.3, 82, 165, 165, None, 933, "NVIDIA A30 datasheet"),
    (r"\ba10\b", "A10", 31.2, 62.5, 125, 125, None, 600, "NVIDIA A10 datasheet"),
    (r"\ba40\b", "A40", 37.4, 74.8, 149.7, 149.7, None, 696, "NVIDIA A40 datasheet"),
    (r"\brtx a6000\b", "RTX A6000", 38.7, 77.4, 154.8, 154.8, None, 768, _GA102),
    (r"\brtx 3090\b(?! ti)", "GeForce RTX 3090", 35.6, 35.6, 71, 71, None, 936, _GA102),
    # Ada Lovelace
    (r"\bl4\b", "L4", 30.3, 60, 121, 121, 242.5, 300, "NVIDIA L4 datasheet"),
    (r"\bl40s\b", "L40S", 91.6, 183, 362.05, 362.05, 733, 864, "NVIDIA L40S datasheet"),
    (r"\bl40\b", "L40", 90.5, 90.5, 181.05, 181.05, 362, 864, "NVIDIA L40 datasheet"),
    (r"\brtx 6000 ada\b", "RTX 6000 Ada Generation", 91.1, 182.1, 364.2, 364.2, 728.5, 960, _ADA),
    (r"\brtx 4090\b(?! d\b)", "GeForce RTX 4090", 82.6, 82.6, 165.2, 165.2, 330.3, 1008, _ADA),
    # Hopper
    (r"\bh100\b.*\bnvl\b", "H100 NVL", 60, 417.5, 835.5, 835.5, 1670.5, 3900, _H100),
    (r"\bh100\b.*\bpcie\b", "H100 PCIe", 51, 378, 756, 756, 1513, 2000, _H100),
    (r"\bh100\b", "H100 SXM", 67, 494.5, 989.5, 989.5, 1979, 3350, _H100),
    (r"\bgh200\b.*\b144g", "GH200 144GB HBM3e", 67, 494.5, 989.5, 989.5, 1979, 4900, _GH200),
    (r"\bgh200\b", "GH200 96GB HBM3", 67, 494.5, 989.5, 989.5, 1979, 4000, _GH200),
    (r"\bh200\b.*\bnvl\b", "H200 NVL", 60, 417.5, 835.5, 835.5, 1670.5, 4800, _H200),
    (r"\bh200\b", "H200 SXM", 67, 494.5, 989.5, 989.5, 1979, 4800, _H200),
    # Blackwell: datasheets print sparse tensor rates; these are half of them
    (r"\bgb200\b", "GB200", 80, 1250, 2500, 2500, 5000, 8000, "NVIDIA GB200 NVL72 datasheet"),
    (r"\bb200\b", "B200", 75, 1125, 2250, 2250, 4500, 8000, "NVIDIA HGX B200 datasheet"),
    (r"\bb100\b", "B100", 60, 875, 1750, 1750, 3500, 8000, "NVIDIA HGX B100 datasheet"),
    (r"\brtx 5090\b", "GeForce RTX 5090", 104.8, 104.8, 209.5, 209.5, 419, 1792, _RTXBW),
)  # fmt: skip

_TABLE: tuple[tuple[str, GpuPeaks], ...] = tuple(
    (pattern, GpuPeaks(name, fp32, tf32, bf16, fp16, fp8, mem, source))
    for pattern, name, fp32, tf32, bf16, fp16, fp8, mem, source in _ROWS
)

_COMPILED = tuple((re.compile(p), row) for p, row in _TABLE)


def normalise_name(name: str) -> str:
    """'NVIDIA A100-SXM4-80GB' -> 'a100 sxm4 80gb': vendor words dropped, separators to spaces."""
    text = re.sub(r"[-_/()]+", " ", name.lower())
    text = re.sub(r"\b(nvidia|tesla|geforce|quadro)\b", " ", text)
    return " ".join(text.split())


def lookup(name: str | None) -> GpuPeaks | None:
    """The datasheet row for a device name as torch or NVML reports it; None if not in the table."""
    if not name:
        return None
    text = normalise_name(name)
    for pattern, row in _COMPILED:
        if pattern.search(text):
            return row
    return None


def known_names() -> list[str]:
    return [row.name for _, row in _TABLE]


# PCIe: transfer rate per lane (GT/s) by generation, and the share of it that carries data.
PCIE_GT_PER_LANE: dict[int, float] = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}


def pcie_encoding(gen: int) -> float:
    """Payload share of the line rate: 8b/10b for gen 1-2, 128b/130b for gen 3-5.

    Gen 6 drops line encoding for 256-byte FLITs of which 242 bytes carry TLPs and DLLPs
    (the rest is CRC and FEC), so its share is 242/256.
    """
    if gen <= 2:
        return 8 / 10
    if gen <= 5:
        return 128 / 130
    return 242 / 256


def pcie_gbps(gen: int | None, width: int | None) -> float | None:
    """Theoretical one-direction rate of a PCIe link in GB/s (1e9 bytes), after encoding.

    Gen 4 x16: 16 GT/s * 16 lanes * 128/130 / 8 = 31.5 GB/s; gen 5 x16: 63.0 GB/s.
    Protocol overhead (TLP headers, flow control) takes a further ~10-15 % in practice.
    """
    if gen is None or width is None or gen not in PCIE_GT_PER_LANE or width <= 0:
        return None
    return PCIE_GT_PER_LANE[gen] * width * pcie_encoding(gen) / 8
