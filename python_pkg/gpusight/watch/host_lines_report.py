"""The line clock's times as the rules read them (``HostLine``: time per step, share of the
traced steps, inside a ``forward`` or not, the host waiting there or not: a sync the watch saw
on that line, or a call that waits for the GPU), and as the report's ``run.host_lines``
(schema 1.6), made from the same lines."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..rules.host_line_fix import HostLine
from .host_lines import LineTimes

# Calls that make the host wait for the GPU (or its allocator) rather than work.
_WAITS = ("empty_cache(", "synchronize(")
SHOWN = 8


def host_line_evidence(
    times: LineTimes | None, syncs: Iterable[tuple[str | None, int | None]] = ()
) -> list[HostLine]:
    """The timed lines, costliest first; ``syncs``: the (file, line) of the syncs seen."""
    if times is None or times.unavailable is not None or not times.steps:
        return []
    sync_at = set(syncs)
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
            waiting=(ln.file, ln.line) in sync_at or any(w in (ln.code or "") for w in _WAITS),
        )
        for ln in times.lines
    ]


def host_lines_run(times: LineTimes | None, lines: list[HostLine]) -> dict[str, Any] | None:
    if times is None:
        return None
    if times.unavailable is not None or not times.steps:
        return {"steps": 0, "lines": [], "unavailable": times.unavailable or "no step was timed"}
    rows = []
    for ln in lines[:SHOWN]:
        row: dict[str, Any] = {
            "file": ln.file,
            "line": ln.line,
            "function": ln.function,
            "ms_per_step": round(ln.ms, 3),
            "share_pct": round(ln.share_pct, 1),
            "in_forward": ln.in_forward,
            "waiting": ln.waiting,
        }
        if ln.code:
            row["code"] = ln.code
        rows.append(row)
    return {
        "steps": times.steps,
        "step_ms": round(times.total_ns / 1e6 / times.steps, 3),
        "lines": rows,
    }
