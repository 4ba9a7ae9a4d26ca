"""Every hardware benchmark in one call, within a time budget, and the bench report."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..probes.nvml_session import nvml_session
from ..report import Benchmark, Report, Verdict
from ..rules.cpu_only_build import lead_with_cpu_only_build
from . import copies, cpu, launch, matmul
from .device import cuda_unavailable_reason
from .findings import bench_findings
from .machine import machine_info
from .progress import Progress, Span

FULL_BUDGET_S = 60.0
QUICK_BUDGET_S = 4.0

Runner = Callable[..., list[Benchmark]]

# (stage, share of the budget, runner). The CPU matmul runs first: it needs no device and tells
# a user without a GPU something; the GPU stages follow, largest first.
STAGES: tuple[tuple[str, float, Runner], ...] = (
    ("cpu", 0.05, cpu.run),
    ("matmul", 0.45, matmul.run),
    ("copies", 0.35, copies.run),
    ("launch", 0.15, launch.run),
)


def run_all(
    budget_s: float | None = None,
    progress: Progress | None = None,
    *,
    quick: bool = False,
    device: Any = None,
) -> list[Benchmark]:
    """Run every hardware benchmark (CPU matmul, GPU matmul per precision, copies, launch cost).

    ``budget_s`` (default 60 s, 4 s with ``quick``) is shared among the stages; each stays within
    its share, except that every measurement gets a minimum number of repetitions. Without a
    CUDA device the GPU rows come back with ``value=None`` and ``skipped='no CUDA device...'``.
    ``progress(stage, fraction)`` is called often; if it raises (KeyboardInterrupt), the run
    stops with every buffer freed and torch's flags as they were.
    """
    budget = budget_s if budget_s is not None else (QUICK_BUDGET_S if quick else FULL_BUDGET_S)
    span = Span(progress)
    rows: list[Benchmark] = []
    start = 0.0
    no_gpu = cuda_unavailable_reason() is not None
    with nvml_session():  # the matmul and copy benchmarks each open NVML: it starts once
        for stage, share, runner in STAGES:
            sub = span.sub(start, start + share)
            sub(stage, 0.0)
            stage_budget = budget * share
            if stage == "cpu" and no_gpu:
                # The GPU stages return at once: the CPU may use more.
                stage_budget = min(budget, 2.0)
            kwargs: dict[str, Any] = {"budget_s": stage_budget, "quick": quick, "progress": sub}
            if stage != "cpu":
                kwargs["device"] = device
            rows.extend(runner(**kwargs))
            start += share
    span("done", 1.0)
    return rows


def summary(benchmarks: list[Benchmark]) -> str:
    """One sentence: the headline ceilings, or why there are none."""
    by_id = {b.id: b for b in benchmarks}
    parts: list[str] = []
    for bench_id, name in (("matmul.bf16", "bf16 matmul"), ("matmul.fp32", "fp32 matmul")):
        b = by_id.get(bench_id)
        if b is not None and b.value is not None:
            notes = [f"{100 * b.value / b.ceiling:.0f} % of datasheet"] if b.ceiling else []
            notes += _matmul_context(b)
            pct = f" ({'; '.join(notes)})" if notes else ""
            parts.append(f"{name} {b.value:.0f} {b.unit}{pct}")
    fp32 = by_id.get("matmul.fp32")
    if fp32 is not None and fp32.params:
        gains = [
            f"{fp32.params[f'x_below_{p}']}x with {p}"
            for p in ("tf32", "bf16")
            if isinstance(fp32.params.get(f"x_below_{p}"), float)
        ]
        if gains:
            parts.append("fp32 with TF32 off leaves " + " and ".join(gains) + " on the table")
    h2d = by_id.get("copy.h2d.pinned")
    if h2d is not None and h2d.value is not None:
        pct = f" ({100 * h2d.value / h2d.ceiling:.0f} % of the PCIe link)" if h2d.ceiling else ""
        parts.append(f"pinned host-to-device {h2d.value:.1f} GB/s{pct}")
    eager = by_id.get("launch.eager")
    if eager is not None and eager.value is not None:
        parts.append(f"{eager.value:.1f} µs per tiny kernel from Python")
    if not parts:
        cpu_row = by_id.get("cpu.matmul.fp32")
        gpu_skip = next((b.skipped for b in benchmarks if b.id.startswith("matmul.")), None)
        text = f"GPU benchmarks skipped: {gpu_skip}" if gpu_skip else "no GPU benchmark ran"
        if cpu_row is not None and cpu_row.value is not None:
            text += f"; CPU fp32 matmul {cpu_row.value:.0f} GFLOP/s"
        return text
    return "; ".join(parts)


def _matmul_context(row: Benchmark) -> list[str]:
    """'sustained', and the limit the GPU reported while the products ran, if any."""
    params = row.params or {}
    out: list[str] = []
    regime = params.get("regime")
    if regime == "sustained":
        out.append("sustained")
    elif regime == "burst":
        out.append("short burst")
    events = str(params.get("clock_events") or "")
    limit = params.get("power_limit_w")
    if "sw_power_cap" in events and isinstance(limit, (int, float)):
        out.append(f"power-capped at {limit:.0f} W")
    elif any(r in events for r in ("thermal", "hw_slowdown", "power_brake")):
        out.append(f"clocks held down: {events}")
    return out


def _notes(benchmarks: list[Benchmark]) -> list[str]:
    """One note per distinct reason for skipping, naming the rows it skipped."""
    by_reason: dict[str, list[str]] = {}
    for b in benchmarks:
        if b.skipped:
            by_reason.setdefault(b.skipped, []).append(b.id)
    return [f"{', '.join(ids)} skipped: {reason}" for reason, ids in by_reason.items()]


def build_report(
    benchmarks: list[Benchmark] | None = None,
    *,
    budget_s: float | None = None,
    quick: bool = False,
    progress: Progress | None = None,
    device: Any = None,
    machine: dict[str, Any] | None = None,
    title: str | None = None,
) -> Report:
    """A ``Report(kind="bench")``: runs :func:`run_all` unless ``benchmarks`` are given."""
    rows = (
        benchmarks
        if benchmarks is not None
        else run_all(budget_s, progress, quick=quick, device=device)
    )
    findings = bench_findings(rows)
    report = Report(
        kind="bench",
        machine=machine if machine is not None else machine_info(),
        benchmarks=list(rows),
        findings=findings,
        verdict=Verdict(
            bottleneck="environment" if findings else "none",
            gpu_busy_pct=None,
            summary=summary(rows),
        ),
        notes=_notes(rows),
        title=title,
    )
    return lead_with_cpu_only_build(report)
