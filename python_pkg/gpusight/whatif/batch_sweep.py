"""The batch size sweep (``BatchSweep``), how the in-process driver measures the batch knob's
points (``knobs/batch.py``: the first point, the next after each, the finding and the note):
the batch grown to the knee on cached batches, then, when the loader sets the pace, the answer
checked end to end with the user's loader.
"""

from __future__ import annotations

import statistics
from typing import Any

import torch

from ..knobs import dataloader
from ..knobs.batch import MEMORY_SHARE, local_factor_arm, next_factor
from ..knobs.gain_rule import KNEE_GAIN, knee_of
from ..knobs.tensors import batch_len
from ..report import Scalar
from .arms import planned
from .context import Context, Skip, VariantOOM
from .procedures import START_PER_WORKER_S, START_S, KnobRow, Outcome, outcome_of, whole_rounds
from .restore import tensor_bytes
from .runner import Comparison


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


class BatchSweep(KnobRow):
    """The batch to the knee: the knob's points in turn (``next_factor``), short trials.

    A point is two interleaved pairs of short blocks: the baseline's few steps, and as many steps
    of the larger batch as take about as long (at least ``MIN_STEPS``). The sweep stops when a
    doubling adds less than ``KNEE_GAIN`` throughput per sample, at the knob's largest factor,
    when the next batch would not fit in free device memory, on OOM, or when the budget is out.
    """

    group = "compute"
    SWEEP_REPS = 2
    TRIAL_STEPS = 10  # timed steps of the baseline's trial block
    MIN_STEPS = 3  # timed steps of a larger batch's trial block, at least
    BUILD_S = 0.1  # copying the model for a point

    def _base_ms(self, ctx: Context) -> float:
        return statistics.median(ctx.cached_base_ms) if ctx.cached_base_ms else 50.0

    def _trial(self, ctx: Context, step_ms: float) -> tuple[tuple[int, int], float]:
        """Steps (baseline, larger batch) of a trial whose larger step is expected to take
        ``step_ms``, and the seconds of one pair."""
        base_ms = self._base_ms(ctx)
        b = max(1, min(ctx.steps, self.TRIAL_STEPS))
        v = int(max(self.MIN_STEPS, min(b, round(b * base_ms / max(step_ms, 1e-6)))))
        warm = ctx.warmup(ctx.cached_base.plan) if ctx.cached_base is not None else 1
        pair_s = ((b + warm) * base_ms + (v + 1) * step_ms) / 1000 + self.BUILD_S
        return (b, v), pair_s

    def cost_s(self, ctx: Context) -> float:
        return self.SWEEP_REPS * self._trial(ctx, 2 * self._base_ms(ctx))[1] + self._reserve(ctx)

    # --- end to end, when the loader sets the pace ---------------------------------------------

    E2E_REPS = 2
    E2E_STEPS = 2  # timed steps of the larger batch with the loader: a sample of its batches

    def _e2e_possible(self, ctx: Context) -> bool:
        loader = ctx.work.loader
        return ctx.loader_bound and ctx.dataloader and dataloader.can_resize_batches(loader)

    def _e2e_trial(self, ctx: Context, factor: int) -> tuple[tuple[int, int], float]:
        """Steps (your loader, the larger batch from your loader) and one pair's seconds.

        The forecast takes loading to grow with the batch's items (it does, item by item) and
        compute at most as much: ``factor`` times the step with the loader.
        """
        lo = statistics.median(ctx.loader_base_ms)
        w = dataloader.workers(ctx.work.loader)
        b = whole_rounds(min(ctx.steps, 4), w)
        v = whole_rounds(self.E2E_STEPS, w)
        warm = ctx.warmup(planned("", source="loader"))
        start = START_S + START_PER_WORKER_S * w if w else 0.0
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
            variant = planned(
                f"batch_size={bs * x} with your loader", source="loader", batch_factor=x
            )
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
        first = self.planned_arm(ctx)
        bs = batch_len(ctx.work.cached[0]) or 1
        reserve = self._reserve(ctx)
        results: list[tuple[int, Comparison]] = []
        stop = ""
        oom_batch = 0  # the batch size that ran out of memory, if one did
        f = ratio = int(first.changes["batch_factor"])
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
            variant = local_factor_arm(bs, f)
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
            if per_doubling < KNEE_GAIN:
                stop = (
                    f"stopped at batch {bs * f}: {per_doubling:.2f}x per doubling, "
                    f"less than {KNEE_GAIN:.2f}x (the knee)"
                )
                break
            best = cmp.speedup
            nxt = next_factor(f, per_doubling)
            if nxt <= f:
                stop = f"stopped at batch {bs * f}: {f}x the batch, the largest tried"
                break
            ratio = nxt // f
            step_ms = cmp.after_ms * f * ratio
            if ctx.cuda and grown > 0:
                fixed = _fixed_state_bytes(ctx)
                need = fixed + max(0, grown - fixed) * ratio
                free, _ = torch.cuda.mem_get_info(ctx.device)
                if need > MEMORY_SHARE * free:
                    stop = (
                        f"stopped before batch {bs * nxt}: it would need about "
                        f"{need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free"
                    )
                    break
            f = nxt
        if not results:
            raise Skip(stop or "no batch size could be measured")
        f, cmp = knee_of([((x, c), c.speedup) for x, c in results])
        series: list[dict[str, Any]] = [{"x": bs, "y": round(cmp.before_ms, 3), "label": "yours"}]
        series += [{"x": bs * x, "y": round(c.after_ms, 3)} for x, c in results]
        if oom_batch:
            series.append({"x": oom_batch, "y": None, "label": "out of memory"})
        out = outcome_of(
            self.key,
            f"batch_size={bs * f} instead of {bs} (ms per {bs} samples)",
            self.finding_id,
            cmp,
            local_factor_arm(bs, f),
            {
                **dataloader.batch_change(bs * f),
                "from_batch_size": bs,
                "factor": f,
                "largest_tried": bs * results[-1][0],
                **{f"speedup_batch_{bs * x}": round(c.speedup, 3) for x, c in results},
            },
            series,
        )
        out.params.update(dataloader.batch_change(bs * f), factor=f)
        if self._e2e_possible(ctx):
            out = self._with_loader(ctx, out, bs, f, [x for x, c in results if x <= f])
            f = out.params["factor"]
        self.finish(out, self.knob.local_params(first, ctx))  # the note on the batch's factor
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
            **dataloader.batch_change(bs * x),
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
            local_factor_arm(bs, x),
            params,
            w.series,
            scope="end_to_end",
        )
        e2e.params.update({**out.params, **dataloader.batch_change(bs * x)}, factor=x)
        e2e.notes += out.notes
        if e2e.winner is None and out.winner is not None:
            e2e.notes.append(
                f"On cached batches (compute alone) batch_size={bs * f} ran {out.speedup:.2f}x "
                f"faster, but with your loader batch_size={bs * x} gave {cmp.speedup:.2f}x: "
                "loading sets the pace, and a larger batch only moves the wait."
            )
        return e2e
