"""On a CPU-only torch build every report says so first, never "nothing to fix"."""

from __future__ import annotations

import pytest
from gpusight.bench.suite import build_report
from gpusight.report import Benchmark, Report, Verdict
from gpusight.report_schema import validate
from gpusight.rules.cpu_only_build import (
    FINDING_ID,
    cpu_only_torch_version,
    lead_with_cpu_only_build,
)

CPU_MACHINE = {
    "platform": "Linux",
    "python": "3.12",
    "gpus": [],
    "torch": {"version": "2.13.0+cpu", "cuda": None},
}
CUDA_MACHINE = {
    "platform": "Linux",
    "python": "3.12",
    "gpus": [],
    "torch": {"version": "2.13.0", "cuda": "12.8"},
}


def test_version_only_for_a_cpu_only_build() -> None:
    assert cpu_only_torch_version(CPU_MACHINE) == "2.13.0+cpu"
    assert cpu_only_torch_version(CUDA_MACHINE) is None
    assert cpu_only_torch_version({"torch": None}) is None  # no torch: the check says that


def test_nothing_found_becomes_the_build() -> None:
    r = Report(
        kind="watch", machine=dict(CPU_MACHINE), verdict=Verdict("none", None, "Nothing to fix.")
    )
    out = lead_with_cpu_only_build(r)
    assert out.verdict.bottleneck == "environment"
    assert out.verdict.summary.startswith("torch 2.13.0+cpu is a CPU-only build")
    assert out.findings[0].id == FINDING_ID and out.findings[0].severity == "critical"
    assert out.findings[0].fix.code and "pip install torch" in out.findings[0].fix.code
    again = lead_with_cpu_only_build(out)  # idempotent
    assert [f.id for f in again.findings] == [FINDING_ID]
    assert again.verdict.summary.count("CPU-only build") == 1


def test_a_workload_bottleneck_is_kept_behind_the_build() -> None:
    r = Report(
        kind="watch",
        machine=dict(CPU_MACHINE),
        verdict=Verdict("input_pipeline", None, "Data waits."),
    )
    out = lead_with_cpu_only_build(r)
    assert out.verdict.bottleneck == "input_pipeline"
    assert out.verdict.summary.endswith("Data waits.")


def test_cuda_build_untouched() -> None:
    r = Report(kind="watch", machine=dict(CUDA_MACHINE), verdict=Verdict("none", 50.0, "Fine."))
    out = lead_with_cpu_only_build(r)
    assert out.verdict == Verdict("none", 50.0, "Fine.") and out.findings == []


def test_bench_report_on_this_cpu_only_torch_is_not_green() -> None:
    rows = [Benchmark("matmul.fp32", "fp32 matmul", None, "TFLOP/s", skipped="no CUDA device")]
    report = build_report(rows)  # this machine's real facts: the tests pin a CPU-only torch
    if cpu_only_torch_version(report.machine) is None:
        pytest.skip("torch here is not a CPU-only build")
    assert report.verdict.bottleneck != "none"
    assert FINDING_ID in [f.id for f in report.findings]
    validate(report.to_dict())
