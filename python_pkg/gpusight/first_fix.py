"""The finding to act on first, as every surface shows it (``src/view/first-fix.ts`` is its twin).

A CPU-only build on a machine with an NVIDIA GPU comes before anything: nothing else matters
until that GPU can be used. Then a lead (``report.LEADS``: anomaly detection or a blocking
launch slowed every step measured, so every other figure is the switch's too). Otherwise the
largest measured gain, then the largest estimated
share (``report.sort_findings``), among findings with a fix: a critical one with a gain figure,
else any that is more than information.
"""

from __future__ import annotations

from .knobs.gain_rule import loses
from .report import LEADS, Finding, Impact, Report, sort_findings

CPU_ONLY_ID = "env.cpu_only_build"


def first_finding(report: Report) -> Finding | None:
    gpu_here = bool(report.machine.get("gpus"))
    findings = [f for f in report.findings if gpu_here or f.id != CPU_ONLY_ID]
    if gpu_here:
        lead = next((f for f in findings if f.id == CPU_ONLY_ID), None)
        if lead is not None:
            return lead
    ranked = [f for f in sort_findings(findings) if f.fix.text]
    lead = next((f for f in ranked if f.id in LEADS and f.severity != "info"), None)
    return lead or next(
        (f for f in ranked if f.severity == "critical" and f.impact.basis != "none"),
        next((f for f in ranked if f.severity != "info"), None),
    )


def gain_text(impact: Impact) -> str | None:
    """``measured 2.31x``, ``estimated 1.21x to 1.54x``, ``estimated up to 18% of the step``;
    None without a figure."""
    if impact.basis == "measured" and impact.speedup:
        # Slower by more than a win must gain: said, so no reader takes it for a gain.
        slower = ", slower" if loses(impact.speedup, 0.0) else ""
        return f"measured {impact.speedup:.2f}x{slower}"
    if impact.basis != "estimated":
        return None
    if impact.speedup_range:
        lo, hi = impact.speedup_range
        return f"estimated {lo:.2f}x to {hi:.2f}x"
    if impact.speedup and impact.speedup > 1:
        share = (
            f", up to {impact.recoverable_pct:.0f}% of the step" if impact.recoverable_pct else ""
        )
        return f"estimated {impact.speedup:.2f}x{share}"
    if impact.recoverable_pct:
        return f"estimated up to {impact.recoverable_pct:.0f}% of the step"
    return None


def changed_lines(patch: str, most: int = 4) -> list[str]:
    """The diff's first removed and added lines (``-``/``+``), file headers aside."""
    out: list[str] = []
    for line in patch.splitlines():
        if line.startswith(("---", "+++")):
            continue
        if line.startswith(("-", "+")) and line[1:].strip():
            out.append(line)
            if len(out) >= most:
                break
    return out
