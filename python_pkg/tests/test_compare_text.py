"""``gpusight diff``'s table names the parts of a step as the run had them: a run that used no
GPU computed on the host, and its compute row says so (issue #48: "GPU compute" rows on CPU
runs)."""

from __future__ import annotations

from typing import Any

from gpusight.compare import compare_reports, render_comparison


def _report(compute_ms: float, busy: float | None) -> dict[str, Any]:
    return {
        "verdict": {"bottleneck": "host_cpu", "gpu_busy_pct": busy},
        "run": {
            "step_time_ms": compute_ms + 5.0,
            "breakdown_ms": {"compute": compute_ms, "other_cpu": 5.0},
        },
        "findings": [],
    }


def _compute_row(text: str) -> str:
    table = text.split("step-time breakdown (per step)", 1)[1]
    return next(ln for ln in table.splitlines() if "ompute" in ln)


def test_a_cpu_run_compares_its_compute_as_the_hosts() -> None:
    text = render_comparison(compare_reports(_report(3.0, None), _report(1.0, None)))
    row = _compute_row(text)
    assert row.strip().startswith("Compute (CPU)") and "GPU" not in row


def test_a_gpu_run_keeps_gpu_compute() -> None:
    text = render_comparison(compare_reports(_report(3.0, 40.0), _report(1.0, 70.0)))
    assert _compute_row(text).strip().startswith("GPU compute")
