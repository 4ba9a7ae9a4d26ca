"""``run.speed_of_light`` in words, for the terminal renderers (the HTML and the widget draw it
from the same fields)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def flops_text(flops: float) -> str:
    for scale, unit in ((1e15, "PFLOP"), (1e12, "TFLOP"), (1e9, "GFLOP"), (1e6, "MFLOP")):
        if flops >= scale:
            return f"{flops / scale:.3g} {unit}"
    return f"{flops:.3g} FLOP"


def rate_text(tflops: float) -> str:
    return f"{tflops:.3g} TFLOP/s" if tflops >= 1 else f"{tflops * 1e3:.3g} GFLOP/s"


def _mix(by: Mapping[str, float]) -> str:
    total = sum(by.values()) or 1.0
    return ", ".join(f"{p} {100.0 * f / total:.0f}%" for p, f in by.items())


def _ceiling(sol: Mapping[str, Any], source: str) -> Mapping[str, Any] | None:
    main = sol.get("precision")
    return next(
        (
            c
            for c in sol.get("ceilings") or []
            if c.get("source") == source and c.get("precision") == main
        ),
        None,
    )


def mfu_text(sol: Mapping[str, Any]) -> str | None:
    """ "38% of the bf16 rate measured on this GPU (790 TFLOP/s); 30% of the datasheet's"."""
    parts = []
    for key, source, words in (
        ("mfu_pct", "measured", "measured on this GPU"),
        ("mfu_datasheet_pct", "datasheet", "on the datasheet"),
    ):
        pct = sol.get(key)
        c = _ceiling(sol, source)
        if pct is None or c is None or not c.get("tflops"):
            continue
        parts.append(f"{pct:.0f}% of the {c['precision']} rate {words} ({c['tflops']:.0f} TFLOP/s)")
    return "; ".join(parts) or None


def lines(sol: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """(label, text) rows: FLOPs per step, the rate reached, MFU or why there is none."""
    if not sol:
        return []
    rows: list[tuple[str, str]] = []
    flops = sol.get("flops_per_step")
    if flops:
        rows.append(
            ("FLOPs per step", f"{flops_text(flops)} ({_mix(sol.get('flops_by_precision') or {})})")
        )
    if sol.get("achieved_tflops") is not None and sol.get("step_time_ms"):
        rows.append(
            (
                "reached",
                f"{rate_text(sol['achieved_tflops'])} over a {sol['step_time_ms']:.3g} ms step",
            )
        )
    mfu = mfu_text(sol)
    if mfu:
        rows.append(("MFU", mfu))
    if sol.get("unavailable"):
        rows.append(("MFU" if flops else "FLOPs", f"not given: {sol['unavailable']}"))
    return rows
