"""The report's ``run.host_lines`` (schema 1.6) from the line clock's times: each line's host
time per step, its share of the traced steps, whether it runs inside a ``forward``, and whether
the host waits there (a sync the watch saw on that line, or a call that waits for the GPU)."""

from __future__ import annotations

from typing import Any

from ..rules.host_line_fix import HostLine
from .host_lines import LineTimes

# Calls that make the host wait for the GPU (or its allocator) rather than work.
_WAITS = ("empty_cache(", "synchronize(")
SHOWN = 8


def host_lines_run(times: LineTimes | None, syncs: list[dict[str, Any]]) -> dict[str, Any] | None:
    if times is None:
        return None
    if times.unavailable is not None or not times.steps:
        return {"steps": 0, "lines": [], "unavailable": times.unavailable or "no step was timed"}
    sync_at = {
        (s["source"]["file"], s["source"]["line"])
        for s in syncs
        if isinstance(s.get("source"), dict)
    }
    total = max(1, times.total_ns)
    rows = []
    for ln in times.lines[:SHOWN]:
        code = ln.code or ""
        row: dict[str, Any] = {
            "file": ln.file,
            "line": ln.line,
            "function": ln.function,
            "ms_per_step": round(ln.ns / 1e6 / times.steps, 3),
            "share_pct": round(100.0 * ln.ns / total, 1),
            "in_forward": ln.function.rsplit(".", 1)[-1] == "forward",
            "waiting": (ln.file, ln.line) in sync_at or any(w in code for w in _WAITS),
        }
        if code:
            row["code"] = code
        rows.append(row)
    return {
        "steps": times.steps,
        "step_ms": round(times.total_ns / 1e6 / times.steps, 3),
        "lines": rows,
    }


def host_line_evidence(times: LineTimes | None) -> list[HostLine]:
    """The same lines as the rules read them."""
    if times is None or times.unavailable is not None or not times.steps:
        return []
    total = max(1, times.total_ns)
    return [
        HostLine(
            ln.file,
            ln.line,
            ln.code,
            ln.function,
            ln.ns / 1e6 / times.steps,
            100.0 * ln.ns / total,
            in_forward=ln.function.rsplit(".", 1)[-1] == "forward",
            waiting=any(w in (ln.code or "") for w in _WAITS),
        )
        for ln in times.lines
    ]
