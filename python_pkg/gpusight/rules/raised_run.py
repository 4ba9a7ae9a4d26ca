"""A watched run that raised before its first measured step is reported as that exception.

Its one step (or none) is start-up: profiler, first CUDA calls, the traceback itself. Any
split of it would be read as the job's, and a finding built on it claims a gain from it (a
TypeError in ``forward`` once read as "host work outside the model, 20x"). So the verdict is the
exception and its line, the only finding is ``code.raised`` with no gain, and the run carries
no step figures. A run that raised after measured steps keeps its analysis of those steps; the
note says where it stopped.
"""

from __future__ import annotations

from typing import Any

from ..report import Evidence, Finding, Fix, Impact, Report, SourceLine, Verdict
from .workload_impacts import site_text

FINDING_ID = "code.raised"


def raised_before_measuring(report: Report) -> bool:
    error = (report.run or {}).get("error")
    return isinstance(error, dict) and error.get("measured_steps") == 0


def where(error: dict[str, Any]) -> str:
    """``x.py:12 in Net.forward``, or '' without a line of the user's."""
    src = error.get("source")
    if not isinstance(src, dict):
        return ""
    func = f" in {error['function']}" if error.get("function") else ""
    return f"{site_text(src['file'], src['line'])}{func}"


def outcome_note(error: dict[str, Any]) -> str:
    at = where(error)
    at = f" at {at}" if at else ""
    what = f"the watched code raised {error['type']}{at}"
    n = int(error["measured_steps"])
    if n == 0:
        return f"{what} before its first measured step: nothing was measured"
    return f"{what} after {n} measured step{'s' if n != 1 else ''}; the report covers them"


def _source(row: Any) -> SourceLine | None:
    if not isinstance(row, dict):
        return None
    return SourceLine(file=row["file"], line=row["line"], code=row.get("code"))


def raised_finding(error: dict[str, Any]) -> Finding:
    at = where(error)
    message = error.get("message") or ""
    evidence = [Evidence("exception", f"{error['type']}: {message}".rstrip(": "))]
    src = _source(error.get("source"))
    if src is not None:
        label = "raised in forward" if error.get("in_forward") else "raised at"
        evidence.append(Evidence(label, at, source=src))
    call = _source(error.get("call"))
    if call is not None:
        evidence.append(Evidence("called from", site_text(call.file, call.line), source=call))
    fix_at = f" at {at}" if at else ""
    return Finding(
        id="code.raised",
        severity="critical",
        title=f"The watched code raised {error['type']} before its first measured step",
        evidence=evidence,
        impact=Impact(basis="none", text="Nothing was measured: the run stopped at its start."),
        fix=Fix(
            text=f"Fix the {error['type']}{fix_at} (run the code without gpusight to see the "
            "whole traceback), then watch it again.",
        ),
    )


def report_raised(report: Report, run: dict[str, Any]) -> Report:
    """``report`` as the exception: verdict, one finding, and the run without step figures
    (what the watch saw of start-up is no step of the job)."""
    error = run["error"]
    at = where(error)
    text = str(error.get("message") or "").rstrip(". ")
    message = f": {text}" if text else ""
    report.verdict = Verdict(
        bottleneck="none",
        gpu_busy_pct=None,
        summary=f"The watched code raised {error['type']}"
        + (f" at {at}" if at else "")
        + f" before its first measured step{message}. Nothing was measured: fix the error "
        "and watch it again.",
    )
    report.findings = [raised_finding(error)]
    keep = ("label", "warmup_steps", "timeline", "peak_memory_bytes", "memory_capacity_bytes")
    report.run = {"steps": 0, "step_time_ms": 0.0, **{k: run[k] for k in keep if k in run}}
    report.run["error"] = error
    return report
