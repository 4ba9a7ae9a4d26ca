"""``gpusight run --verify``'s answer as terminal text: items per second before and after, the
gain the what-if predicted, then ``gpusight diff``'s comparison of the two runs."""

from __future__ import annotations

from ..compare import compare_reports, render_comparison
from .driver import RunResult
from .verify import Verified

# The measured gain agrees with the prediction within this share of it (the bar).
AGREE_PCT = 20.0


def _rate(res: RunResult) -> str:
    ips = res.items_per_s(None)
    what = f"{ips:,.1f} items/s" if ips else f"{1000.0 / (res.step_ms or 1.0):,.2f} steps/s"
    return f"{what} ({res.steps} steps, {res.step_ms or 0.0:.2f} ms/step)"


def _predicted(v: Verified, report_name: str | None) -> list[str]:
    if report_name is None:
        return []
    f = v.prepared.finding
    if f is None:
        return [f"  predicted: this patch is not one of {report_name}'s fixes"]
    impact = f.get("impact") or {}
    speedup = impact.get("speedup")
    if not speedup:
        return [f"  predicted: {report_name} gives no gain for {f['id']}"]
    basis = "measured by its what-if" if impact.get("basis") == "measured" else "estimated"
    lines = [f"  predicted: {speedup:.2f}x ({f['id']}, {basis})"]
    gain = v.gain
    if gain:
        off = 100.0 * (gain / speedup - 1.0)
        agree = "within" if abs(off) <= AGREE_PCT else "outside"
        lines.append(f"  verified / predicted: {off:+.0f}% ({agree} ±{AGREE_PCT:.0f}%)")
    return lines


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
