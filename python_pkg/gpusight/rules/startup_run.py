"""A run that ended before any clean step (the script exited after a few steps, or its loop was
that short) is reported from its start-up steps: warm-up and profiled ones, the profiler's and
the first calls' costs included. Their split is shown as what it is, but no finding sizes a gain
from it: a workload estimate from those steps (a 1.64x "move the transforms" from two profiled
steps of a script that exited) would be read as the job's. Findings that do not rest on the
step's split (a debugging switch, a model on the CPU) keep theirs."""

from __future__ import annotations

from ..report import Finding, Impact, Verdict


def _steps(n: int) -> str:
    return f"{n} start-up step{'s' if n != 1 else ''}"


# Findings whose figures come from the steps (the workload's, the code's, the memory's); the
# environment's, the settings' and the hardware's rest on checks of their own.
_FROM_STEPS = ("load.", "code.", "memory.", "loader.")


def unsized(findings: list[Finding], verdict: Verdict, steps: int) -> None:
    """The findings estimated from start-up steps lose their figure and say what would size
    them; the workload's (``load.*``), which rest on the step's split alone, become information.
    A line the code names (a sync, a model on the CPU) stays named. The verdict says what its
    figures come from."""
    for f in findings:
        if f.impact.basis != "estimated" or not f.id.startswith(_FROM_STEPS):
            continue
        if f.id.startswith("load."):
            f.severity = "info"
        f.impact = Impact(
            basis="none",
            text=f"Not sized: the run ended before any clean step, and its {_steps(steps)} "
            "include the profiler's and the first calls' costs. Watch a longer run (more "
            "steps) to size it.",
        )
    if verdict.summary:
        verdict.summary = (
            f"From {_steps(steps)} only (the run ended before any clean step): {verdict.summary}"
        )
