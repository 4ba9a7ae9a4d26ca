"""On a CPU-only torch build every report says so, never "nothing to fix"; its finding comes first
where the machine has a GPU the build leaves unused, and only there."""

from __future__ import annotations

import pytest
from gpusight.bench.suite import build_report
from gpusight.report import Benchmark, Report, Verdict
from gpusight.report_schema import validate
from gpusight.rules.cpu_only_build import (
    FINDING_ID,
    NO_GPU_NOTE,
    cpu_only_torch_version,
    lead_with_cpu_only_build,
)

CPU_MACHINE = {
    "platform": "Linux",
    "python": "3.12",
    "gpus": [],
    "torch": {"version": "2.13.0+cpu", "cuda": None},
}
GPU_HOST = {**CPU_MACHINE, "gpus": [{"index": 0, "name": "NVIDIA H200"}]}
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
        kind="watch", machine=dict(GPU_HOST), verdict=Verdict("none", None, "Nothing to fix.")
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
        machine=dict(GPU_HOST),
        verdict=Verdict("input_pipeline", None, "Data waits."),
    )
    out = lead_with_cpu_only_build(r)
    assert out.verdict.bottleneck == "input_pipeline"
    assert out.verdict.summary.endswith("Data waits.")
    assert out.findings[0].id == FINDING_ID


def test_without_a_gpu_the_runs_own_fix_stays_first() -> None:
    from gpusight.report import Finding, Fix, Impact

    loader = Finding(
        id="load.input_bound",
        severity="critical",
        title="The step waits for the DataLoader",
        impact=Impact(basis="measured", speedup=2.3),
        fix=Fix(text="num_workers=2"),
    )
    r = Report(
        kind="watch",
        machine=dict(CPU_MACHINE),
        verdict=Verdict("input_pipeline", None, "Data waits."),
        findings=[loader],
    )
    out = lead_with_cpu_only_build(r)
    assert [f.id for f in out.findings] == ["load.input_bound"]
    assert NO_GPU_NOTE in out.notes and out.notes.count(NO_GPU_NOTE) == 1
    assert out.verdict.bottleneck == "input_pipeline"
    assert out.verdict.summary.startswith("torch 2.13.0+cpu is a CPU-only build")
    # A report that carried the finding from before loses it here; again, nothing changes.
    r.findings.insert(
        0, lead_with_cpu_only_build(Report(kind="watch", machine=dict(GPU_HOST))).findings[0]
    )
    again = lead_with_cpu_only_build(lead_with_cpu_only_build(r))
    assert [f.id for f in again.findings] == ["load.input_bound"]
    assert again.notes.count(NO_GPU_NOTE) == 1


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
    if report.machine.get("gpus"):
        assert FINDING_ID in [f.id for f in report.findings]
    else:  # this machine: no GPU for a CUDA build to use (the skipped rows say so: no note)
        assert FINDING_ID not in [f.id for f in report.findings]
        assert NO_GPU_NOTE not in report.notes
    validate(report.to_dict())
