"""The num_workers sweep (``NumWorkers``): worker counts tried up to the knee of the loader's
throughput, and what the other loader experiments read from its winner.
"""

from __future__ import annotations

import statistics
from typing import Any

from torch.utils.data import IterableDataset

from ..knobs.base import Arm as Plan
from ..knobs.gain_rule import MIN_GAIN, knee_of, sweep_goes_on
from .arms import planned
from .context import Context, Skip
from .experiment import Experiment, Outcome, input_bound_gate, loader_gate, outcome_of
from .runner import Comparison


def loader_workers(ctx: Context) -> int:
    """Workers of the user's loader, or of the winning num_workers sweep."""
    won = ctx.results.get("num_workers")
    if won is not None and won.winner is not None:
        return int(won.winner.changes["num_workers"])
    return int(getattr(ctx.work.loader, "num_workers", 0) or 0)


def winner_block_s(ctx: Context, variant: Plan) -> float:
    """Seconds one block of a loader ``variant`` takes, worker start-up included: at the sweep
    winner's measured step time when it runs the winner's workers, else at the user's loader's."""
    w = ctx.workers(variant)
    ms = ctx.loader_step_ms(w)
    if ms is None:
        return ctx.block_s("loader")
    steps = ctx.steps_for(variant) + ctx.warmup(variant)
    start = NumWorkers.START_S + NumWorkers.START_PER_WORKER_S * w
    return steps * ms / 1000 + start


def whole_rounds(steps: int, workers: int) -> int:
    """``steps`` rounded up to whole rounds of the loader's workers (at least two rounds)."""
    if workers <= 1:
        return max(1, steps)
    return max(2, -(-steps // workers)) * workers


def worker_points(now: int, cores: int) -> list[int]:
    """Worker counts a sweep tries after ``now``: 2, 4, 8, ... below the cores, and the cores."""
    points = [w for w in (2, 4, 8, 16, 32, 64, 128) if now < w <= cores]
    if cores > now and cores not in points:
        points.append(cores)
    return sorted(points)


def goes_on(speedups: list[float]) -> bool:
    """The knee rule of every what-if (``gain_rule.sweep_goes_on``), with the user's own
    workers (1x) as the sweep's first point."""
    return sweep_goes_on([1.0, *speedups])


def walk_sweep(points: list[int], speedup_at: Any) -> tuple[list[tuple[int, float]], int]:
    """The sweep's decisions on given measurements: (points visited with their speedups, the
    answer). ``speedup_at(w)`` stands for a measurement; ``NumWorkers.apply`` makes the same
    decisions on real ones (and stops early when the budget is out)."""
    results: list[tuple[int, float]] = []
    for w in points:
        results.append((w, float(speedup_at(w))))
        if not goes_on([sp for _, sp in results]):
            break
    return results, knee_of(results)


class NumWorkers(Experiment):
    """A sweep of worker counts to the knee: 2, 4, 8, ... up to the CPU cores, short trials.

    Each point is two interleaved pairs of short blocks (a few steps of the user's loader, whole
    rounds of the variant's workers); the sweep stops at its knee (``gain_rule``: a point that no
    longer adds ``KNEE_GAIN`` throughput over the best so far), at the cores, or when the budget
    is out.
    When loading dominates the step the sweep may take most of what is left (``DOMINANT_SHARE``)
    and its baseline blocks are kept short (about ``BASE_BLOCK_S``): the user's slow loader is
    re-timed at every point, and it must not use up the budget before the sweep reaches the knee
    (1 worker decoding images: 2.2x at 2 workers, 21-28x at 12 on 16 cores).
    """

    key = "num_workers"
    finding_id = "load.input_bound"
    label = "DataLoader num_workers sweep"
    group = "loader"
    share = 0.5
    DOMINANT_SHARE = 0.8  # of what is left, when loading is at least half of the step
    SWEEP_REPS = 2  # interleaved pairs per point: the loader's step time is steady
    TRIAL_STEPS = 8  # timed steps of a trial block (rounded up to whole rounds of workers)
    BASE_BLOCK_S = 0.6  # a baseline trial block takes at most about this (2 steps at least)
    START_S = 0.1  # worker start-up per block: a base, and per worker
    START_PER_WORKER_S = 0.03

    def candidates(self, ctx: Context) -> list[int]:
        now = int(getattr(ctx.work.loader, "num_workers", 0) or 0)
        return worker_points(now, ctx.cpu_count)

    def share_of(self, ctx: Context) -> float:
        if ctx.loader_base_ms and ctx.cached_base_ms:
            lo = statistics.median(ctx.loader_base_ms)
            ca = statistics.median(ctx.cached_base_ms)
            if lo >= 2 * ca:
                return self.DOMINANT_SHARE
        return self.share

    def applies(self, ctx: Context) -> str | None:
        gate = loader_gate(ctx)
        if gate:
            return gate
        if isinstance(ctx.work.loader.dataset, IterableDataset):
            return (
                "the dataset is an IterableDataset: more workers repeat its batches unless it "
                "shards itself with torch.utils.data.get_worker_info()"
            )
        if not self.candidates(ctx):
            return (
                f"the loader already uses {ctx.work.loader.num_workers} workers "
                f"for {ctx.cpu_count} CPU cores"
            )
        return input_bound_gate(ctx)

    def _base_ms(self, ctx: Context) -> float:
        ms = ctx.loader_base_ms or ctx.cached_base_ms
        return statistics.median(ms) if ms else 50.0

    def _trial(self, ctx: Context, w: int, best: float) -> tuple[tuple[int, int], float]:
        """(baseline steps, variant steps) of a trial at ``w`` workers, and one pair's seconds."""
        now = int(ctx.work.loader.num_workers or 0)
        base_ms = self._base_ms(ctx)
        short = max(2, int(self.BASE_BLOCK_S * 1000 / max(base_ms, 1e-6)))
        base_steps = whole_rounds(min(ctx.steps, self.TRIAL_STEPS, short), now)
        var_steps = whole_rounds(self.TRIAL_STEPS, w)
        base_s = (base_steps + max(2, now + 1)) * base_ms / 1000 + (
            self.START_S + self.START_PER_WORKER_S * now if now else 0.0
        )
        # The next point is at least as fast as the best so far, most likely.
        var_ms = base_ms / max(1.0, best)
        var_s = (var_steps + w + 1) * var_ms / 1000 + self.START_S + self.START_PER_WORKER_S * w
        return (base_steps, var_steps), base_s + var_s

    def cost_s(self, ctx: Context) -> float:
        first = (self.candidates(ctx) or [2])[0]
        return self.SWEEP_REPS * self._trial(ctx, first, 1.0)[1]

    def apply(self, ctx: Context) -> Outcome:
        now = int(ctx.work.loader.num_workers or 0)
        results: list[tuple[int, Comparison]] = []
        best = 1.0
        stopped = ""
        for w in self.candidates(ctx):
            steps, pair_s = self._trial(ctx, w, best)
            if results and not ctx.affordable(self.SWEEP_REPS * pair_s):
                stopped = f"sweep stopped before {w} workers: budget exhausted"
                break
            ctx.stage = f"what-if: num_workers={w}"
            ctx.budget.tell(ctx.stage)
            variant = planned(f"num_workers={w}", source="loader", num_workers=w)
            cmp, arm = ctx.measure(
                variant, against="loader", reps=self.SWEEP_REPS, steps=steps, pair_s=pair_s
            )
            ctx.drop(arm)
            if cmp.pairs == 0:
                stopped = f"sweep stopped before {w} workers: budget exhausted"
                break
            results.append((w, cmp))
            if not goes_on([c.speedup for _, c in results]):
                stopped = (
                    f"sweep stopped at {w} workers: throughput no longer rising "
                    f"({cmp.speedup:.2f}x, best so far {best:.2f}x)"
                )
                break  # past the knee
            best = max(best, cmp.speedup)
        if not results:
            raise Skip("budget exhausted before the first point of the sweep")
        w = knee_of([(x, c.speedup) for x, c in results])
        cmp = next(c for x, c in results if x == w)
        self._confirm(ctx, w, cmp)
        series: list[dict[str, Any]] = [
            {"x": now, "y": round(cmp.before_ms, 3), "label": "yours"}
        ] + [{"x": x, "y": round(c.after_ms, 3), "label": f"{x} workers"} for x, c in results]
        out = outcome_of(
            self.key,
            f"DataLoader(num_workers={w}) instead of {now}",
            self.finding_id,
            cmp,
            planned(f"num_workers={w}", source="loader", num_workers=w),
            {
                "num_workers": w,
                "from_num_workers": now,
                "cpu_cores": ctx.cpu_count,
                "largest_tried": results[-1][0],
                # every point of the sweep, for whoever wants another setting than the knee
                **{f"speedup_{x}_workers": round(c.speedup, 3) for x, c in results},
            },
            series,
        )
        out.params.update(
            num_workers=w, sweep=", ".join(f"{x}: {c.speedup:.2f}x" for x, c in results)
        )
        if stopped:
            out.notes.append(stopped)
        return out

    def _confirm(self, ctx: Context, w: int, cmp: Comparison) -> None:
        """More pairs at the answer when two left it inside the noise (a busy machine): the
        baseline's spread from two blocks is a coarse noise band, four are steadier."""
        if cmp.wins() or cmp.speedup < MIN_GAIN:
            return
        steps, pair_s = self._trial(ctx, w, cmp.speedup)
        if not ctx.affordable(self.SWEEP_REPS * pair_s):
            return
        ctx.stage = f"what-if: num_workers={w}, more repetitions"
        ctx.budget.tell(ctx.stage)
        variant = planned(f"num_workers={w}", source="loader", num_workers=w)
        try:
            more, arm = ctx.measure(
                variant, against="loader", reps=self.SWEEP_REPS, steps=steps, pair_s=pair_s
            )
        except Skip:
            return
        ctx.drop(arm)
        cmp.base_ms += more.base_ms[: more.pairs]
        cmp.variant_ms += more.variant_ms[: more.pairs]
