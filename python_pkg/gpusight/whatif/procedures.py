"""How the in-process driver measures a knob's change: the knob (``knobs/``) says what the change
is, its points and whether it applies (``Knob.local_rows``, ``local_arm_of``); a procedure here
times it on copies of the user's objects.

``OnCached``: the knob's arm against the unchanged step, both on the same batches cached from
the user's loader (the loader is not what it measures), in interleaved repetitions.
``OnLoader``: the arm with a clone of the user's DataLoader, against the loader on the same
workers (the num_workers sweep's winner where the arm runs on it).
``EpochStart``: a new epoch's start-up with and without the change, spread over its batches.
``LoaderSweep``: the knob's worker counts in turn on the user's loader, to the knee.
``LoaderTogether``: the DataLoader settings that won, in one loader, against the user's.
``batch_sweep.BatchSweep``: the batch grown to the knee.

What they share: the ``Experiment`` interface (``applies(ctx)`` says why a row is skipped, None:
it runs; ``apply(ctx)`` measures the change on copies, interleaved with the baseline, and
returns an ``Outcome`` or raises ``context.Skip`` with the reason) and the gate that says
whether a loader change can gain at all.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from ..fixes.measured_code import combined
from ..knobs import dataloader
from ..knobs.base import Arm as Plan
from ..knobs.base import Group, Knob, LocalRow
from ..knobs.gain_rule import MIN_GAIN, knee_of, noise_pct, sweep_goes_on
from ..knobs.loader import NOT_A_DATALOADER, SETTINGS, Workers, workers_change, workers_in
from ..report import Fix, Scalar, WhatIf
from .arms import Arm, merged, planned, relabelled, source_of
from .context import LOADER_SHARE, Context, Skip
from .loaders import shutdown
from .runner import Comparison

# --- what every procedure shares ------------------------------------------------------------


@dataclass
class Outcome:
    """A measured experiment: the what-if row, and the variant to combine if it won."""

    key: str
    what_if: WhatIf
    winner: Plan | None = None
    finding_id: str | None = None
    params: dict[str, Any] = field(default_factory=dict)  # fills the fix snippet
    notes: list[str] = field(default_factory=list)
    stack_on: Plan | None = None
    """What the rows that stack on this one run on top of, where that is not its winner
    (``Knob.stack_base``: the most workers within the noise of the best)."""

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


# --- the procedures -----------------------------------------------------------------------------

# A loader's worker start-up per block: a base, and per worker.
START_S = 0.1
START_PER_WORKER_S = 0.03


def whole_rounds(steps: int, workers: int) -> int:
    """``steps`` rounded up to whole rounds of the loader's workers (at least two rounds)."""
    if workers <= 1:
        return max(1, steps)
    return max(2, -(-steps // workers)) * workers


def winner_block_s(ctx: Context, variant: Plan) -> float:
    """Seconds one block of a loader ``variant`` takes, worker start-up included: at the sweep
    winner's measured step time when it runs the winner's workers, else at the user's loader's."""
    w = ctx.workers(variant)
    ms = ctx.loader_step_ms(w)
    if ms is None:
        return ctx.block_s("loader")
    steps = ctx.steps_for(variant) + ctx.warmup(variant)
    return steps * ms / 1000 + START_S + START_PER_WORKER_S * w


class KnobRow(Experiment):
    """A knob's in-process row: its names from the knob, its arm from ``local_arm_of``."""

    def __init__(self, knob: Knob, row: LocalRow) -> None:
        self.knob = knob
        self.row = row
        self.key = row.key
        self.label = row.label
        self.finding_id = row.finding_id
        self.startup_s = row.min_s

    def arm(self, ctx: Context) -> Plan | str:
        return self.knob.local_arm_of(self.row, ctx)

    def applies(self, ctx: Context) -> str | None:
        got = self.arm(ctx)
        if isinstance(got, str):
            return got
        return input_bound_gate(ctx) if self.row.input_bound else None

    def planned_arm(self, ctx: Context) -> Plan:
        got = self.arm(ctx)
        if isinstance(got, str):
            raise Skip(got)
        return got

    def finish(self, out: Outcome, own: dict[str, Any]) -> Outcome:
        """The knob's own params (``own``: ``local_params``, read once) and notes on a measured
        row."""
        out.params.update(own)
        params, notes = self.knob.local_outcome(out.what_if.params or {})
        out.params.update(params)
        out.notes.extend(notes)
        return out


class OnCached(KnobRow):
    """A compute knob's arm, A/B on cached batches."""

    group = "compute"

    def cost_s(self, ctx: Context) -> float:
        return self.startup_s or super().cost_s(ctx)

    def apply(self, ctx: Context) -> Outcome:
        arm = self.planned_arm(ctx)
        own = self.knob.local_params(arm, ctx)
        return self.finish(self.measure_one(ctx, arm, arm.label, params=own), own)


class OnLoader(KnobRow):
    """A DataLoader setting's arm with a clone of the user's loader.

    An arm that sets the num_workers sweep's winning workers runs against the loader with those
    workers (its own change on top of theirs): pinning pays off there, in the loader's pin thread,
    off the main thread whose step the workers now limit. An arm with a ``source`` of its own (the
    dataset kept on the device, pinned copies of cached batches) runs against that source's base.
    """

    group = "loader"

    def _stacked(self, ctx: Context, arm: Plan) -> int | None:
        """The winning workers the arm runs on, where they are not the user's."""
        w = workers_in(arm.changes)
        return None if w is None or w == dataloader.workers(ctx.loader) else w

    def cost_s(self, ctx: Context) -> float:
        got = self.arm(ctx)
        if isinstance(got, str) or "source" in got.changes:
            return ctx.reps * (ctx.block_s("loader") + ctx.block_s("cached") + 0.3)
        on = planned("", source="loader", **workers_change(ctx.loader_workers()))
        return ctx.reps * (ctx.block_s("loader") + winner_block_s(ctx, on) + 0.3)

    def apply(self, ctx: Context) -> Outcome:
        arm = self.planned_arm(ctx)
        own = self.knob.local_params(arm, ctx)
        if "source" in arm.changes:  # its own source, against the user's loader or the cache
            against = "loader" if source_of(arm) == "device" else "cached"
            return self.finish(self.measure_one(ctx, arm, arm.label, against, own), own)
        variant = relabelled(arm, arm.label, source="loader")
        w = self._stacked(ctx, arm)
        base = ctx.build(_workers(w)) if w is not None else None
        params: dict[str, Scalar] = {
            **own,
            **workers_change(ctx.loader_workers()),
            "against": "your loader" if w is None else f"num_workers={w} (the sweep's winner)",
        }
        try:
            out = self.measure_one(ctx, variant, arm.label, "loader", params=params, base=base)
        finally:
            ctx.drop(base)
        out.params.update(workers_change(ctx.loader_workers()))
        return self.finish(out, own)


class EpochStart(KnobRow):
    """The arm's epoch start-up against the user's, measured, spread over an epoch's batches:
    a new epoch's first batch from a fresh iterator of each loader, in turn."""

    group = "loader"

    def cost_s(self, ctx: Context) -> float:
        return ctx.reps * 2 * (0.5 + 0.05 * ctx.loader_workers())

    def _first_batches(self, ctx: Context, arm: Plan) -> tuple[list[float], list[float]]:
        """Seconds to a new epoch's first batch: the plain loader's, the arm's."""
        w = ctx.loader_workers()
        plain = dataloader.clone(ctx.loader, on_workers=w)
        keep = dataloader.clone(ctx.loader, arm.changes, on_workers=w)
        cold: list[float] = []
        warm: list[float] = []
        try:
            it = iter(keep)
            next(it)  # start the workers once, as the first epoch would
            for _ in range(ctx.reps):
                if cold and not ctx.affordable(self.cost_s(ctx) / ctx.reps):
                    break
                t0 = time.perf_counter()
                it_plain = iter(plain)
                next(it_plain)
                cold.append(time.perf_counter() - t0)
                shutdown(it_plain)
                t0 = time.perf_counter()
                it = iter(keep)  # a new epoch: the same workers, reset
                next(it)
                warm.append(time.perf_counter() - t0)
                ctx.budget.tell(ctx.stage)
        except Exception as exc:
            raise Skip(f"{arm.label} failed: {type(exc).__name__}: {exc}") from exc
        finally:
            shutdown(getattr(keep, "_iterator", None))
        return cold, warm

    def apply(self, ctx: Context) -> Outcome:
        arm = self.planned_arm(ctx)
        w = ctx.loader_workers()
        epoch = len(ctx.loader)
        cold, warm = self._first_batches(ctx, arm)
        base = ctx.results.get(Workers.SWEEP.key)
        step_ms = (
            base.what_if.after_ms
            if base is not None and base.winner is not None and base.what_if.after_ms
            else min(ctx.loader_base_ms)
        )
        cold_ms = 1000 * sorted(cold)[len(cold) // 2]
        warm_ms = 1000 * sorted(warm)[len(warm) // 2]
        before = step_ms + cold_ms / epoch
        after = step_ms + warm_ms / epoch
        speedup = before / after if after > 0 else 0.0
        spread = noise_pct(cold)
        # A win only if every cold start was slower than every warm one, and it adds up.
        wins = min(cold) > max(warm) and speedup >= MIN_GAIN
        what = WhatIf(
            scope="end_to_end",  # the loader's own epoch start-up, on the step with the loader
            change=arm.label,
            finding_id=self.finding_id,
            params={
                **workers_change(w),
                "epoch_start_ms": round(cold_ms, 1),
                "epoch_start_persistent_ms": round(warm_ms, 1),
                "batches_per_epoch": epoch,
                "repeats": len(cold),
                "won": wins,
                "basis": "epoch start-up measured, spread over an epoch's batches",
            },
            before_ms=round(before, 3),
            after_ms=round(after, 3),
            speedup=round(speedup, 3),
            noise_pct=None if spread is None else round(spread, 1),
        )
        winner = relabelled(arm, self.key, source="loader") if wins else None
        out = Outcome(self.key, what, winner, self.finding_id, workers_change(w))
        return self.finish(out, self.knob.local_params(arm, ctx))


def goes_on(speedups: list[float]) -> bool:
    """The knee rule of every what-if (``gain_rule.sweep_goes_on``), with the user's own
    workers (1x) as the sweep's first point."""
    return sweep_goes_on([1.0, *speedups])


def walk_sweep(points: list[int], speedup_at: Any) -> tuple[list[tuple[int, float]], int]:
    """The sweep's decisions on given measurements: (points visited with their speedups, the
    answer). ``speedup_at(w)`` stands for a measurement; ``LoaderSweep.apply`` makes the same
    decisions on real ones (and stops early when the budget is out)."""
    results: list[tuple[int, float]] = []
    for w in points:
        results.append((w, float(speedup_at(w))))
        if not goes_on([sp for _, sp in results]):
            break
    return results, knee_of(results)


def _workers(n: int) -> Plan:
    """``n`` workers on a clone of the user's loader."""
    return planned(f"num_workers={n}", source="loader", **workers_change(n))


class LoaderSweep(KnobRow):
    """The knob's worker counts (``Knob.local_points``) in turn, short trials, to the knee.

    Each point is two interleaved pairs of short blocks (a few steps of the user's loader, whole
    rounds of the variant's workers); the sweep stops at its knee (``gain_rule``), at the last
    point, or when the budget is out.
    When loading dominates the step the sweep may take most of what is left (``DOMINANT_SHARE``)
    and its baseline blocks are kept short (about ``BASE_BLOCK_S``): the user's slow loader is
    re-timed at every point, and it must not use up the budget before the sweep reaches the knee
    (1 worker decoding images: 2.2x at 2 workers, 21-28x at 12 on 16 cores).
    """

    group = "loader"
    share = 0.5
    DOMINANT_SHARE = 0.8  # of what is left, when loading is at least half of the step
    SWEEP_REPS = 2  # interleaved pairs per point: the loader's step time is steady
    TRIAL_STEPS = 8  # timed steps of a trial block (rounded up to whole rounds of workers)
    BASE_BLOCK_S = 0.6  # a baseline trial block takes at most about this (2 steps at least)

    def points(self, ctx: Context) -> list[int]:
        return [w for a in self.knob.local_points(ctx) if (w := workers_in(a.changes)) is not None]

    def share_of(self, ctx: Context) -> float:
        if ctx.loader_base_ms and ctx.cached_base_ms:
            lo = statistics.median(ctx.loader_base_ms)
            ca = statistics.median(ctx.cached_base_ms)
            if lo >= 2 * ca:
                return self.DOMINANT_SHARE
        return self.share

    def _base_ms(self, ctx: Context) -> float:
        ms = ctx.loader_base_ms or ctx.cached_base_ms
        return statistics.median(ms) if ms else 50.0

    def _trial(self, ctx: Context, w: int, best: float) -> tuple[tuple[int, int], float]:
        """(baseline steps, variant steps) of a trial at ``w`` workers, and one pair's seconds."""
        now = dataloader.workers(ctx.work.loader)
        base_ms = self._base_ms(ctx)
        short = max(2, int(self.BASE_BLOCK_S * 1000 / max(base_ms, 1e-6)))
        base_steps = whole_rounds(min(ctx.steps, self.TRIAL_STEPS, short), now)
        var_steps = whole_rounds(self.TRIAL_STEPS, w)
        base_s = (base_steps + max(2, now + 1)) * base_ms / 1000 + (
            START_S + START_PER_WORKER_S * now if now else 0.0
        )
        # The next point is at least as fast as the best so far, most likely.
        var_ms = base_ms / max(1.0, best)
        var_s = (var_steps + w + 1) * var_ms / 1000 + START_S + START_PER_WORKER_S * w
        return (base_steps, var_steps), base_s + var_s

    def cost_s(self, ctx: Context) -> float:
        first = (self.points(ctx) or [2])[0]
        return self.SWEEP_REPS * self._trial(ctx, first, 1.0)[1]

    def _point(self, ctx: Context, w: int, best: float) -> Comparison | None:
        """One point measured against the user's loader (None: the budget is out)."""
        steps, pair_s = self._trial(ctx, w, best)
        ctx.stage = f"what-if: num_workers={w}"
        ctx.budget.tell(ctx.stage)
        variant = _workers(w)
        cmp, arm = ctx.measure(
            variant, against="loader", reps=self.SWEEP_REPS, steps=steps, pair_s=pair_s
        )
        ctx.drop(arm)
        return cmp if cmp.pairs else None

    def apply(self, ctx: Context) -> Outcome:
        now = dataloader.workers(ctx.work.loader)
        results: list[tuple[int, Comparison]] = []
        best = 1.0
        stopped = ""
        points = self.points(ctx)
        for w in points:
            pair_s = self._trial(ctx, w, best)[1]
            cmp = (
                self._point(ctx, w, best)
                if not results or ctx.affordable(self.SWEEP_REPS * pair_s)
                else None
            )
            if cmp is None:
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
            if w == points[-1]:  # the loop goes on to a point appended here
                points += self._more(ctx, results)
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
            _workers(w),
            {
                **workers_change(w),
                "from_num_workers": now,
                "cpu_cores": ctx.cpu_count,
                "largest_tried": results[-1][0],
                # every point of the sweep, for whoever wants another setting than the knee
                **{f"speedup_{x}_workers": round(c.speedup, 3) for x, c in results},
            },
            series,
        )
        if out.winner is not None:
            ran = [(_workers(x), c.speedup) for x, c in results]
            swept = Group(self.knob.name, 0.0, measured=ran)
            out.stack_on = self.knob.stack_base(swept, cmp.noise_pct, ctx.cpu_count)
        # Each point as its row shows it (rounded as ``outcome_of`` stores a speedup, then
        # printed): a gain of 2.0451 is the row's 2.04x, not 2.05x beside it.
        sweep = ", ".join(f"{x}: {round(c.speedup, 3):.2f}x" for x, c in results)
        out.params.update(workers_change(w), sweep=sweep)
        if stopped:
            out.notes.append(stopped)
        return out

    def _more(self, ctx: Context, results: list[tuple[int, Comparison]]) -> list[int]:
        """The knob's next point past its last (workers that wait rather than compute)."""
        ran = [(_workers(x), c.speedup) for x, c in results]
        nxt = self.knob.local_next(ctx, ran)
        w = None if nxt is None else workers_in(nxt.changes)
        return [] if w is None else [w]

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
        variant = _workers(w)
        try:
            more, arm = ctx.measure(
                variant, against="loader", reps=self.SWEEP_REPS, steps=steps, pair_s=pair_s
            )
        except Skip:
            return
        ctx.drop(arm)
        cmp.base_ms += more.base_ms[: more.pairs]
        cmp.variant_ms += more.variant_ms[: more.pairs]


# The DataLoader settings whose winners LoaderTogether measures together, in the order they are
# named (pin_memory brings its non_blocking copies along).
LOADER_SETTINGS = SETTINGS


def loader_together(loader: Any, winners: list[Outcome]) -> tuple[Plan, dict[str, Any]] | None:
    """The variant with every winning DataLoader setting, and the settings it changes.

    ``winners`` are the loader experiments' outcomes; only their DataLoader settings count (the
    dataset kept on the GPU is no DataLoader setting). The changes are the settings that differ
    from ``loader``'s own; None when no winner changes any.
    """
    v = planned("the DataLoader winners together", source="loader")
    for o in winners:
        if o.key in LOADER_SETTINGS and o.winner is not None and source_of(o.winner) == "loader":
            v = merged(v, o.winner, v.label)
    changes = {
        k: v.changes[k]
        for k in LOADER_SETTINGS
        if k in v.changes and v.changes[k] != getattr(loader, k, None)
    }
    return (v, changes) if changes else None


def together_change(changes: dict[str, Any], non_blocking: bool) -> str:
    args = ", ".join(f"{k}={v}" for k, v in changes.items())
    copies = " and .to(device, non_blocking=True)" if non_blocking else ""
    return f"DataLoader({args}){copies}, together"


class LoaderTogether(Experiment):
    """Every DataLoader setting that won, in one loader, against the user's loader.

    Runs after the other loader experiments, each of which measured one setting (pin_memory and
    prefetch_factor on top of the num_workers winner): whether the settings add up is measured
    here, in one arm, not multiplied. It needs two settings or more that won; with one, that
    setting's own row is already the measurement. (persistent_workers pays at epoch starts,
    which these blocks cross only when an epoch is a few blocks long: its own row measures that.)
    """

    key = "loader_combined"
    finding_id = "load.input_bound"
    label = "DataLoader winners together"
    group = "loader"

    def together(self, ctx: Context) -> tuple[Plan, dict[str, Any]] | None:
        won = [ctx.results[k] for k in LOADER_SETTINGS if k in ctx.results]
        return loader_together(ctx.work.loader, won)

    def applies(self, ctx: Context) -> str | None:
        if not ctx.dataloader:
            return NOT_A_DATALOADER
        found = self.together(ctx)
        if found is None:
            return "no DataLoader setting won: there is nothing to put together"
        _, changes = found
        if len(changes) < 2:
            (name, value), *_ = changes.items()
            return f"only one DataLoader setting won ({name}={value}): its own row measures it"
        return None

    def cost_s(self, ctx: Context) -> float:
        found = self.together(ctx)
        together = found[0] if found else planned("", source="loader")
        return ctx.reps * (ctx.block_s("loader") + winner_block_s(ctx, together) + 0.3)

    def apply(self, ctx: Context) -> Outcome:
        found = self.together(ctx)
        if found is None:
            raise Skip("no DataLoader setting won: there is nothing to put together")
        v, changes = found
        change = together_change(changes, bool(v.changes.get("non_blocking")))
        params: dict[str, Scalar] = {
            **changes,
            "non_blocking": bool(v.changes.get("non_blocking")),
            "loader_settings": ", ".join(changes),
            "against": "your loader",
        }
        out = self.measure_one(ctx, relabelled(v, change), change, "loader", params=params)
        out.params.update(changes)
        loader = ctx.work.loader
        out.what_if.fix = Fix(
            text="The DataLoader settings that won, together: the loader that was measured.",
            snippet_id="whatif.loader_combined",
            code=combined(
                loader,
                loader_changes=changes,
                non_blocking=bool(v.changes.get("non_blocking")),
                device_type=ctx.device.type,
                speedup=f"{out.speedup:.2f}x per step",
                title="The DataLoader winners together",
            ),
            language="python",
        )
        return out


# Experiments that measure other experiments' winners together: report rows, not one more
# winner (their parts make the findings and go into the final run of every winner).
TOGETHER_KEYS = frozenset({LoaderTogether.key})
