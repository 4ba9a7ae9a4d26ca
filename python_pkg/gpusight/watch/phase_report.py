"""The watch's phases (``phases.py``) as the rules' evidence and the report's ``run.phases``."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from ..report import SourceLine
from ..rules.between_steps import PhaseSeen, PhaseSync
from .call_sites import CallSite
from .phases import EVALUATION

if TYPE_CHECKING:
    from .recorder import StepRecord, StepRecorder
    from .watched_run import WatchedRun


def _line(site: CallSite | None) -> SourceLine | None:
    if site is None:
        return None
    shown_line = site.line + site.offset
    try:
        import linecache

        code = linecache.getline(site.filename, site.line).strip() or None
    except Exception:
        code = None
    return SourceLine(file=site.shown, line=shown_line, code=code)


def _step_of(records: list[StepRecord], t: int) -> int | None:
    """0-based index of the record whose span holds ``t``."""
    lo, hi = 0, len(records) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        r = records[mid]
        if t < r.start_ns:
            hi = mid - 1
        elif t >= r.end_ns:
            lo = mid + 1
        else:
            return mid
    return None


PER_STEP_NOTE = (
    "the model was put in eval mode at every step (a teacher or an EMA model?): that time is "
    "the training step's, not an evaluation between the steps"
)


def settle(w: WatchedRun, rec: StepRecorder) -> str | None:
    """Evaluations at every step (a distillation's teacher, an EMA model) given back to the
    steps that held them: their time, loader wait, copies, model time and syncs. The note to
    add, where it did so."""
    hooks = w.phases
    evals = [e for e in hooks.tracker.events if e.kind == EVALUATION]
    close = len(evals) >= 2 and all(
        b.at_step - a.at_step <= 2 for a, b in itertools.pairwise(evals)
    )
    if not evals or not (hooks.per_step or close):
        return None
    for e in evals:
        at = _step_of(rec.records, e.start_ns)
        if at is None:
            continue
        r = rec.records[at]
        r.phase_ns = max(0, r.phase_ns - e.duration_ns)
        r.data_ns += e.data_ns
        r.copy_ns += e.copy_ns
        r.framework_ns += e.framework_ns
        r.syncs += e.syncs
        for key, n in e.sync_sites.items():
            agg = w.collected.syncs.get(key)
            if agg is not None:
                agg.count += n
                agg.measured += n if r.phase == "measure" else 0
    hooks.tracker.events = [e for e in hooks.tracker.events if e.kind != EVALUATION]
    rec.phase_seen = bool(hooks.tracker.events)
    return PER_STEP_NOTE


def phase_evidence(w: WatchedRun, rec: StepRecorder, clean: list[StepRecord]) -> list[PhaseSeen]:
    """One ``PhaseSeen`` per kind, with the occurrences in ``clean`` (the reported steps) and
    the step numbers of all of them."""
    events = w.phases.tracker.events
    if not events:
        return []
    in_clean = {id(r): i for i, r in enumerate(clean)}
    main = max(w.collected.loaders.values(), key=lambda s: s.calls, default=None)
    by_kind: dict[str, PhaseSeen] = {}
    sites: dict[str, dict[str, int]] = {}
    for ev in events:
        seen = by_kind.get(ev.kind)
        if seen is None:
            seen = by_kind[ev.kind] = PhaseSeen(
                kind=ev.kind,
                steps=[],
                ms=[],
                source=_line(ev.site),
                caller=_line(ev.caller),
                syncs_recorded=w.cuda_available,
                workers=ev.workers,
                init_fn=ev.init_fn,
                feeds_steps=main is not None and ev.dataset_id == main.dataset_id,
            )
            sites[ev.kind] = {}
        at = _step_of(rec.records, ev.start_ns)
        if at is None:
            continue
        seen.all_steps.append(at + 1)
        idx = in_clean.get(id(rec.records[at]))
        if idx is None:
            continue
        seen.steps.append(idx)
        seen.ms.append(ev.duration_ns / 1e6)
        seen.syncs += ev.syncs
        seen.data_wait_ms += ev.data_ns / 1e6
        seen.model_ms += ev.framework_ns / 1e6
        for key, n in ev.sync_sites.items():
            sites[ev.kind][key] = sites[ev.kind].get(key, 0) + n
    for kind, seen in by_kind.items():
        seen.sync_sites = [_sync(w, key, n) for key, n in sites[kind].items()]
    return list(by_kind.values())


def _sync(w: WatchedRun, key: str, count: int) -> PhaseSync:
    agg = w.collected.syncs.get(key)
    site = agg.site if agg is not None else None
    return PhaseSync(
        kind=agg.kind if agg is not None else "sync",
        count=count,
        file=site.file if site else None,
        line=site.line if site else None,
        code=site.code if site else None,
    )


def phase_rows(phases: list[PhaseSeen], measured: int) -> list[dict[str, Any]]:
    """``run.phases``: each kind's occurrences, period, time and the line that starts it."""
    from ..rules.between_steps import per_step_ms

    rows = []
    for p in phases:
        row: dict[str, Any] = {
            "kind": p.kind,
            "steps": p.steps,
            "times_ms": [round(x, 3) for x in p.ms],
            "period_steps": p.period,
            "per_step_ms": round(per_step_ms(p, measured), 3),
            "syncs": p.syncs,
        }
        for name, src in (("source", p.source), ("caller", p.caller)):
            if src is not None:
                row[name] = {
                    "file": src.file,
                    "line": src.line,
                    **({"code": src.code} if src.code else {}),
                }
        rows.append(row)
    return rows


def unmeasured_note(phases: list[PhaseSeen], measured: int) -> str | None:
    """What to say when phases ran, but none within the reported steps."""
    if not phases or any(p.ms for p in phases):
        return None
    names = {"evaluation": "an evaluation", "checkpoint": "a checkpoint"}
    kinds = " and ".join(sorted({names.get(p.kind, "an epoch start") for p in phases}))
    at = sorted(s for p in phases for s in p.all_steps)
    where = f" (step {', '.join(str(s) for s in at[:5])})" if at else ""
    return (
        f"{kinds} ran between the training steps{where}, but none within the {measured} "
        "measured steps (the watch measured more steps to cover one, up to 8x those asked for): "
        "its cost is not in these figures; watch more steps to include it"
    )


def phase_free_run(analysed: list[StepRecord]) -> list[StepRecord]:
    """The longest unbroken run of the profiled steps that held no phase: the profiler window's
    figures describe the training step, not an evaluation that fell inside it."""
    best: list[StepRecord] = []
    run: list[StepRecord] = []
    for r in analysed:
        if r.phase_ns:
            run = []
            continue
        run.append(r)
        if len(run) > len(best):
            best = list(run)
    return best


__all__ = ["phase_evidence", "phase_free_run", "phase_rows", "settle", "unmeasured_note"]
