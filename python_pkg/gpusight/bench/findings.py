"""Benchmark rows -> hardware findings (``hw.*``). Pure: no torch, no device."""

from __future__ import annotations

from collections.abc import Sequence

from ..report import Benchmark, Evidence, Finding, Fix, Impact

# Pinned host-to-device copies normally reach 75-90 % of the link's theoretical rate
# (protocol overhead takes the rest); under half means something between host and GPU is wrong.
H2D_LINK_SHARE = 0.5
# cuBLAS reaches 70-85 % of the dense datasheet peak on large products; under half is a sick GPU
# (power cap, thermal throttling, a slower part than its name says) or a shared one.
MATMUL_PEAK_SHARE = 0.5


def _by_id(benchmarks: Sequence[Benchmark]) -> dict[str, Benchmark]:
    return {b.id: b for b in benchmarks}


def h2d_below_link(benchmarks: Sequence[Benchmark]) -> Finding | None:
    row = _by_id(benchmarks).get("copy.h2d.pinned")
    if row is None or row.value is None or not row.ceiling:
        return None
    share = row.value / row.ceiling
    if share >= H2D_LINK_SHARE:
        return None
    params = row.params or {}
    gen, width = params.get("pcie_gen"), params.get("pcie_width")
    evidence = [
        Evidence("pinned host-to-device copy", row.value, "GB/s"),
        Evidence("PCIe link, theoretical", row.ceiling, "GB/s"),
        Evidence("share of the link", round(100 * share, 1), "%"),
        Evidence("link generation read (under load)", gen if isinstance(gen, int) else None),
        Evidence("link width", width if isinstance(width, int) else None),
    ]
    if row.ceiling_source:
        evidence.append(Evidence("ceiling from", row.ceiling_source))
    return Finding(
        id="hw.h2d_below_link",
        severity="warn",
        title=(
            f"Pinned host-to-device copies reach {row.value:.1f} GB/s, "
            f"{100 * share:.0f} % of what the PCIe link allows ({row.ceiling:.1f} GB/s)"
        ),
        evidence=evidence,
        impact=Impact(
            basis="estimated",
            text=(
                f"every host-to-device copy takes up to {row.ceiling / row.value:.1f}x longer "
                "than the link allows"
            ),
        ),
        fix=Fix(
            text=(
                "Check the link under load (gen and width, below the maximum means a degraded "
                "slot or riser), run the process on the CPU socket next to the GPU, and look for "
                "other devices sharing the PCIe switch."
            ),
            code=(
                "nvidia-smi -q -d PCIE          # Link Width / Generation: Current vs Max\n"
                "nvidia-smi topo -m             # CPU affinity and NUMA node of the GPU\n"
                "numactl --cpunodebind=N --membind=N python train.py"
            ),
            language="shell",
        ),
    )


def matmul_below_expected(benchmarks: Sequence[Benchmark]) -> Finding | None:
    low = [
        b
        for b in benchmarks
        if b.id.startswith("matmul.")
        and b.value is not None
        and b.ceiling
        and b.value < MATMUL_PEAK_SHARE * b.ceiling
    ]
    if not low:
        return None
    worst = min(low, key=lambda b: (b.value or 0.0) / (b.ceiling or 1.0))
    assert worst.value is not None and worst.ceiling
    evidence: list[Evidence] = []
    for b in low:
        assert b.value is not None and b.ceiling
        evidence.append(Evidence(f"{b.label}", b.value, b.unit))
        evidence.append(Evidence(f"{b.label}: datasheet peak", b.ceiling, b.unit))
        state = (b.params or {}).get("gpu_state")
        if isinstance(state, str) and state:
            # The GPU's own account (NVML, while the products ran): a power cap explains a rate.
            evidence.append(Evidence(f"{b.label}: GPU while timed", state))
    if worst.ceiling_source:
        evidence.append(Evidence("ceiling from", worst.ceiling_source))
    return Finding(
        id="hw.matmul_below_expected",
        severity="warn",
        title=(
            f"{worst.label} runs at {worst.value:.0f} {worst.unit}, "
            f"{100 * worst.value / worst.ceiling:.0f} % of the datasheet peak"
        ),
        evidence=evidence,
        impact=Impact(
            basis="estimated",
            text=(
                "at the 80 % of peak a healthy GPU reaches, compute-bound work would run "
                f"{0.8 * worst.ceiling / worst.value:.1f}x faster"
            ),
            speedup=round(worst.ceiling / worst.value * 0.8, 2),
        ),
        fix=Fix(
            text=(
                "Look for a power cap, thermal throttling or another process on the GPU "
                "(clock event reasons), and check that the part is the one the name says."
            ),
            code=(
                "nvidia-smi -q -d PERFORMANCE,POWER,CLOCK\n"
                "nvidia-smi --query-compute-apps=pid,used_memory --format=csv"
            ),
            language="shell",
        ),
    )


def bench_findings(benchmarks: Sequence[Benchmark]) -> list[Finding]:
    found = [h2d_below_link(benchmarks), matmul_below_expected(benchmarks)]
    return [f for f in found if f is not None]
