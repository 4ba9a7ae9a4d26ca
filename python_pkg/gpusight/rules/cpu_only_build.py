"""A CPU-only torch build on a machine with a GPU leads every report made on it.

``gpusight check`` calls a CPU-only build critical (``env.cpu_only_build``). A watch or benchmark
report on the same build must not then say "No bottleneck found" or "Nothing to fix": its verdict
names the build. Its finding comes first where the machine has an NVIDIA GPU that the build
leaves unused; on a machine without one a CUDA build would change nothing, so the report says
so in a note and its first fix stays the run's own. :func:`lead_with_cpu_only_build` does that to
any report, from its ``machine`` alone (the watch and bench builders call it last).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from ..fixes import fix
from ..report import Evidence, Finding, Impact, Report, Verdict

FINDING_ID = "env.cpu_only_build"
NO_GPU_NOTE = (
    "torch here is a CPU-only build, and this machine has no NVIDIA GPU that its driver shows "
    "(NVML): a CUDA build would change nothing here, so the fixes are the run's own; on a GPU "
    "machine, install a CUDA build first (`gpusight check` names the index for its driver)"
)


def cpu_only_torch_version(machine: Mapping[str, Any]) -> str | None:
    """torch's version when the report's machine has a torch built for neither CUDA nor ROCm."""
    torch = machine.get("torch")
    if not isinstance(torch, Mapping) or not isinstance(torch.get("version"), str):
        return None
    if torch.get("cuda") or torch.get("hip"):
        return None
    return str(torch["version"])


def cpu_only_finding(version: str, python: str | None = None) -> Finding:
    """The check's critical finding, in short: what the build is and how to replace it."""
    return Finding(
        id=FINDING_ID,
        severity="critical",
        title=f"torch {version} is a CPU-only build: it cannot use any GPU",
        detail="torch.version.cuda and torch.version.hip are both None, so "
        "torch.cuda.is_available() is always False and everything here ran on the CPU.",
        evidence=[
            Evidence("torch", version),
            Evidence("torch.version.cuda", "None (no CUDA in this build)"),
        ],
        impact=Impact(basis="none", text="Nothing runs on a GPU."),
        fix=fix(
            "Install a CUDA build of torch in its place (run `gpusight check` on the GPU machine "
            "for the index its driver supports).",
            "torch.install_cuda",
            python=python or sys.executable,
            index="cu128",
        ),
    )


def lead_with_cpu_only_build(report: Report) -> Report:
    """On a CPU-only build: the build's finding first and a verdict that names it; else as is.

    A verdict that found a workload bottleneck keeps it (the CPU run's own bottleneck is still
    worth knowing) with the build named first in its summary; "none" becomes "environment".
    """
    version = cpu_only_torch_version(report.machine)
    if version is None:
        return report
    if report.machine.get("gpus"):
        if not any(f.id == FINDING_ID for f in report.findings):
            report.findings.insert(0, cpu_only_finding(version))
    else:
        report.findings = [f for f in report.findings if f.id != FINDING_ID]
        # A benchmark's skipped GPU rows already say it ("no CUDA device"): no note again.
        if report.kind != "bench" and NO_GPU_NOTE not in report.notes:
            report.notes.append(NO_GPU_NOTE)
    head = f"torch {version} is a CPU-only build, so this ran without a GPU."
    v = report.verdict
    if not v.summary.startswith(head):
        report.verdict = Verdict(
            bottleneck="environment" if v.bottleneck == "none" else v.bottleneck,
            gpu_busy_pct=v.gpu_busy_pct,
            summary=f"{head} {v.summary}".strip(),
        )
    return report
