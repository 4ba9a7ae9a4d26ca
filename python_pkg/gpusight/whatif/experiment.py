"""What every experiment shares: the :class:`Experiment` interface, its :class:`Outcome`, and the
gates that say whether a loader change can be measured at all.

``applies(ctx)`` says why an experiment is skipped (None: it runs); ``apply(ctx)`` measures the
change on copies, interleaved with the baseline, and returns an :class:`Outcome`, or raises
:class:`~gpusight.whatif.context.Skip` with a reason when it cannot.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from ..knobs.base import Arm as Plan
from ..report import Scalar, WhatIf
from .arms import Arm, source_of
from .context import LOADER_SHARE, Context, Skip
from .runner import Comparison


@dataclass
class Outcome:
    """A measured experiment: the what-if row, and the variant to combine if it won."""

    key: str
    what_if: WhatIf
    winner: Plan | None = None
    finding_id: str | None = None
    params: dict[str, Any] = field(default_factory=dict)  # fills the fix snippet
    notes: list[str] = field(default_factory=list)

    @property
    def speedup(self) -> float:
        return self.what_if.speedup or 0.0


def _round(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(float(x), nd)


def outcome_of(
    key: str,
    change: str,
    finding_id: str,
    cmp: Comparison,
    variant: Plan,
    params: dict[str, Scalar] | None = None,
    series: list[dict[str, Any]] | None = None,
    scope: Literal["end_to_end", "compute_only"] | None = None,
) -> Outcome:
    """The row of a comparison; its scope follows where the variant's batches came from: the
    user's loader (or the dataset kept on the device, which replaces it) is the whole step,
    cached batches are the step's compute alone."""
    wins = cmp.wins()
    what = WhatIf(
        scope=scope or ("compute_only" if source_of(variant) == "cached" else "end_to_end"),
        change=change,
        finding_id=finding_id,
        params={**(params or {}), "repeats": cmp.pairs, "won": wins},
        before_ms=_round(cmp.before_ms),
        after_ms=_round(cmp.after_ms),
        speedup=_round(cmp.speedup),
        noise_pct=_round(cmp.noise_pct, 1),
        series=series,
    )
    return Outcome(key, what, winner=variant if wins else None, finding_id=finding_id)


def cpu_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class Experiment:
    key: str
    finding_id: str
    label: str
    group: str  # "loader" or "compute"
    startup_s: float = 0.0
    """Seconds it takes at least, however short the step (compiling): measured last, and left
    out when choosing how many repetitions fit."""

    def applies(self, ctx: Context) -> str | None:
        raise NotImplementedError

    def apply(self, ctx: Context) -> Outcome:
        raise NotImplementedError

    # At most this share of what is left: a sweep of several points may take more than one change.
    share: ClassVar[float] = 0.4

    def share_of(self, ctx: Context) -> float:
        return self.share

    def cost_s(self, ctx: Context) -> float:
        """A rough price, to skip what the budget cannot pay for."""
        return ctx.reps * (2 * ctx.block_s("cached") + 0.1)

    def measure_one(
        self,
        ctx: Context,
        variant: Plan,
        change: str,
        against: str = "cached",
        params: dict[str, Scalar] | None = None,
        scale: float = 1.0,
        base: Arm | None = None,
    ) -> Outcome:
        """Measure ``variant`` against ``against`` (or against ``base``, which the caller drops)."""
        cmp, arm = ctx.measure(variant, against=against, base=base, scale=scale)
        try:
            if cmp.pairs == 0:
                raise Skip("budget exhausted before the first repetition")
            extra = dict(params or {})
            for knob in arm.knobs:
                if arm.first_step_s is not None:
                    extra.update(knob.local_first_step(arm.first_step_s))
            out = outcome_of(self.key, change, self.finding_id, cmp, variant, extra)
            for knob in arm.knobs:
                out.notes.extend(knob.local_notes(arm.hooks.hits))
            return out
        finally:
            ctx.drop(arm)


def input_bound_gate(ctx: Context) -> str | None:
    """Measured: is a step with loading slower than the same step on cached batches?"""
    if not ctx.loader_base_ms or not ctx.cached_base_ms:
        return None
    lo = statistics.median(ctx.loader_base_ms)
    ca = statistics.median(ctx.cached_base_ms)
    # Below this, no loader change can gain what the num_workers sweep calls a step up.
    if lo < ca * LOADER_SHARE:
        return (
            f"the loader is not the bottleneck: steps with loading took {lo:.1f} ms, "
            f"from cached batches {ca:.1f} ms"
        )
    return None
