"""What the profiler window cost the run, for the report's ``run.kernels``."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .watched_run import WatchedRun


def window_cost(w: WatchedRun, steady: list[Any], read_ms: float | None) -> dict[str, float]:
    """What the profiler window cost the run (ms): starting and stopping it (the stop waits for
    the GPU), the profiled steps' excess over the steady median, reading the trace back."""
    rec = w.recorder
    if rec is None or w.window is None or not w.window.started:
        return {}
    out = {
        "window_start_ms": round(w.window_start_ms, 3),
        "window_stop_ms": round(w.window_stop_ms, 3),
    }
    profiled = [r.duration_ns for r in rec.records if r.phase in ("profile_warmup", "profile")]
    if steady and profiled:
        med = statistics.median(r.duration_ns for r in steady)
        out["window_steps_excess_ms"] = round(max(0, sum(profiled) - med * len(profiled)) / 1e6, 3)
    if read_ms is not None:
        out["window_read_ms"] = round(read_ms, 3)
    out["window_cost_ms"] = round(sum(out.values()), 3)
    return out
