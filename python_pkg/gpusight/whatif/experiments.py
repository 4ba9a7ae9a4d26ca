"""The experiments: one class each, ``applies(ctx)`` (None, or why it is skipped), ``apply(ctx)``.

``apply`` measures the change on copies, interleaved with the baseline, and returns an
:class:`Outcome`; it raises :class:`~gpusight.whatif.context.Skip` with a reason when it cannot.
Compute experiments run on a fixed set of cached batches (the loader is not what they measure);
loader experiments run a clone of the user's DataLoader (the loader is what they measure).
pin_memory, persistent_workers and prefetch_factor build on the num_workers sweep's winner, and
``LoaderTogether`` (key ``loader_combined``) measures the DataLoader settings that won together,
in one loader, against the user's.
"""

from __future__ import annotations

import os
import shutil
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import torch
from torch import nn
from torch.utils.data import IterableDataset

from ..report import Fix, Scalar, WhatIf
from .arms import Arm
from .context import LOADER_SHARE, MIN_GAIN, Context, Skip, VariantOOM
from .loaders import (
    batch_len,
    batch_nbytes,
    can_resize_batches,
    clone_loader,
    items_deterministic,
    shutdown,
    tensors_of,
)
from .restore import read_flags, tensor_bytes
from .runner import Comparison
from .snippets import combined
from .variant import Variant

CONV_TYPES = (
    nn.Conv1d,
    nn.Conv2d,
    nn.Conv3d,
    nn.ConvTranspose1d,
    nn.ConvTranspose2d,
    nn.ConvTranspose3d,
)
RNN_TYPES = (nn.RNNBase,)
# torch.compile of a training step rarely finishes in less than this; below it, skip honestly.
COMPILE_MIN_S = 45.0


@dataclass
class Outcome:
    """A measured experiment: the what-if row, and the variant to combine if it won."""

    key: str
    what_if: WhatIf
    winner: Variant | None = None
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
    variant: Variant,
    params: dict[str, Scalar] | None = None,
    series: list[dict[str, Any]] | None = None,
    scope: Literal["end_to_end", "compute_only"] | None = None,
) -> Outcome:
    """The row of a comparison; its scope follows where the variant's batches came from: the
    user's loader (or the dataset kept on the device, which replaces it) is the whole step,
    cached batches are the step's compute alone."""
    wins = cmp.wins(MIN_GAIN)
    what = WhatIf(
        scope=scope or ("compute_only" if variant.source == "cached" else "end_to_end"),
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
    key: ClassVar[str]
    finding_id: ClassVar[str]
    label: ClassVar[str]
    group: ClassVar[str]  # "loader" or "compute"

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
        variant: Variant,
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
            if variant.compile and arm.first_step_s is not None:
                extra["compile_s"] = round(arm.first_step_s, 1)
            out = outcome_of(self.key, change, self.finding_id, cmp, variant, extra)
            if arm.recast_forwards:
                out.notes.append(
                    "Your step_fn runs the model's forward with autocast turned off "
                    "(torch.autocast(..., enabled=False) or a disabled amp flag): the autocast "
                    "what-if turned it back on for the forward. In your code, enable it there."
                )
            return out
        finally:
            ctx.drop(arm)


def _loader_gate(ctx: Context) -> str | None:
    if not ctx.dataloader:
        return (
            "the loader is not a torch.utils.data.DataLoader: gpusight cannot change its settings"
        )
    return None


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


def loader_workers(ctx: Context) -> int:
    """Workers of the user's loader, or of the winning num_workers sweep."""
    won = ctx.results.get("num_workers")
    if won is not None and won.winner is not None:
        return int(won.winner.loader["num_workers"])
    return int(getattr(ctx.work.loader, "num_workers", 0) or 0)


def winner_block_s(ctx: Context, variant: Variant) -> float:
    """Seconds one block of a loader ``variant`` takes, worker start-up included: at the sweep
    winner's measured step time when it runs the winner's workers, else at the user's loader's."""
    w = ctx.workers(variant)
    ms = ctx.loader_step_ms(w)
    if ms is None:
        return ctx.block_s("loader")
    steps = ctx.steps_for(variant) + ctx.warmup(variant)
    start = NumWorkers.START_S + NumWorkers.START_PER_WORKER_S * w
    return steps * ms / 1000 + start


# --- loader experiments -------------------------------------------------------------------------


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


def sweep_goes_on(best: float, speedup: float, knee_gain: float = 1.10) -> bool:
    """A point that still adds ``knee_gain`` throughput over the best so far: not yet the knee."""
    return speedup >= best * knee_gain


def knee_of(results: list[tuple[int, float]], share: float = 0.95) -> int:
    """The fewest workers within ``share`` of the best throughput measured."""
    top = max(sp for _, sp in results)
    return next(w for w, sp in results if sp >= share * top)


def walk_sweep(points: list[int], speedup_at: Any) -> tuple[list[tuple[int, float]], int]:
    """The sweep's decisions on given measurements: (points visited with their speedups, the
    answer). ``speedup_at(w)`` stands for a measurement; ``NumWorkers.apply`` makes the same
    decisions on real ones (and stops early when the budget is out)."""
    results: list[tuple[int, float]] = []
    best = 1.0
    for w in points:
        sp = float(speedup_at(w))
        results.append((w, sp))
        if not sweep_goes_on(best, sp, NumWorkers.KNEE_GAIN):
            break
        best = max(best, sp)
    return results, knee_of(results, NumWorkers.KNEE_SHARE)


class NumWorkers(Experiment):
    """A sweep of worker counts to the knee: 2, 4, 8, ... up to the CPU cores, short trials.

    Each point is two interleaved pairs of short blocks (a few steps of the user's loader, whole
    rounds of the variant's workers); the sweep stops when a point no longer adds
    ``KNEE_GAIN`` throughput over the best so far, or at the cores, or when the budget is out.
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
    KNEE_GAIN = 1.10  # a point must beat the best so far by this much, or the sweep stops
    KNEE_SHARE = 0.95  # the answer: fewest workers within this share of the best throughput
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
        gate = _loader_gate(ctx)
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
            variant = Variant(f"num_workers={w}", source="loader", loader={"num_workers": w})
            cmp, arm = ctx.measure(
                variant, against="loader", reps=self.SWEEP_REPS, steps=steps, pair_s=pair_s
            )
            ctx.drop(arm)
            if cmp.pairs == 0:
                stopped = f"sweep stopped before {w} workers: budget exhausted"
                break
            results.append((w, cmp))
            if not sweep_goes_on(best, cmp.speedup, self.KNEE_GAIN):
                stopped = (
                    f"sweep stopped at {w} workers: throughput no longer rising "
                    f"({cmp.speedup:.2f}x, best so far {best:.2f}x)"
                )
                break  # past the knee
            best = max(best, cmp.speedup)
        if not results:
            raise Skip("budget exhausted before the first point of the sweep")
        w = knee_of([(x, c.speedup) for x, c in results], self.KNEE_SHARE)
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
            Variant(f"num_workers={w}", source="loader", loader={"num_workers": w}),
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
        if cmp.wins(MIN_GAIN) or cmp.speedup - 1 <= MIN_GAIN:
            return
        steps, pair_s = self._trial(ctx, w, cmp.speedup)
        if not ctx.affordable(self.SWEEP_REPS * pair_s):
            return
        ctx.stage = f"what-if: num_workers={w}, more repetitions"
        ctx.budget.tell(ctx.stage)
        variant = Variant(f"num_workers={w}", source="loader", loader={"num_workers": w})
        try:
            more, arm = ctx.measure(
                variant, against="loader", reps=self.SWEEP_REPS, steps=steps, pair_s=pair_s
            )
        except Skip:
            return
        ctx.drop(arm)
        cmp.base_ms += more.base_ms[: more.pairs]
        cmp.variant_ms += more.variant_ms[: more.pairs]


class PinMemory(Experiment):
    """Pinned batches copied with ``non_blocking=True``.

    With a DataLoader it stacks on the num_workers sweep's winner, as ``PrefetchFactor`` does:
    with ``w`` winning workers it measures ``num_workers=w, pin_memory=True`` against
    ``num_workers=w``. Pinning pays off there (the loader's pin thread does it, off the main
    thread, whose step the workers now limit); in the main process of a loader without workers
    it only adds a copy, so measuring it against the user's ``num_workers=0`` would miss it.
    """

    key = "pin_memory"
    finding_id = "code.pageable_copy"
    label = "pin_memory=True + non_blocking copies"
    group = "loader"

    def applies(self, ctx: Context) -> str | None:
        if not ctx.cuda:
            return "no CUDA device: pinned memory only speeds up copies to a GPU"
        if ctx.dataloader and ctx.work.loader.pin_memory:
            return "the DataLoader already pins memory (pin_memory=True)"
        if ctx.work.cached and all(
            t.device.type != "cpu" for b in ctx.work.cached for t in tensors_of(b)
        ):
            return "the batches are already on the GPU: there is no host copy to pin"
        return None

    def cost_s(self, ctx: Context) -> float:
        if not ctx.dataloader:
            return ctx.reps * (2 * ctx.block_s("cached") + 0.3)
        on_winner = Variant("", source="loader", loader={"num_workers": loader_workers(ctx)})
        return ctx.reps * (2 * winner_block_s(ctx, on_winner) + 0.3)

    def apply(self, ctx: Context) -> Outcome:
        if not ctx.dataloader:
            variant = Variant("pinned batches, non_blocking=True", non_blocking=True)
            return self.measure_one(ctx, variant, "pinned batches copied with non_blocking=True")
        w = loader_workers(ctx)
        stacked = w != int(ctx.work.loader.num_workers or 0)
        base = (
            ctx.build(Variant(f"num_workers={w}", source="loader", loader={"num_workers": w}))
            if stacked
            else None
        )
        variant = Variant(
            "pin_memory=True, non_blocking=True",  # its change; the workers are the winner's
            source="loader",
            loader={"num_workers": w, "pin_memory": True} if stacked else {"pin_memory": True},
            non_blocking=True,
        )
        change = "DataLoader(pin_memory=True) and .to(device, non_blocking=True)"
        against = f"num_workers={w} (the sweep's winner)" if stacked else "your loader"
        try:
            out = self.measure_one(
                ctx,
                variant,
                f"{change} with num_workers={w}" if stacked else change,
                "loader",
                params={
                    "num_workers": w,
                    "against": against,
                },
                base=base,
            )
        finally:
            ctx.drop(base)
        out.params.update(num_workers=w)
        return out


class PersistentWorkers(Experiment):
    """Worker start-up at every epoch, measured, spread over the epoch's batches."""

    key = "persistent_workers"
    finding_id = "load.input_bound"
    label = "persistent_workers=True"
    group = "loader"

    def applies(self, ctx: Context) -> str | None:
        gate = _loader_gate(ctx)
        if gate:
            return gate
        if ctx.work.loader.persistent_workers:
            return "the DataLoader already keeps its workers (persistent_workers=True)"
        if loader_workers(ctx) == 0:
            return (
                "no worker processes (num_workers=0): persistent_workers only keeps workers alive"
            )
        try:
            len(ctx.work.loader)
        except TypeError:
            return "the loader has no length: an epoch's start-up cannot be spread over its batches"
        return None

    def cost_s(self, ctx: Context) -> float:
        return ctx.reps * 2 * (0.5 + 0.05 * loader_workers(ctx))

    def apply(self, ctx: Context) -> Outcome:
        w = loader_workers(ctx)
        epoch = len(ctx.work.loader)
        plain = clone_loader(ctx.work.loader, num_workers=w)
        keep = clone_loader(ctx.work.loader, num_workers=w, persistent_workers=True)
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
            raise Skip(f"persistent workers failed: {type(exc).__name__}: {exc}") from exc
        finally:
            shutdown(getattr(keep, "_iterator", None))
        base = ctx.results.get("num_workers")
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
        spread = 100 * (max(cold) - min(cold)) / cold_ms if len(cold) > 1 and cold_ms > 0 else None
        # A win only if every cold start was slower than every warm one, and it adds up.
        wins = min(cold) > max(warm) and speedup - 1 > MIN_GAIN
        what = WhatIf(
            scope="end_to_end",  # the loader's own epoch start-up, on the step with the loader
            change=f"DataLoader(num_workers={w}, persistent_workers=True): workers kept",
            finding_id=self.finding_id,
            params={
                "num_workers": w,
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
        variant = Variant(
            "persistent_workers", source="loader", loader={"persistent_workers": True}
        )
        return Outcome(
            self.key, what, variant if wins else None, self.finding_id, {"num_workers": w}
        )


class PrefetchFactor(Experiment):
    key = "prefetch_factor"
    finding_id = "load.input_bound"
    label = "prefetch_factor=4"
    group = "loader"
    FACTOR = 4

    def applies(self, ctx: Context) -> str | None:
        gate = _loader_gate(ctx)
        if gate:
            return gate
        if loader_workers(ctx) == 0:
            return "no worker processes (num_workers=0): prefetch_factor is per worker"
        if (ctx.work.loader.prefetch_factor or 2) >= self.FACTOR:
            return (
                f"the DataLoader already prefetches {ctx.work.loader.prefetch_factor} "
                "batches per worker"
            )
        return input_bound_gate(ctx)

    def cost_s(self, ctx: Context) -> float:
        return ctx.reps * (2 * ctx.block_s("loader") + 1.0)

    def apply(self, ctx: Context) -> Outcome:
        w = loader_workers(ctx)
        base_variant = Variant(f"num_workers={w}", source="loader", loader={"num_workers": w})
        base = ctx.build(base_variant) if w != (ctx.work.loader.num_workers or 0) else None
        variant = Variant(
            f"num_workers={w}, prefetch_factor={self.FACTOR}",
            source="loader",
            loader={"num_workers": w, "prefetch_factor": self.FACTOR},
        )
        try:
            return self.measure_one(
                ctx,
                variant,
                f"DataLoader(prefetch_factor={self.FACTOR}) with num_workers={w}",
                "loader",
                params={"num_workers": w, "prefetch_factor": self.FACTOR},
                base=base,
            )
        finally:
            ctx.drop(base)


# The DataLoader settings whose winners LoaderTogether measures together, in the order they are
# named (pin_memory brings its non_blocking copies along).
LOADER_SETTINGS = ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor")


def loader_together(loader: Any, winners: list[Outcome]) -> tuple[Variant, dict[str, Any]] | None:
    """The variant with every winning DataLoader setting, and the settings it changes.

    ``winners`` are the loader experiments' outcomes; only their DataLoader settings count (the
    dataset kept on the GPU is no DataLoader setting). The changes are the settings that differ
    from ``loader``'s own; None when no winner changes any.
    """
    v = Variant("the DataLoader winners together", source="loader")
    for o in winners:
        if o.key in LOADER_SETTINGS and o.winner is not None and o.winner.source == "loader":
            v = v.combine(o.winner, v.label)
    changes = {
        k: v.loader[k]
        for k in LOADER_SETTINGS
        if k in v.loader and v.loader[k] != getattr(loader, k, None)
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

    def together(self, ctx: Context) -> tuple[Variant, dict[str, Any]] | None:
        won = [ctx.results[k] for k in LOADER_SETTINGS if k in ctx.results]
        return loader_together(ctx.work.loader, won)

    def applies(self, ctx: Context) -> str | None:
        gate = _loader_gate(ctx)
        if gate:
            return gate
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
        together = found[0] if found else Variant("", source="loader")
        return ctx.reps * (ctx.block_s("loader") + winner_block_s(ctx, together) + 0.3)

    def apply(self, ctx: Context) -> Outcome:
        found = self.together(ctx)
        if found is None:
            raise Skip("no DataLoader setting won: there is nothing to put together")
        v, changes = found
        change = together_change(changes, v.non_blocking)
        params: dict[str, Scalar] = {
            **changes,
            "non_blocking": v.non_blocking,
            "loader_settings": ", ".join(changes),
            "against": "your loader",
        }
        out = self.measure_one(ctx, v.with_(label=change), change, "loader", params=params)
        out.params.update(changes)
        loader = ctx.work.loader
        out.what_if.fix = Fix(
            text="The DataLoader settings that won, together: the loader that was measured.",
            snippet_id="whatif.loader_combined",
            code=combined(
                loader,
                loader_changes=changes,
                non_blocking=v.non_blocking,
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


# --- compute experiments (cached batches) -------------------------------------------------------


def _fixed_state_bytes(ctx: Context) -> int:
    """Device bytes of a model copy that do not grow with the batch: weights, grads, state."""
    params = list(ctx.work.model.parameters())
    n = 2 * tensor_bytes(params)
    opt = ctx.work.optimizer
    if opt is not None:
        n += tensor_bytes(
            v for st in opt.state.values() for v in st.values() if isinstance(v, torch.Tensor)
        )
    return n


class BatchSize(Experiment):
    """Batch size to the knee: doubling (x4 while each doubling gains a lot), short trials.

    A point is two interleaved pairs of short blocks: the baseline's few steps, and as many steps
    of the larger batch as take about as long (at least ``MIN_STEPS``). The sweep stops when a
    doubling adds less than ``GAIN`` throughput per sample, at ``MAX_FACTOR``, when the next
    batch would not fit in free device memory, on OOM, or when the budget is out.
    """

    key = "batch_size"
    finding_id = "load.small_batch"
    label = "batch size doubling"
    group = "compute"
    MAX_FACTOR = 128  # a launch-bound step keeps gaining far beyond 16x; OOM or no gain stop it
    GAIN = 1.05  # a doubling must add this much throughput per sample, or the sweep stops
    BIG_GAIN = 1.5  # per doubling: at least this, and the next point is 4x larger, not 2x
    KNEE_SHARE = 0.95  # the answer: smallest batch within this share of the best throughput
    SWEEP_REPS = 2
    TRIAL_STEPS = 10  # timed steps of the baseline's trial block
    MIN_STEPS = 3  # timed steps of a larger batch's trial block, at least
    MEMORY_SHARE = 0.8  # of free device memory the next point may be expected to take
    BUILD_S = 0.1  # copying the model for a point

    def applies(self, ctx: Context) -> str | None:
        if not ctx.work.cached or batch_len(ctx.work.cached[0]) is None:
            return "cannot tell the batch dimension of the loader's batches"
        return None

    def _base_ms(self, ctx: Context) -> float:
        return statistics.median(ctx.cached_base_ms) if ctx.cached_base_ms else 50.0

    def _trial(self, ctx: Context, step_ms: float) -> tuple[tuple[int, int], float]:
        """Steps (baseline, larger batch) of a trial whose larger step is expected to take
        ``step_ms``, and the seconds of one pair."""
        base_ms = self._base_ms(ctx)
        b = max(1, min(ctx.steps, self.TRIAL_STEPS))
        v = int(max(self.MIN_STEPS, min(b, round(b * base_ms / max(step_ms, 1e-6)))))
        warm = 2 if ctx.cached_base is not None and ctx.cached_base.variant.compile else 1
        pair_s = ((b + warm) * base_ms + (v + 1) * step_ms) / 1000 + self.BUILD_S
        return (b, v), pair_s

    def cost_s(self, ctx: Context) -> float:
        return self.SWEEP_REPS * self._trial(ctx, 2 * self._base_ms(ctx))[1] + self._reserve(ctx)

    # --- end to end, when the loader sets the pace ---------------------------------------------

    E2E_REPS = 2
    E2E_STEPS = 2  # timed steps of the larger batch with the loader: a sample of its batches

    def _e2e_possible(self, ctx: Context) -> bool:
        return ctx.loader_bound and ctx.dataloader and can_resize_batches(ctx.work.loader)

    def _e2e_trial(self, ctx: Context, factor: int) -> tuple[tuple[int, int], float]:
        """Steps (your loader, the larger batch from your loader) and one pair's seconds.

        The forecast takes loading to grow with the batch's items (it does, item by item) and
        compute at most as much: ``factor`` times the step with the loader.
        """
        lo = statistics.median(ctx.loader_base_ms)
        w = int(ctx.work.loader.num_workers or 0)
        b = whole_rounds(min(ctx.steps, 4), w)
        v = whole_rounds(self.E2E_STEPS, w)
        warm = ctx.warmup(Variant("", source="loader"))
        start = NumWorkers.START_S + NumWorkers.START_PER_WORKER_S * w if w else 0.0
        pair_s = ((b + warm) * lo + (v + warm) * factor * lo) / 1000 + 2 * start + self.BUILD_S
        return (b, v), pair_s

    def _reserve(self, ctx: Context) -> float:
        """Seconds kept back from the compute sweep for the end-to-end check of a double batch."""
        return self.E2E_REPS * self._e2e_trial(ctx, 2)[1] if self._e2e_possible(ctx) else 0.0

    def _end_to_end(
        self, ctx: Context, bs: int, factors: list[int]
    ) -> tuple[int, Comparison] | str:
        """The largest of ``factors`` whose run with the user's loader fits, measured against
        the user's loader: (factor, comparison), or why none was measured."""
        why = ""
        for x in sorted(set(factors), reverse=True):
            steps, pair_s = self._e2e_trial(ctx, x)
            if not ctx.affordable(self.E2E_REPS * pair_s):
                why = why or (
                    f"not measured with your loader: batch {bs * x} needs about "
                    f"{self.E2E_REPS * pair_s:.0f} s, {max(0.0, ctx.budget.left()):.0f} s left"
                )
                continue
            ctx.stage = f"what-if: batch size {bs * x} with your loader"
            ctx.budget.tell(ctx.stage)
            variant = Variant(f"batch_size={bs * x} with your loader", "loader", batch_factor=x)
            try:
                cmp, arm = ctx.measure(
                    variant,
                    against="loader",
                    scale=x,
                    reps=self.E2E_REPS,
                    steps=steps,
                    pair_s=pair_s,
                )
            except Skip as exc:
                return f"not measured with your loader: {exc}"
            ctx.drop(arm)
            if cmp.pairs:
                return x, cmp
        return why or "not measured with your loader: budget exhausted"

    def apply(self, ctx: Context) -> Outcome:
        bs = batch_len(ctx.work.cached[0]) or 1
        reserve = self._reserve(ctx)
        results: list[tuple[int, Comparison]] = []
        stop = ""
        oom_batch = 0  # the batch size that ran out of memory, if one did
        f, ratio = 2, 2
        best = 1.0
        # A larger batch's step time, extrapolated linearly from the last point (an upper
        # bound while the GPU is not yet busy): what the next trial's length and cost rest on.
        step_ms = 2 * self._base_ms(ctx)
        while True:
            steps, pair_s = self._trial(ctx, step_ms)
            if results and not ctx.affordable(self.SWEEP_REPS * pair_s, reserve=reserve):
                stop = f"stopped before batch {bs * f}: budget exhausted"
                break
            ctx.stage = f"what-if: batch size {bs * f}"
            ctx.budget.tell(ctx.stage)
            variant = Variant(f"batch_size={bs * f}", batch_factor=f)
            reserved0 = torch.cuda.memory_reserved(ctx.device) if ctx.cuda else 0
            try:
                cmp, arm = ctx.measure(
                    variant,
                    against="cached",
                    scale=f,
                    reps=self.SWEEP_REPS,
                    steps=steps,
                    pair_s=pair_s,
                    reserve=reserve,
                )
            except VariantOOM:
                stop = f"batch {bs * f} ran out of device memory"
                oom_batch = bs * f
                break
            grown = torch.cuda.memory_reserved(ctx.device) - reserved0 if ctx.cuda else 0
            ctx.drop(arm)
            if cmp.pairs == 0:
                stop = f"stopped before batch {bs * f}: budget exhausted"
                break
            results.append((f, cmp))
            per_doubling = (cmp.speedup / best) ** (1 / (ratio.bit_length() - 1))
            if per_doubling < self.GAIN:
                stop = (
                    f"stopped at batch {bs * f}: {per_doubling:.2f}x per doubling, "
                    f"less than {self.GAIN:.2f}x (the knee)"
                )
                break
            best = cmp.speedup
            if f >= self.MAX_FACTOR:
                stop = f"stopped at batch {bs * f}: {self.MAX_FACTOR}x the batch, the largest tried"
                break
            ratio = 4 if per_doubling >= self.BIG_GAIN else 2
            nxt = min(f * ratio, self.MAX_FACTOR)
            ratio = nxt // f
            step_ms = cmp.after_ms * f * ratio
            if ctx.cuda and grown > 0:
                fixed = _fixed_state_bytes(ctx)
                need = fixed + max(0, grown - fixed) * ratio
                free, _ = torch.cuda.mem_get_info(ctx.device)
                if need > self.MEMORY_SHARE * free:
                    stop = (
                        f"stopped before batch {bs * nxt}: it would need about "
                        f"{need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free"
                    )
                    break
            f = nxt
        if not results:
            raise Skip(stop or "no batch size could be measured")
        top = max(c.speedup for _, c in results)
        f, cmp = next((x, c) for x, c in results if c.speedup >= self.KNEE_SHARE * top)
        series: list[dict[str, Any]] = [{"x": bs, "y": round(cmp.before_ms, 3), "label": "yours"}]
        series += [{"x": bs * x, "y": round(c.after_ms, 3)} for x, c in results]
        if oom_batch:
            series.append({"x": oom_batch, "y": None, "label": "out of memory"})
        out = outcome_of(
            self.key,
            f"batch_size={bs * f} instead of {bs} (ms per {bs} samples)",
            self.finding_id,
            cmp,
            Variant(f"batch_size={bs * f}", batch_factor=f),
            {
                "batch_size": bs * f,
                "from_batch_size": bs,
                "factor": f,
                "largest_tried": bs * results[-1][0],
                **{f"speedup_batch_{bs * x}": round(c.speedup, 3) for x, c in results},
            },
            series,
        )
        out.params.update(batch_size=bs * f, factor=f)
        if self._e2e_possible(ctx):
            out = self._with_loader(ctx, out, bs, f, [x for x, c in results if x <= f])
            f = out.params["factor"]
        out.notes.append(
            f"A batch {f}x larger changes the optimisation, not only the speed: scale the "
            f"learning rate with it (linear scaling rule, lr x {f}, with warm-up) and check that "
            "the loss curve still matches."
        )
        if stop:
            out.notes.append(f"batch size sweep {stop}")
        return out

    def _with_loader(
        self, ctx: Context, out: Outcome, bs: int, f: int, factors: list[int]
    ) -> Outcome:
        """The loader sets the pace: the compute-only answer ``out`` checked with the loader.

        A larger batch from the user's loader, timed end to end against the loader as it is:
        when loading is what the step waits for, a larger batch only moves the wait, and this
        row says so. When it cannot be measured the row stays compute only, and says why.
        """
        found = self._end_to_end(ctx, bs, factors)
        w = out.what_if
        assert w.params is not None
        if isinstance(found, str):
            w.params["end_to_end"] = found
            out.notes.append(
                f"batch_size={bs * f} was measured on cached batches only (compute alone, "
                f"{out.speedup:.2f}x); {found}."
            )
            return out
        x, cmp = found
        params: dict[str, Scalar] = {
            **{k: v for k, v in w.params.items() if k not in ("won", "repeats")},
            "batch_size": bs * x,
            "factor": x,
            "compute_only_batch_size": bs * f,
            "compute_only_speedup": w.speedup,
            "against": "your loader",
            "series_scope": "compute_only",  # the sweep's points, timed on cached batches
        }
        e2e = outcome_of(
            self.key,
            f"batch_size={bs * x} instead of {bs} with your loader (ms per {bs} samples)",
            self.finding_id,
            cmp,
            Variant(f"batch_size={bs * x}", batch_factor=x),
            params,
            w.series,
            scope="end_to_end",
        )
        e2e.params.update(out.params, batch_size=bs * x, factor=x)
        e2e.notes += out.notes
        if e2e.winner is None and out.winner is not None:
            e2e.notes.append(
                f"On cached batches (compute alone) batch_size={bs * f} ran {out.speedup:.2f}x "
                f"faster, but with your loader batch_size={bs * x} gave {cmp.speedup:.2f}x: "
                "loading sets the pace, and a larger batch only moves the wait."
            )
        return e2e


def _half_model(ctx: Context) -> bool:
    params = list(ctx.work.model.parameters())
    return bool(params) and all(p.dtype in (torch.float16, torch.bfloat16) for p in params)


class Autocast(Experiment):
    key = "autocast"
    finding_id = "load.amp_unused"
    label = "bf16 autocast (fp16 + GradScaler without bf16)"
    group = "compute"

    def dtype(self) -> str:
        return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"

    def applies(self, ctx: Context) -> str | None:
        if not ctx.cuda:
            return "no CUDA device: bf16 autocast on the CPU is not a speedup gpusight measures"
        if _half_model(ctx):
            return "the model's weights are already half precision"
        if (
            self.dtype() == "float16"
            and ctx.work.step_fn is not None
            and ctx.work.optimizer is not None
        ):
            return "fp16 needs a GradScaler inside your step_fn (this GPU has no bf16)"
        return None

    def apply(self, ctx: Context) -> Outcome:
        dt = self.dtype()
        variant = Variant(f"autocast {dt}", autocast="bfloat16" if dt == "bfloat16" else "float16")
        out = self.measure_one(
            ctx,
            variant,
            f"torch.autocast('cuda', dtype=torch.{dt})"
            + (" with a GradScaler" if dt == "float16" else ""),
            params={"dtype": dt},
        )
        out.params.update(dtype=dt)
        return out


class ChannelsLast(Experiment):
    key = "channels_last"
    finding_id = "load.channels_last"
    label = "channels_last memory format"
    group = "compute"

    def applies(self, ctx: Context) -> str | None:
        if not ctx.has_module(nn.Conv2d):
            return "the model has no 2-d convolutions"
        return None

    def apply(self, ctx: Context) -> Outcome:
        variant = Variant("channels_last", channels_last=True)
        return self.measure_one(
            ctx, variant, "model and 4-d inputs in torch.channels_last memory format"
        )


def tf32_state() -> tuple[bool, bool]:
    """(matmul TF32 on, cudnn TF32 on) as torch would run them now."""
    flags = read_flags()
    matmul = flags["float32_matmul_precision"] != "highest" or (
        flags.get("fp32_precision.cuda.matmul") == "tf32"
    )
    conv = bool(flags["cudnn.allow_tf32"])
    return matmul, conv


class TF32(Experiment):
    key = "tf32"
    finding_id = "cfg.tf32_disabled"
    label = "TF32 matmuls and convolutions"
    group = "compute"

    def applies(self, ctx: Context) -> str | None:
        if not ctx.cuda:
            return "no CUDA device"
        if torch.cuda.get_device_capability(ctx.device)[0] < 8:
            return "this GPU has no TF32 (needs compute capability 8.0 or newer)"
        if _half_model(ctx):
            return "the model's weights are half precision: TF32 only affects float32"
        if all(tf32_state()):
            return "TF32 is already on for matmuls and cudnn"
        return None

    def apply(self, ctx: Context) -> Outcome:
        return self.measure_one(
            ctx,
            Variant("TF32", tf32=True),
            "torch.set_float32_matmul_precision('high') and cudnn.allow_tf32 = True",
        )


class CudnnBenchmark(Experiment):
    key = "cudnn_benchmark"
    finding_id = "cfg.cudnn_benchmark_off"
    label = "torch.backends.cudnn.benchmark = True"
    group = "compute"

    def applies(self, ctx: Context) -> str | None:
        if not ctx.cuda:
            return "no CUDA device"
        if not torch.backends.cudnn.is_available():  # type: ignore[no-untyped-call]
            return "cudnn is not available in this torch build"
        if torch.backends.cudnn.benchmark:
            return "cudnn.benchmark is already on"
        if not ctx.has_module(*CONV_TYPES, *RNN_TYPES):
            return "the model has no convolutions or RNNs (what cudnn.benchmark tunes)"
        return None

    def apply(self, ctx: Context) -> Outcome:
        return self.measure_one(
            ctx,
            Variant("cudnn.benchmark", cudnn_benchmark=True),
            "torch.backends.cudnn.benchmark = True",
        )


class DatasetOnDevice(Experiment):
    key = "dataset_on_gpu"
    finding_id = "load.memory_headroom"
    label = "dataset kept on the GPU"
    group = "loader"
    SHARE = 0.5  # of free device memory the dataset may take

    def dataset_bytes(self, ctx: Context) -> int | None:
        b = ctx.work.cached[0] if ctx.work.cached else None
        n = batch_len(b) if b is not None else None
        try:
            total = len(ctx.work.loader.dataset)
        except (TypeError, AttributeError):
            return None
        if not n:
            return None
        return int(batch_nbytes(b) / n * total)

    def applies(self, ctx: Context) -> str | None:
        if not ctx.cuda:
            return "no CUDA device"
        gate = _loader_gate(ctx)
        if gate:
            return gate
        size = self.dataset_bytes(ctx)
        if size is None:
            return "the dataset has no length: cannot tell whether it fits on the GPU"
        reason = self.frozen_augmentation(ctx)
        if reason:
            return reason
        free, _ = torch.cuda.mem_get_info(ctx.device)
        if size > self.SHARE * free:
            return (
                f"the dataset ({size / 1e9:.1f} GB) does not fit in half the free GPU memory "
                f"({free / 1e9:.1f} GB)"
            )
        return input_bound_gate(ctx)

    @staticmethod
    def frozen_augmentation(ctx: Context) -> str | None:
        """Why caching would freeze the dataset's items (None: the same index gives the same
        item twice, so a copy kept on the device is what the loader would give)."""
        same = items_deterministic(ctx.work.loader.dataset)
        if same is False:
            return (
                "the dataset gives a different item each time the same index is fetched (random "
                "augmentation): a copy kept on the GPU would freeze the augmentation"
            )
        if same is None:
            return "cannot tell whether the dataset's items are fixed (fetching an item failed)"
        return None

    def cost_s(self, ctx: Context) -> float:
        return ctx.reps * (ctx.block_s("loader") + ctx.block_s("cached") + 0.3)

    def apply(self, ctx: Context) -> Outcome:
        size = self.dataset_bytes(ctx) or 0
        free, _ = torch.cuda.mem_get_info(ctx.device)
        out = self.measure_one(
            ctx,
            Variant("dataset on the GPU", source="device"),
            "whole dataset kept on the GPU, batches indexed there (no loading, no copies)",
            against="loader",
            params={"dataset_gb": round(size / 1e9, 2), "free_gb": round(free / 1e9, 1)},
        )
        out.params.update(dataset_gb=round(size / 1e9, 2), free_gb=round(free / 1e9, 1))
        out.notes.append(
            "Keeping the dataset on the GPU keeps its items as they are now: the same index gave "
            "the same item twice (no random augmentation was seen); any added later must run on "
            "the GPU."
        )
        return out


def _has_cxx() -> bool:
    return any(shutil.which(c) for c in (os.environ.get("CXX", "g++"), "g++", "c++", "clang++"))


class Compile(Experiment):
    key = "compile"
    finding_id = "load.launch_bound"
    label = "torch.compile"
    group = "compute"

    def applies(self, ctx: Context) -> str | None:
        if not hasattr(torch, "compile"):
            return "this torch has no torch.compile"
        try:
            import torch._dynamo as dynamo

            if not dynamo.is_dynamo_supported():  # type: ignore[attr-defined]
                return "torch.compile does not support this Python version"
        except Exception as exc:
            return f"torch.compile is unavailable: {type(exc).__name__}: {exc}"
        if type(ctx.work.model).__name__ == "OptimizedModule":
            return "the model is already compiled"
        if not ctx.cuda and not _has_cxx():
            return "no C++ compiler for torch.compile on the CPU (install g++)"
        if not ctx.affordable(COMPILE_MIN_S):
            return (
                f"budget exhausted: torch.compile usually needs {COMPILE_MIN_S:.0f} s or more to "
                f"compile a training step, {max(0.0, ctx.budget.left()):.0f} s were left "
                "(raise budget_s)"
            )
        return None

    def cost_s(self, ctx: Context) -> float:
        return COMPILE_MIN_S

    def apply(self, ctx: Context) -> Outcome:
        out = self.measure_one(
            ctx, Variant("torch.compile", compile=True), "model = torch.compile(model)"
        )
        out.params["compile_s"] = (
            out.what_if.params.get("compile_s") if out.what_if.params else None
        )
        out.notes.append(
            f"torch.compile took {out.params['compile_s']} s to compile (once per process); "
            "the speedup is for steps after that."
        )
        return out


# In the order they run within their group: the usual large, cheap wins first; the DataLoader
# winners together after every loader experiment; the batch size sweep (several points, each
# larger) and compile (minutes) last.
ALL: tuple[type[Experiment], ...] = (
    NumWorkers,
    PinMemory,
    DatasetOnDevice,
    PersistentWorkers,
    PrefetchFactor,
    LoaderTogether,
    Autocast,
    ChannelsLast,
    TF32,
    CudnnBenchmark,
    BatchSize,
    Compile,
)


def plan(ctx: Context, only: list[str] | None = None) -> list[Experiment]:
    """Experiments in the order to run them: the measured bottleneck's first, compile last."""
    exps = [cls() for cls in ALL if only is None or cls.key in only]
    loader_first = input_bound_gate(ctx) is None and bool(ctx.loader_base_ms)

    def rank(e: Experiment) -> tuple[int, int]:
        if isinstance(e, Compile):
            return (3, 0)
        order = ALL.index(type(e))
        if e.group == "loader":
            return (0 if loader_first else 1, order)
        return (1 if loader_first else 0, order)

    return sorted(exps, key=rank)
