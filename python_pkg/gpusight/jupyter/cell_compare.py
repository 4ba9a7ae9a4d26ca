"""``%%gpusight --compare-to N [--finding ID]``: the cell watched, then compared with an earlier
watched cell's report (``cell [N]`` of this kernel, or a saved report): items per second before
and after, the gain the earlier report predicted for the finding whose fix was applied, then
``gpusight diff``'s comparison. The notebook's "Verify" after "Apply to that cell" runs this.
"""

from __future__ import annotations

import os
from typing import Any

from ..compare import compare_reports, prediction_lines, render_comparison
from ..report import Report

_BY_COUNT: dict[int, Report] = {}
"""The report of each ``%%gpusight`` cell this kernel ran, by its execution count."""


def remember(count: int, report: Report) -> None:
    _BY_COUNT[count] = report


def earlier(ref: str) -> tuple[Report, str]:
    """The report ``ref`` names (an execution count, ``[N]`` or ``In[N]``, or a saved report's
    path) and its name in the comparison; a ``UsageError`` that says what exists otherwise."""
    from IPython.core.error import UsageError

    from ..report import load_report
    from ..report_parse import report_from_dict
    from ..report_schema import ReportValidationError

    digits = ref.removeprefix("In").strip("[]")
    if digits.isdigit():
        got = _BY_COUNT.get(int(digits))
        if got is None:
            known = ", ".join(f"[{n}]" for n in sorted(_BY_COUNT)) or "none yet"
            raise UsageError(
                f"%%gpusight --compare-to {ref}: no %%gpusight cell [{digits}] in this kernel "
                f"(watched cells: {known}); give its number, or a report saved with --json"
            )
        return got, f"cell [{digits}]"
    if not os.path.exists(ref):
        raise UsageError(
            f"%%gpusight --compare-to {ref}: neither a watched cell's number nor a report file"
        )
    try:
        return report_from_dict(load_report(ref)), os.path.basename(ref)
    except (OSError, ReportValidationError) as exc:
        raise UsageError(f"%%gpusight --compare-to {ref}: {exc}") from None


def items_per_s(report: Report) -> float | None:
    run: dict[str, Any] = report.run or {}
    step, items = run.get("step_time_ms"), run.get("items_per_step")
    if not step:
        return None
    return float(items or 1) / float(step) * 1000.0


def render(before: Report, after: Report, name: str, finding_id: str | None) -> str:
    """The comparison as text: the measured gain first, the prediction beside it."""
    b, a = items_per_s(before), items_per_s(after)
    unit = "items/s" if (before.run or {}).get("items_per_step") else "steps/s"
    gain = a / b if a and b else None
    lines = [f"gpusight verify: {name} -> this cell", ""]
    lines.append(f"  before:   {b:,.1f} {unit}" if b else "  before:   no steps measured")
    lines.append(f"  after:    {a:,.1f} {unit}" if a else "  after:    no steps measured")
    lines.append(f"  measured: {gain:.2f}x" if gain else "  measured: no rate to compare")
    old = before.to_dict()
    if finding_id:
        found = next((f for f in old["findings"] if f["id"] == finding_id), None)
        missing = f"{name} has no finding {finding_id}"
        lines += prediction_lines(found, gain, name, missing, "measured")
    comparison = compare_reports(old, after.to_dict())
    return "\n".join(lines) + "\n\n" + render_comparison(comparison, name, "this cell")
