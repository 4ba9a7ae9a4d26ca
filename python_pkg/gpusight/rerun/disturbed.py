"""Whether the machine changed under the what-if: its control runs (the script unchanged,
unprofiled) against the unchanged run the diagnosis came from.

A control is the same script as the baseline without the profiler, so it is never much slower
than the baseline; where the controls ran several times slower, something else took the
machine while they ran, and every gain measured against them is that load's, not the change's
(on a busy 2-core machine: controls of 52-89 ms a step against the baseline's 6.3 ms read
"num_workers=2 makes the script 7.56x faster" on a compute-bound script). No row is kept then.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .driver import Outcome

SLOWER = 2.0
"""Controls whose median step is this many times the baseline's: the machine was disturbed."""


def disturbed(out: Outcome) -> str | None:
    """Why the rows cannot stand (the figures said), or None."""
    base = out.baseline.step_ms
    runs = [r for r in (out.control, *out.controls) if r is not None and r.ok]
    steps = [r.step_ms for r in runs if r.step_ms]
    if not base or not steps:
        return None
    typical = statistics.median(steps)
    if typical < SLOWER * base:
        return None
    shown = ", ".join(f"{s:.1f}" for s in steps)
    return (
        f"not measured: the machine was too noisy (the unchanged script's control runs took "
        f"{shown} ms a step against {base:.1f} ms in the run diagnosed: another load took the "
        "machine; run the what-if again when it is quiet)"
    )
