"""``gpusight run --verify``'s answer as terminal text: items per second before and after, the
gain the what-if predicted, then ``gpusight diff``'s comparison of the two runs."""

from __future__ import annotations

from ..compare import compare_reports, prediction_lines, render_comparison
from .outcome import RunResult
from .verify import Verified


def _rate(res: RunResult) -> str:
    ips = res.items_per_s(None)
    what = f"{ips:,.1f} items/s" if ips else f"{1000.0 / (res.step_ms or 1.0):,.2f} steps/s"
    return f"{what} ({res.steps} steps, {res.step_ms or 0.0:.2f} ms/step)"


def _predicted(v: Verified, report_name: str | None) -> list[str]:
    if report_name is None:
        return []
    missing = f"this patch is not one of {report_name}'s fixes"
    return prediction_lines(v.prepared.finding, v.gain, report_name, missing, "verified")


def render_verified(v: Verified, diff_name: str, report_name: str | None) -> str:
    gain = v.gain
    lines = [
        f"gpusight verify: {diff_name}",
        "",
        f"  original: {_rate(v.before)}",
        f"  patched:  {_rate(v.after)}",
        f"  measured: {gain:.2f}x items per second (noise ±{v.noise_pct:.1f}%)"
        if gain
        else "  measured: no rate to compare",
        *_predicted(v, report_name),
        *(f"  note: {n}" for n in v.notes),
        "",
    ]
    comparison = compare_reports(v.before.report or {}, v.after.report or {})
    return "\n".join(lines) + "\n" + render_comparison(comparison, "original", "patched")
