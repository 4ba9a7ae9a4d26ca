"""``gpusight.diagnose``: baseline, one change at a time on copies, the winners together, restore.

Order of work, all inside one wall-clock budget:

1. snapshot everything the user owns (model, optimizer, RNG, flags; see ``restore.py``);
2. take a fixed set of batches from a clone of the loader, then time the unchanged step twice
   over: with the loader (what the user runs) and from the cached batches (compute alone);
3. each experiment that applies, interleaved with its baseline on copies, in the order the
   baseline suggests (loader experiments first when loading costs time), skipping what the
   budget cannot pay for; pin_memory and prefetch_factor build on the num_workers winner, and
   after the loader experiments the DataLoader settings that won (two or more) are measured
   together in one loader against the user's (``loader_combined``: a row, not a finding);
4. every winner together, end to end, against the unchanged step with the loader (forecast at
   the measured loader speed times the batch factor, skipped when it does not fit);
5. restore (also after an exception, an OOM or Ctrl-C) and release every copy.

Each row says what its timing covered (``WhatIf.scope``): ``end_to_end``, the user's whole step
with their loader, or ``compute_only``, the step on batches cached from the loader. While the
loader sets the pace (steps with it at least 10 % slower than on cached batches) a compute-only
gain is no measured finding: it becomes an estimate bounded by the loading time, and the batch
size sweep's answer is timed again with the loader at the larger batch.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from ..fixes.kernel_names import bind_report, caller_namespace
from ..knobs import dataloader
from ..knobs.base import Arm as Plan
from ..knobs.gain_rule import MIN_GAIN, noise_pct
from ..one_gain import REPEAT_OF, one_gain_per_change
from ..report import Fix, Report, WhatIf
from ..rules.severity import settle
from .arms import (
    Arm,
    StepFn,
    Workload,
    batch_factor,
    model_device,
    planned,
    relabelled,
    same_change,
    source_of,
)
from .cell_fixes import fix_in_cells
from .context import Budget, Context, Progress, Skip, VariantOOM
from .errors import DiagnoseError, OutOfMemoryDuringDiagnosis
from .findings import combination, combined_code, findings_of, verdict
from .loaders import is_dataloader, is_reiterable
from .machine import machine_facts
from .plan import ALL, plan
from .procedures import (
    START_PER_WORKER_S,
    START_S,
    TOGETHER_KEYS,
    Experiment,
    Outcome,
    cpu_cores,
    outcome_of,
    whole_rounds,
)
from .restore import Snapshot
from .runner import ArmFailure

DEFAULT_REPS = 3
CACHE_BATCHES = 8
BASELINE_SHARE = 0.25  # of the budget, for the four blocks of the unchanged step
CACHE_SHARE = 0.1  # of the budget, for taking the batches to replay (two at least)
MIN_STEPS = 2
EXPERIMENT_KEYS = tuple(e.key for e in ALL)


def _snapshot_limit() -> int | None:
    """Largest host copy of the user's tensors to keep for restoring (a quarter of free RAM)."""
    try:
        import psutil

        return int(psutil.virtual_memory().available // 4)
    except Exception:
        return 2 << 30


def _check_args(model: object, loader: object, steps: int, budget_s: float) -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not hasattr(loader, "__iter__"):
        raise TypeError(
            "loader must be a DataLoader or another iterable of batches, "
            f"got {type(loader).__name__}"
        )
    if not is_reiterable(loader):
        raise TypeError(
            "loader is a one-shot iterator (e.g. a generator): diagnosing would use up your "
            "batches. Pass the DataLoader (or a list of batches) instead."
        )
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    if budget_s <= 0:
        raise ValueError(f"budget_s must be positive, got {budget_s}")


def diagnose(
    model: nn.Module,
    loader: Any,
    loss_fn: Callable[..., Any] | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    step_fn: StepFn | None = None,
    steps: int = 20,
    budget_s: float = 60,
    progress: Progress | None = None,
    *,
    experiments: Sequence[str] | None = None,
    namespace: Mapping[str, Any] | None = None,
) -> Report:
    """Measure what each fix would gain on copies of your model, and return the report.

    ``loader`` is a DataLoader (or any re-iterable of batches). The default step is
    ``loss_fn(model(x), y)``, backward, ``optimizer.step()`` for batches ``(x, y)`` (``x``
    alone, ``(x1, ..., y)`` and dicts of keyword arguments work too); without ``loss_fn`` a model
    that returns a loss (a scalar, or an output with ``.loss``) is trained on that. Anything else:
    pass ``step_fn(model, batch, optimizer)``, which must train the ``model`` and ``optimizer``
    it is given (copies), with ``batch`` already on the model's device.

    ``steps`` timed steps per measurement block, ``budget_s`` seconds for everything: each run
    is forecast (loading at its settings included) before it starts and skipped with the reason
    when it does not fit, a block that overruns is stopped between two steps, and the call
    returns within ``budget_s`` plus a margin of max(2 s, 10 %) (one step in flight, releasing
    the copies, restoring). ``progress(stage, fraction)`` is called as it goes.
    ``experiments`` picks a subset by key (the knobs' rows:
    {experiment_keys}; ``loader_combined`` is the DataLoader winners together; docs/whatif.md
    says what each measures).
    ``namespace``: the caller's variables (default: the calling code's), in whose names the
    fixes' code is written; what it still needs is in each fix's ``unbound_names``.

    Your model, optimizer, RNG states and torch flags are bit-identical afterwards, also when
    this raises (:class:`~gpusight.whatif.errors.LoaderError`, ``StepError``, ...) or is
    interrupted.
    """
    _check_args(model, loader, steps, budget_s)
    unknown = sorted(set(experiments or ()) - set(EXPERIMENT_KEYS))
    if unknown:
        raise ValueError(f"unknown experiments {unknown}; known: {', '.join(EXPERIMENT_KEYS)}")
    budget = Budget(budget_s, progress)
    budget.tell("snapshot of your model, optimizer, RNG and flags", 0.0)
    snap = Snapshot.capture(model, optimizer, loss_fn, loader, max_copy_bytes=_snapshot_limit())
    work = Workload(model, loader, loss_fn, optimizer, step_fn, model_device(model))
    ctx = Context(work, budget, steps=steps, reps=DEFAULT_REPS, cpu_count=cpu_cores())
    report: Report | None = None
    try:
        report = _diagnose(ctx, snap, list(experiments) if experiments is not None else None)
    finally:
        ctx.close()
        changed = snap.restore()
        if report is not None and changed:
            report.notes.append(
                "Restored after the diagnosis, which had changed them: " + ", ".join(changed) + "."
            )
    objects = {"model": model, "optimizer": optimizer, "loader": loader,
               "dataset": getattr(loader, "dataset", None), "loss_fn": loss_fn}  # fmt: skip
    bind_report(report, objects, namespace if namespace is not None else caller_namespace())
    budget.tell("done", 1.0)
    return report


# The keys are the registry's: help(gpusight.diagnose) names each.
if diagnose.__doc__:
    diagnose.__doc__ = diagnose.__doc__.replace(
        "{experiment_keys}", ", ".join(f"``{k}``" for k in EXPERIMENT_KEYS)
    )


def _cache_batches(ctx: Context, arm: Arm) -> list[Any]:
    """A fixed set of batches, taken once from a clone of the loader."""
    n = max(1, min(ctx.steps, CACHE_BATCHES))
    batches: list[Any] = []
    arm.start_epoch()
    try:
        for _ in range(n):
            if len(batches) >= 2 and ctx.budget.elapsed() > CACHE_SHARE * ctx.budget.seconds:
                break  # a loader this slow: fewer batches to replay, not a broken budget
            try:
                batches.append(arm.next_batch())
            except StopIteration:
                break  # a loader shorter than n batches
            except Exception as exc:
                failure = ArmFailure("loader", arm.batch_index, exc)
                raise ctx.user_error(failure, "taking batches to replay") from exc
    finally:
        arm.stop()
    if not batches:
        raise DiagnoseError("the loader gave no batches: it is empty")
    return batches


def _build_baseline(ctx: Context, variant: Plan) -> Arm:
    try:
        return ctx.build(variant)
    except VariantOOM as exc:
        raise OutOfMemoryDuringDiagnosis(
            f"out of device memory copying your model and optimizer for {variant.label!r}: "
            "gpusight runs on a copy beside yours, so it needs room for one more; free memory "
            "(del unused tensors, torch.cuda.empty_cache()) and try again"
        ) from exc.__cause__
    except Skip as exc:
        raise DiagnoseError(
            f"{exc}. gpusight runs what-ifs on copy.deepcopy(model) and a fresh optimizer of "
            "your optimizer's class: make them copyable, or pass step_fn"
        ) from exc.__cause__


def _baselines(ctx: Context, snap: Snapshot) -> None:
    ctx.stage = "baseline: your step, as it is"
    ctx.budget.tell(ctx.stage)
    ctx.loader_base = _build_baseline(ctx, planned("your step with your loader", source="loader"))
    t0 = time.perf_counter()
    ctx.work.cached = _cache_batches(ctx, ctx.loader_base)
    load_s = (time.perf_counter() - t0) / len(ctx.work.cached)
    ctx.cached_base = _build_baseline(ctx, planned("your step on replayed batches"))
    probe_ms = ctx.baseline_block("cached", steps=1)  # one warm-up step, one timed
    _check_untouched(snap)
    _fit_steps(ctx, probe_ms / 1000 + load_s)
    for i in range(2):
        if i and not ctx.affordable(ctx.block_s("loader") + ctx.block_s("cached")):
            break  # one block each: a slow step, a short budget
        ctx.baseline_block("loader")
        ctx.budget.tell(ctx.stage)
        ctx.baseline_block("cached")
        ctx.budget.tell(ctx.stage)
    _check_untouched(snap)


def _check_untouched(snap: Snapshot) -> None:
    touched = snap.touched()
    if touched:
        raise DiagnoseError(
            f"the training step changed your own {' and '.join(touched)}: step_fn must "
            "train the model and optimizer it is given (gpusight passes copies), not "
            "global ones. Your objects were restored."
        )


def _fit_steps(ctx: Context, step_s: float) -> None:
    """Fewer steps per block when the four baseline blocks would not fit their share."""
    warm = ctx.warmup(planned("", source="loader"))
    fit = int(BASELINE_SHARE * ctx.budget.left() / (4 * max(step_s, 1e-6))) - warm
    if fit < ctx.steps:
        new = max(MIN_STEPS, fit)
        ctx.notes.append(
            f"A step takes about {step_s * 1000:.0f} ms: {new} timed steps per measurement "
            f"instead of {ctx.steps}, to fit budget_s={ctx.budget.seconds:.0f}."
        )
        ctx.steps = new


def _run_record(ctx: Context) -> dict[str, Any]:
    ms = ctx.loader_base_ms
    return {
        "label": "unchanged step with your loader (on a copy of your model)",
        "steps": ctx.steps_for(planned("", source="loader")) * len(ms),
        "warmup_steps": ctx.warmup(planned("", source="loader")) * len(ms),
        "step_time_ms": round(statistics.median(ms), 3),
        "step_time_spread_ms": [round(min(ms), 3), round(max(ms), 3)],
        "step_times_ms": [round(x, 3) for x in ms],
    }


def _skipped(exp: Experiment, reason: str) -> WhatIf:
    return WhatIf(
        change=exp.label,
        finding_id=exp.finding_id,
        before_ms=None,
        after_ms=None,
        speedup=None,
        skipped=reason,
    )


def _combination_cost(ctx: Context) -> float:
    return 2 * (2 * ctx.block_s("loader") + 0.5)


def _choose_reps(ctx: Context, exps: list[Experiment]) -> None:
    """Three repetitions when they all fit in the budget, two otherwise."""
    need = sum(e.cost_s(ctx) for e in exps if not e.startup_s and e.applies(ctx) is None)
    if need + _combination_cost(ctx) > ctx.budget.left():
        ctx.reps = 2


def _experiments(ctx: Context, only: list[str] | None) -> tuple[list[WhatIf], list[Outcome]]:
    rows: list[WhatIf] = []
    outcomes: list[Outcome] = []
    exps = plan(ctx, only)
    _choose_reps(ctx, exps)
    for i, exp in enumerate(exps):
        ctx.stage = f"what-if: {exp.label} ({i + 1}/{len(exps)})"
        ctx.budget.tell(ctx.stage)
        reason = exp.applies(ctx)
        # Time for the final run of the winners is kept back once there is a winner to run.
        reserve = _combination_cost(ctx) if any(o.winner for o in outcomes) else 0.0
        if reason is None and not ctx.affordable(exp.cost_s(ctx), reserve=reserve):
            kept = f", {reserve:.0f} s of them kept for the winners' final run" if reserve else ""
            reason = (
                f"budget exhausted: needs about {exp.cost_s(ctx):.0f} s, "
                f"{max(0.0, ctx.budget.left()):.0f} s left{kept} (raise budget_s)"
            )
        if reason is not None:
            rows.append(_skipped(exp, reason))
            continue
        # One experiment (a sweep, say) may use at most a share of what is left, so that the
        # ones after it still get their turn.
        share = max(
            exp.cost_s(ctx), exp.share_of(ctx) * (ctx.budget.left() - _combination_cost(ctx))
        )
        ctx.slice_end = time.perf_counter() + share
        try:
            out = exp.apply(ctx)
        except Skip as why:
            rows.append(_skipped(exp, str(why)))
            continue
        finally:
            ctx.slice_end = None
        ctx.results[exp.key] = out
        outcomes.append(out)
        rows.append(out.what_if)
    return rows, outcomes


def _combination_plan(ctx: Context, v: Plan, against: str) -> tuple[tuple[int, int], float]:
    """Timed steps (baseline, winners) of the final run, and one pair's forecast seconds.

    The winners' step is forecast at what was measured: the num_workers winner's step with the
    loader (else the user's loader), times the batch factor, since loading grows with the items
    of a batch. A larger batch takes fewer steps (at least two, whole rounds of the workers):
    the comparison is per sample.
    """
    base_ms = ctx.loader_base_ms if against == "loader" else ctx.cached_base_ms
    base_step = statistics.median(base_ms) if base_ms else 50.0
    per_batch = base_step
    if source_of(v) == "loader":
        per_batch = ctx.loader_step_ms(ctx.workers(v)) or base_step
    elif ctx.cached_base_ms:
        per_batch = statistics.median(ctx.cached_base_ms)
    f = max(1, batch_factor(v))
    w = ctx.workers(v)
    base_arm = ctx.base_for(against)
    b = ctx.steps_for(base_arm.plan)
    n = ctx.steps_for(v)
    if f > 1:
        n = whole_rounds(max(MIN_STEPS, -(-n // f)), w)
    start = START_S + START_PER_WORKER_S * w if w else 0.0
    pair_s = (b + ctx.warmup(base_arm.plan)) * base_step / 1000
    pair_s += (n + ctx.warmup(v)) * per_batch * f / 1000 + start + 0.1
    return (b, n), pair_s


def _repeated(v: Plan, winners: list[Outcome]) -> Outcome | None:
    """The only winner, whose change the final run measures again. (A winner measured on top
    of another, prefetch_factor on the num_workers winner, has the same variant as the two
    together, but its row's gain is over that winner: the final run's is a new one.)"""
    (only, *more) = winners
    return only if not more and only.winner is not None and same_change(only.winner, v) else None


def _combine(ctx: Context, winners: list[Outcome]) -> tuple[WhatIf | None, list[str]]:
    v = combination(winners)
    if v is None:
        return None, []
    again = _repeated(v, winners)
    against = "loader" if ctx.loader_base is not None else "cached"
    if source_of(v) == "cached":
        v = relabelled(
            v, v.label, source="loader"
        )  # end to end: the compute winners while loading as the user does
    if (
        source_of(v) == "loader"
        and batch_factor(v) > 1
        and not (is_dataloader(ctx.work.loader) and dataloader.can_resize_batches(ctx.work.loader))
    ):
        v, against = relabelled(v, v.label, source="cached"), "cached"
    names = ", ".join(o.winner.label for o in winners if o.winner is not None)
    change = f"all winners together: {names}"
    ctx.stage = "what-if: all winners together"
    ctx.budget.tell(ctx.stage)
    steps, pair_s = _combination_plan(ctx, v, against)
    if not ctx.affordable(pair_s):
        return WhatIf(
            change,
            None,
            None,
            None,
            skipped=(
                f"budget exhausted: needs about {pair_s:.0f} s a repetition, "
                f"{max(0.0, ctx.budget.left()):.0f} s left (raise budget_s)"
            ),
        ), []
    try:
        cmp, arm = ctx.measure(
            relabelled(v, change),
            against=against,
            scale=batch_factor(v),
            reps=2,
            steps=steps,
            pair_s=pair_s,
        )
        ctx.drop(arm)
    except Skip as why:
        return WhatIf(change, None, None, None, skipped=str(why)), []
    if cmp.pairs == 0:
        return WhatIf(change, None, None, None, skipped="budget exhausted"), []
    out = outcome_of(
        "combination",
        change,
        winners[0].finding_id or "",
        cmp,
        v,
        scope="end_to_end" if against == "loader" else "compute_only",
    )
    w = out.what_if
    w.finding_id = None
    w.params = {
        **(w.params or {}),
        "against": "your loader" if against == "loader" else "batches cached from your loader",
        "winners": ",".join(o.key for o in winners if o.winner is not None),
    }
    if again is not None:
        # One change measured twice: its finding is its card (one_gain.py), with one gain.
        w.params[REPEAT_OF] = again.what_if.change
        return w, []
    w.fix = Fix(
        text="Every measured winner in one training loop.",
        snippet_id="whatif.combined",
        code=combined_code(
            ctx,
            v,
            f"{cmp.speedup:.2f}x end to end"
            if against == "loader"
            else f"{cmp.speedup:.2f}x compute only",
        ),
        language="python",
    )
    notes = []
    best = max(winners, key=lambda o: o.speedup)
    if cmp.speedup * MIN_GAIN < best.speedup:
        how = (
            "compute only, on batches cached from your loader"
            if best.what_if.scope == "compute_only"
            else "with your loader"
        )
        notes.append(
            f"Together the winners gave {cmp.speedup:.2f}x, less than the best alone "
            f"({best.speedup:.2f}x, {how}): the changes overlap or the loader now limits the step."
        )
    return w, notes


def _helps_the_step(ctx: Context, o: Outcome) -> bool:
    if not ctx.loader_bound or o.what_if.scope != "compute_only":
        return True
    return ctx.end_to_end_bound(o.speedup) >= MIN_GAIN


def _diagnose(ctx: Context, snap: Snapshot, only: list[str] | None) -> Report:
    if not snap.values_kept:
        ctx.notes.append(
            "Your tensors are too large to keep a host copy for restoring; gpusight relies on "
            "working on copies only (it checks version counters that nothing of yours changed)."
        )
    _baselines(ctx, snap)
    rows, outcomes = _experiments(ctx, only)
    # A measurement of winners together (the DataLoader's) is no winner of its own: its parts are.
    winners = [o for o in outcomes if o.winner is not None and o.key not in TOGETHER_KEYS]
    # A compute-only win that loading leaves no room for (its bound on the whole step is in the
    # noise) would only make the final run longer: a larger batch from a slow loader, say.
    winners = [o for o in winners if _helps_the_step(ctx, o)]
    combo, combo_notes = _combine(ctx, winners)
    if combo is not None:
        rows.append(combo)
    findings = findings_of(ctx, outcomes)
    fix_in_cells(ctx, findings, outcomes)
    one_gain_per_change(findings, rows)
    settle(findings)
    tried = sum(1 for r in rows if r.skipped is None and r is not combo)
    notes = list(ctx.notes) + combo_notes
    notes += [
        n
        for o in outcomes
        if o.winner is None
        for n in o.notes
        if "sweep" in n or "moves the wait" in n
    ]
    notes += [n for o in outcomes if o.winner is not None for n in o.notes if "learning rate" in n]
    notes += [n for o in outcomes for n in o.notes if "step_fn" in n]  # the user's code to change
    if ctx.work.device.type != "cuda":
        notes.append(
            "The model is on the CPU: GPU-only experiments (pinned memory, autocast, TF32, "
            "cudnn.benchmark, dataset on the GPU) were skipped."
        )
    return Report(
        kind="diagnose",
        machine=machine_facts(),
        run=_run_record(ctx),
        verdict=verdict(
            findings,
            tried,
            noise_pct(ctx.cached_base_ms),
            (statistics.median(ctx.loader_base_ms), statistics.median(ctx.cached_base_ms))
            if ctx.loader_bound
            else None,
        ),
        findings=findings,
        what_if=rows,
        notes=notes,
        title="What-if: each fix measured on copies of your model",
    )
