"""Before/after comparison of two reports, and its terminal table (``gpusight diff``).

Works on the reports' dict form. The rules are src/report/compare.ts's, which ``<gs-compare>``
draws in the HTML page: the same speedup, breakdown rows and finding statuses on both sides.
A finding is the same in both reports when its id and its GPU match.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

# Breakdown categories, in the order the chart draws them: the ones the rules split a step into.
from .breakdown_labels import BREAKDOWN_LABELS
from .durations import format_ms
from .rules.workload import REPORTED_KEYS

FindingStatus = Literal["resolved", "new", "still"]
CPU_COMPUTE = "Compute (CPU)"

STATUS_LABELS: dict[str, str] = {"resolved": "resolved", "new": "new", "still": "still there"}


@dataclass(frozen=True)
class BreakdownRow:
    key: str
    before_ms: float | None
    after_ms: float | None
    delta_ms: float | None


@dataclass(frozen=True)
class FindingChange:
    status: FindingStatus
    key: str
    id: str
    title: str
    gpu_index: int | None
    severity_before: str | None
    severity_after: str | None


@dataclass(frozen=True)
class Comparison:
    step_before_ms: float | None
    step_after_ms: float | None
    #: before / after step time: 2.0 is twice as fast. None without both runs.
    speedup: float | None
    busy_before_pct: float | None
    busy_after_pct: float | None
    bottleneck_before: str
    bottleneck_after: str
    breakdown: list[BreakdownRow]
    #: Resolved, then new, then still there; each in its report's order.
    findings: list[FindingChange]

    def by_status(self, status: FindingStatus) -> list[FindingChange]:
        return [f for f in self.findings if f.status == status]


def finding_key(finding: Mapping[str, Any]) -> str:
    gpu = finding.get("gpu_index")
    return f"{finding['id']}@{gpu}" if isinstance(gpu, int) else str(finding["id"])


def _run(report: Mapping[str, Any]) -> Mapping[str, Any]:
    run = report.get("run")
    return run if isinstance(run, Mapping) else {}


def _busy(report: Mapping[str, Any]) -> float | None:
    verdict = report.get("verdict") or {}
    value = verdict.get("gpu_busy_pct")
    if value is None:
        value = _run(report).get("gpu_busy_pct")
    return float(value) if value is not None else None


def compare_reports(before: Mapping[str, Any], after: Mapping[str, Any]) -> Comparison:
    step_before = _run(before).get("step_time_ms")
    step_after = _run(after).get("step_time_ms")
    speedup = (
        step_before / step_after
        if step_before is not None and step_after is not None and step_after > 0
        else None
    )

    bb = _run(before).get("breakdown_ms")
    ab = _run(after).get("breakdown_ms")
    rows: list[BreakdownRow] = []
    if bb is not None or ab is not None:
        for key in REPORTED_KEYS:
            b = float(bb.get(key, 0) or 0) if bb is not None else None
            a = float(ab.get(key, 0) or 0) if ab is not None else None
            if not b and not a:
                continue
            delta = a - b if a is not None and b is not None else None
            rows.append(BreakdownRow(key, b, a, delta))

    before_findings: Sequence[Mapping[str, Any]] = before.get("findings") or []
    after_findings: Sequence[Mapping[str, Any]] = after.get("findings") or []
    before_by_key = {finding_key(f): f for f in before_findings}
    after_by_key = {finding_key(f): f for f in after_findings}

    def change(
        status: FindingStatus,
        f: Mapping[str, Any],
        b: Mapping[str, Any] | None,
        a: Mapping[str, Any] | None,
    ) -> FindingChange:
        gpu = f.get("gpu_index")
        return FindingChange(
            status=status,
            key=finding_key(f),
            id=str(f["id"]),
            title=str(f.get("title", "")),
            gpu_index=gpu if isinstance(gpu, int) else None,
            severity_before=b.get("severity") if b else None,
            severity_after=a.get("severity") if a else None,
        )

    changes = (
        [
            change("resolved", f, f, None)
            for f in before_findings
            if finding_key(f) not in after_by_key
        ]
        + [change("new", f, None, f) for f in after_findings if finding_key(f) not in before_by_key]
        + [
            change("still", f, before_by_key[finding_key(f)], f)
            for f in after_findings
            if finding_key(f) in before_by_key
        ]
    )
    verdict_b = before.get("verdict") or {}
    verdict_a = after.get("verdict") or {}
    return Comparison(
        step_before_ms=float(step_before) if step_before is not None else None,
        step_after_ms=float(step_after) if step_after is not None else None,
        speedup=speedup,
        busy_before_pct=_busy(before),
        busy_after_pct=_busy(after),
        bottleneck_before=str(verdict_b.get("bottleneck", "none")),
        bottleneck_after=str(verdict_a.get("bottleneck", "none")),
        breakdown=rows,
        findings=changes,
    )


# --- text ---------------------------------------------------------------------------------------


def speedup_text(speedup: float | None) -> str:
    """``1.85x faster``, ``1.20x slower``, or ``no change`` within half a percent."""
    if speedup is None:
        return ""
    if abs(speedup - 1) < 0.005:
        return "no change"
    if speedup > 1:
        return f"{speedup:.2f}x faster"
    return f"{1 / speedup:.2f}x slower"


def _ms(value: float | None) -> str:
    return "-" if value is None else format_ms(value)


def _signed_ms(value: float | None) -> str:
    if value is None:
        return "-"
    return ("+" if value > 0 else "") + _ms(value)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _table(rows: list[tuple[str, ...]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for r in rows:
        cells = [c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(r)]
        lines.append("  " + "  ".join(cells).rstrip())
    return lines


def render_comparison(
    comparison: Comparison, before_name: str = "before", after_name: str = "after"
) -> str:
    """The comparison as a plain-text table (ASCII, so any terminal prints it)."""
    c = comparison
    out = [f"gpusight diff: {before_name} -> {after_name}", ""]
    busy_change = (
        f"{c.busy_after_pct - c.busy_before_pct:+.1f} points"
        if c.busy_before_pct is not None and c.busy_after_pct is not None
        else ""
    )
    summary: list[tuple[str, ...]] = [
        ("", "before", "after", "change"),
        ("step time", _ms(c.step_before_ms), _ms(c.step_after_ms), speedup_text(c.speedup)),
        ("GPU busy", _pct(c.busy_before_pct), _pct(c.busy_after_pct), busy_change),
        (
            "bottleneck",
            c.bottleneck_before,
            c.bottleneck_after,
            "same" if c.bottleneck_before == c.bottleneck_after else "changed",
        ),
    ]
    out += _table(summary, right={1, 2})
    if c.step_before_ms is None or c.step_after_ms is None:
        out.append("  (no step time to compare: a report without a run)")
    if c.breakdown:
        out += ["", "step-time breakdown (per step)"]
        rows: list[tuple[str, ...]] = [("", "before", "after", "change")]
        # A run that used no GPU computed on the host: no GPU claim in its label.
        gpu = c.busy_before_pct is not None or c.busy_after_pct is not None
        rows += [
            (
                BREAKDOWN_LABELS.get(r.key, r.key) if gpu or r.key != "compute" else CPU_COMPUTE,
                _ms(r.before_ms),
                _ms(r.after_ms),
                _signed_ms(r.delta_ms),
            )
            for r in c.breakdown
        ]
        out += _table(rows, right={1, 2, 3})
    out += ["", "findings"]
    if not c.findings:
        out.append("  none in either report")
    else:
        rows = []
        for f in c.findings:
            sev = (
                f"{f.severity_before} -> {f.severity_after}"
                if f.severity_before and f.severity_after and f.severity_before != f.severity_after
                else (f.severity_after or f.severity_before or "")
            )
            rows.append((STATUS_LABELS[f.status], f.key, sev, f.title))
        out += _table(rows, right=set())
    counts = ", ".join(
        f"{len(c.by_status(s))} {STATUS_LABELS[s]}" for s in ("resolved", "new", "still")
    )
    out += ["", f"findings: {counts}"]
    return "\n".join(out) + "\n"


# A measured gain agrees with the one a report predicted within this share of it.
AGREE_PCT = 20.0


def prediction_lines(
    finding: Mapping[str, Any] | None, gain: float | None, name: str, missing: str, ratio: str
) -> list[str]:
    """The gain ``name`` (a report) predicted for ``finding``'s fix and how the measured
    ``gain`` reads against it (``ratio``: what the measured gain is called); ``missing`` where
    the report has no such finding. ``gpusight run --verify`` and ``%%gpusight --compare-to``."""
    if finding is None:
        return [f"  predicted: {missing}"]
    impact = finding.get("impact") or {}
    speedup = impact.get("speedup")
    if not speedup:
        return [f"  predicted: {name} gives no gain for {finding['id']}"]
    basis = "measured by its what-if" if impact.get("basis") == "measured" else "estimated"
    lines = [f"  predicted: {speedup:.2f}x ({finding['id']}, {basis})"]
    if gain:
        off = 100.0 * (gain / speedup - 1.0)
        agree = "within" if abs(off) <= AGREE_PCT else "outside"
        lines.append(f"  {ratio} / predicted: {off:+.0f}% ({agree} ±{AGREE_PCT:.0f}%)")
    return lines
