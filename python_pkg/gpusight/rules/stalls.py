"""Periodic stalls in a step-time series: which steps stall, how often, and why. Pure.

A DataLoader whose workers cannot keep up delivers batches in bursts: each worker hands over
its batch at about the same time, the loop eats them at the GPU's pace, then waits for the next
round. The step times read 53, 53, 58, 634, 53, 53, 124, 611 ms: a median of 53 ms describes
none of the time lost, and GPU utilisation swings between 0 and 100 %. Here the stalled steps
are told apart from the typical ones, their period is found, and the period is matched with
what usually causes it (k = ``num_workers``: the workers are too few; one stall per epoch: the
workers start anew each epoch).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

# A stalled step takes at least this many times the typical (lower-quartile) step ...
STALL_RATIO = 2.0
# ... and sits above the typical step by this share of the way to the longest step, so that
# a moderately slow step among 10x stalls is not taken for one of them.
STALL_SPAN = 0.3
# Stalls are named when they cost at least this share of the whole window.
STALL_SHARE_PCT = 10.0
# A period is regular when at least this share of the stalled steps recur one period later.
REGULAR_SHARE = 0.8
# The stalled steps' excess is the loader's when at least this share of it is data wait.
DATA_SHARE = 0.5
# Workers suggested: enough to deliver a batch in this fraction of the busy step, at least four
# where the cores allow.
SPARE = 1.5
MIN_WORKERS = 4


@dataclass
class Stall:
    steps: list[int]
    """0-based indices (into the series analysed) of the stalled steps."""
    stall_ms: float
    """Mean excess of a stalled step over the typical step."""
    share_pct: float
    """Share of the whole window's time that the stalls' excess takes."""
    typical_ms: float
    period_steps: int | None
    """Steps from one stall to the next when they recur regularly; None when irregular."""
    cause: str
    """``loader_workers``, ``epoch_start``, ``data_wait``, ``host``."""
    text: str
    data_share: float = 0.0
    """Share of the stalls' excess spent waiting for the DataLoader."""
    per_period: int = 1
    """Stalled steps in each period (two workers' batches late together: 2)."""
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {
            "period_steps": self.period_steps,
            "stall_ms": round(self.stall_ms, 3),
            "share_pct": round(self.share_pct, 2),
            "typical_ms": round(self.typical_ms, 3),
            "cause": self.cause,
            "text": self.text,
            "steps": list(self.steps),
            "per_period": self.per_period,
        }


def ordinal(k: int) -> str:
    """2 -> '2nd', 4 -> '4th', 11 -> '11th', 23 -> '23rd'."""
    if 10 <= k % 100 <= 20:
        return f"{k}th"
    return f"{k}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th') }"


def stall_phrase(s: Stall, verb: str) -> str:
    """'every 4th step waits', '2 of every 4 steps wait', '12 steps wait' (``verb`` plural)."""
    if s.period_steps and s.per_period == 1:
        return f"every {ordinal(s.period_steps)} step {verb}s"
    if s.period_steps:
        return f"{s.per_period} of every {s.period_steps} steps {verb}"
    return f"{len(s.steps)} steps {verb}"


def _period(stalled: list[bool]) -> int | None:
    """The smallest shift after which the stall pattern repeats: most stalled steps have a
    stalled step that many steps later. Four workers often leave two slow steps, then two fast
    ones: the period is 4 although the gaps between stalls read 1, 3, 1, 3."""
    n = len(stalled)
    for p in range(2, n // 2 + 1):
        starts = [i for i in range(n - p) if stalled[i]]
        if len(starts) < 2:
            continue
        if sum(stalled[i + p] for i in starts) >= REGULAR_SHARE * len(starts):
            return p
    return None


def find_stalls(
    times_ms: list[float],
    data_wait_ms: list[float] | None = None,
    epoch_starts: list[int] | None = None,
    num_workers: int | None = None,
    prefetch_factor: int | None = None,
) -> Stall | None:
    """The stall pattern in ``times_ms``, or None when no stalls cost a tenth of the window."""
    n = len(times_ms)
    if n < 6:
        return None
    # The lower quartile: with two workers every other step stalls, and the median falls
    # between the two kinds of step.
    typical = statistics.quantiles(times_ms, n=4, method="inclusive")[0]
    longest = max(times_ms)
    if typical <= 0 or longest <= 0:
        return None
    limit = max(STALL_RATIO * typical, typical + STALL_SPAN * (longest - typical))
    idx = [i for i, t in enumerate(times_ms) if t > limit]
    total = sum(times_ms)
    excess = sum(times_ms[i] - typical for i in idx)
    if len(idx) < 2 or total <= 0 or 100.0 * excess / total < STALL_SHARE_PCT:
        return None
    waits = data_wait_ms if data_wait_ms and len(data_wait_ms) == n else None
    data_share = 0.0
    if waits is not None and excess > 0:
        # The typical step's wait, as the typical step's time: the lower quartile (with two
        # workers half the steps stall, and the median wait falls between the two kinds).
        base_wait = statistics.quantiles(waits, n=4, method="inclusive")[0]
        data_share = max(0.0, min(1.0, sum(waits[i] - base_wait for i in idx) / excess))
    stalled_at = set(idx)
    period = _period([i in stalled_at for i in range(n)])
    per = max(1, round(len(idx) * period / n)) if period else 1
    epochs = set(epoch_starts or [])
    at_epoch = sum(i in epochs for i in idx)
    stall_ms = excess / len(idx)
    every = (
        (f"every {ordinal(period)} step" if per == 1 else f"{per} of every {period} steps")
        if period
        else "irregularly"
    )
    head = (
        f"{len(idx)} of {n} steps stall ({every}), each about {stall_ms:.0f} ms longer than "
        f"the typical {typical:.1f} ms step: {100.0 * excess / total:.0f}% of the time"
    )
    if epochs and at_epoch >= max(2, REGULAR_SHARE * len(idx)):
        cause = "epoch_start"
        why = (
            "the stalls fall at the start of each epoch, where the DataLoader starts its "
            "worker processes anew (persistent_workers=False) and waits for their first batches"
        )
    elif data_share >= DATA_SHARE and num_workers and period and period == num_workers:
        cause = "loader_workers"
        why = (
            f"the period matches num_workers={num_workers}: the workers finish their batches at "
            "about the same time, the loop uses them up, then waits for the next round; too few "
            "workers (or too slow ones) to keep up"
        )
    elif data_share >= DATA_SHARE:
        cause = "data_wait"
        why = (
            f"{100 * data_share:.0f}% of the stalls' time is spent waiting for the next batch "
            "from the DataLoader"
        )
    else:
        cause = "host"
        why = (
            "the stalled steps lose the time outside the DataLoader (periodic host work such as "
            "logging, evaluation, checkpoints or garbage collection, or a sync)"
        )
    return Stall(
        steps=idx,
        stall_ms=stall_ms,
        share_pct=100.0 * excess / total,
        typical_ms=typical,
        period_steps=period,
        cause=cause,
        text=f"{head}; {why}.",
        data_share=data_share,
        per_period=per,
    )


def workers_to_keep_up(
    num_workers: int | None,
    mean_step_ms: float,
    busy_step_ms: float,
    data_wait_ms: float,
    cpu_count: int | None,
) -> tuple[int, float] | None:
    """Workers that would deliver a batch per step, and the step time they would give.

    With ``w`` workers that each take ``T`` ms to build a batch, the loader hands over ``w``
    batches every ``T`` ms. When it sets the pace, the mean step is ``T / w``, so
    ``T = w * mean step``; with no workers the main process builds each batch in about the data
    wait. The step then needs ``T / busy step`` workers; the cores bound them.
    """
    if busy_step_ms <= 0 or mean_step_ms <= 0:
        return None
    cores = max(1, cpu_count or 1)
    per_batch = num_workers * mean_step_ms if num_workers else data_wait_ms
    if per_batch <= 0:
        return None
    # ceil, with half again to spare: workers share the cores with the training process, and
    # a batch's time in a worker includes handing it over.
    need = int(-(-per_batch * SPARE // busy_step_ms))
    cap = max(1, cores - 1) if cores > 2 else cores
    workers = max(min(MIN_WORKERS, cap), min(cap, need))
    step = max(busy_step_ms, per_batch / workers)
    return workers, step
