"""What runs between the training steps (evaluation, checkpoint saving, a DataLoader's epoch
start) -> its share of the run and one finding per kind, with its period, the line that starts
it, and the phase's own fix.
Pure; never imports torch.

The watch times each phase apart from the training steps (``watch/phases.py``): a step's figures
are its training's, and the phases' time per step is a category of its own (``between_steps``).
That time is the phase's length over its period where the period is known (two occurrences
seen), else over the measured steps: a window of 20 steps holding one evaluation that recurs
every 100 would otherwise claim five times its share.
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass, field

from ..durations import format_ms
from ..fixes import fix
from ..report import Evidence, Finding, Fix, Impact, Severity, SourceLine

EVALUATION = "evaluation"
CHECKPOINT = "checkpoint"
EPOCH_START = "epoch_start"
KINDS = {
    "code.eval_phase": EVALUATION,
    "code.checkpoint_phase": CHECKPOINT,
    "load.epoch_start": EPOCH_START,
}
WHAT = {EVALUATION: "An evaluation", CHECKPOINT: "Saving a checkpoint",
        EPOCH_START: "The DataLoader's workers starting anew"}  # fmt: skip
"""Each kind as a title begins."""
FINDING_IDS = {kind: fid for fid, kind in KINDS.items()}
WARN_PCT = 5.0
CRITICAL_PCT = 25.0
"""Shares of the run's time (%) at which a phase's finding warns and is critical: the thresholds
of the step's own categories."""
NAMED_PCT = 5.0
"""The phases are the verdict when they take at least this share and more than any cause
inside the training step (the same bar as the step's categories)."""
PERIOD_SLACK = 1
"""Occurrences this many steps off a common period still have it (a loop that evaluates on
``step % n == 0`` after a warm-up step, or at epoch ends of a loader of uneven length)."""
FIRST_SLOW = 2.0
"""A first occurrence this many times the others' median is a warm-up, not typical."""


@dataclass
class PhaseSync:
    """A sync site inside the phase: what reads a value back, and how often per occurrence."""

    kind: str
    count: int
    file: str | None = None
    line: int | None = None
    code: str | None = None


@dataclass
class PhaseSeen:
    """One kind of phase over the watched run."""

    kind: str
    steps: list[int]
    """Indices into the evidence's steps (the measured ones) of the steps that held it."""
    ms: list[float]
    """Each occurrence's time within those steps, in order."""
    all_steps: list[int] = field(default_factory=list)
    """1-based step numbers of every occurrence since the watch began, warm-up included."""
    syncs: int = 0
    """Syncs recorded in the measured occurrences."""
    sync_sites: list[PhaseSync] = field(default_factory=list)
    data_wait_ms: float = 0.0
    """The loader's wait inside the measured occurrences, in all."""
    model_ms: float = 0.0
    """Time in the model's calls inside the measured occurrences (timed steps only)."""
    source: SourceLine | None = None
    """The user's line that starts it (``model.eval()``, ``torch.save(...)``)."""
    caller: SourceLine | None = None
    """The line that called the function holding ``source`` (the loop's ``evaluate(...)``)."""
    syncs_recorded: bool = True
    """Whether syncs could be seen at all (CUDA's sync-debug mode: not on a CPU run)."""
    workers: int = 0
    """An epoch start's worker processes."""
    init_fn: str | None = None
    """An epoch start's ``worker_init_fn``, by name."""
    feeds_steps: bool = False
    """An epoch start's loader is the one that fed the training steps (its call is the one the
    report's loader fixes patch)."""

    @property
    def period(self) -> int | None:
        return period_of(self.all_steps)

    @property
    def ms_each(self) -> float:
        """The typical occurrence: the median, the first left out where it took over
        ``FIRST_SLOW`` times the others' (the first evaluation builds its kernels: 540 ms
        before 48-54 ms on an H200)."""
        ms = self.ms
        if len(ms) >= 2 and ms[0] > FIRST_SLOW * statistics.median(ms[1:]):
            ms = ms[1:]
        return statistics.median(ms) if ms else 0.0


def period_of(steps: list[int]) -> int | None:
    """The common distance between occurrences, when they recur at one (within a step)."""
    if len(steps) < 2:
        return None
    gaps = [b - a for a, b in itertools.pairwise(steps)]
    typical = int(statistics.median(gaps))
    if typical < 1 or any(abs(g - typical) > PERIOD_SLACK for g in gaps):
        return None
    return typical


def per_step_ms(phase: PhaseSeen, measured_steps: int) -> float:
    """The phase's time per training step over the long run."""
    if not phase.ms:
        return 0.0
    p = phase.period
    if p is not None:
        return phase.ms_each / p
    return sum(phase.ms) / max(1, measured_steps)


def between_steps_ms(phases: list[PhaseSeen], measured_steps: int) -> float:
    return sum(per_step_ms(p, measured_steps) for p in phases)


def _severity(share: float) -> Severity:
    return "critical" if share >= CRITICAL_PCT else "warn" if share >= WARN_PCT else "info"


def _where(src: SourceLine | None) -> str:
    if src is None:
        return "(line unknown)"
    return f"{src.file} line {src.line}" if src.file == "cell" else f"{src.file}:{src.line}"


def _impact(share: float, period: int | None, kind: str) -> Impact:
    """From the phase run half as often to the phase costing nothing (its syncs gone, its work
    overlapped); the low end is what sorting sees."""
    share = max(0.0, min(share, 95.0))
    lo = 100.0 / (100.0 - share / 2)
    hi = 100.0 / (100.0 - share)
    every = f"every {2 * period} steps instead of {period}" if period else "half as often"
    what = "evaluating" if kind == EVALUATION else "saving"
    text = (
        f"It takes {share:.0f}% of the run: {what} {every} gives {lo:.2f}x; the phase "
        f"costing nothing at all would give {hi:.2f}x. Estimated {lo:.2f}x to {hi:.2f}x."
    )
    if kind == EPOCH_START:
        # Kept workers start once; each epoch still waits for its first batches to be made.
        text = (
            f"It takes {share:.0f}% of the run: with the workers kept, only each epoch's first "
            f"batches are left of it ({lo:.2f}x if that is half) and none of the start-up "
            f"({hi:.2f}x if the first batches cost nothing). Estimated {lo:.2f}x to {hi:.2f}x."
        )
    return Impact(
        basis="estimated",
        text=text,
        speedup=round(lo, 2),
        recoverable_pct=round(share / 2, 1),
        speedup_range=(round(lo, 2), round(hi, 2)),
    )


def _start(phase: PhaseSeen) -> SourceLine | None:
    """The line to name: the loop's call of the function that evaluates or saves; an epoch
    start's own ``for`` over the loader."""
    if phase.kind == EPOCH_START:
        return phase.source or phase.caller
    return phase.caller or phase.source


def _title(phase: PhaseSeen, share: float) -> str:
    what = WHAT[phase.kind]
    p = phase.period
    often = f" every {p} steps" if p else ""
    start = _start(phase)
    at = f" ({_where(start)})" if start is not None else ""
    return f"{what}{often} takes {share:.0f}% of the run, {format_ms(phase.ms_each)} each{at}"


def _evidence(phase: PhaseSeen, share: float) -> list[Evidence]:
    n = max(1, len(phase.ms))
    out = [
        Evidence("occurrences in the measured steps", len(phase.ms)),
        Evidence("every", phase.period, "steps"),
        Evidence("time each", round(phase.ms_each, 2), "ms"),
        Evidence("share of the run", round(share, 1), "%"),
    ]
    if phase.source is not None:
        out.append(Evidence("starts at", _where(phase.source), None, phase.source))
    if phase.caller is not None:
        out.append(Evidence("called from", _where(phase.caller), None, phase.caller))
    if phase.kind == EPOCH_START:
        out.append(Evidence("worker processes", phase.workers))
        if phase.init_fn:
            out.append(Evidence("worker_init_fn", phase.init_fn))
    if phase.kind == EVALUATION:
        if phase.syncs_recorded:
            out.append(Evidence("syncs each", round(phase.syncs / n, 1)))
        out.append(Evidence("loader wait each", round(phase.data_wait_ms / n, 2), "ms"))
        out.append(Evidence("time in the model each", round(phase.model_ms / n, 2), "ms"))
    for s in sorted(phase.sync_sites, key=lambda s: -s.count)[:3]:
        src = (
            SourceLine(s.file, s.line, s.code, s.count)
            if s.file is not None and s.line is not None
            else None
        )
        out.append(Evidence(f"{s.kind} in the phase", s.count, "calls", src))
    return out


def _fix(phase: PhaseSeen, share: float, every: int) -> Fix:
    site = _where(phase.source)
    top = max(phase.sync_sites, key=lambda s: s.count, default=None)
    if phase.kind == EVALUATION:
        # Reading metrics batch by batch is the phase's cause only where the GPU idles between
        # its syncs: on an H200 two evaluations with per-batch .item()/.cpu() ran as fast with
        # the metrics kept on the GPU (0.94x, 1.00x; h200-run21), their time the forward's own.
        syncs = ""
        if top is not None:
            at = _where(SourceLine(top.file, top.line) if top.file and top.line else None)
            syncs = (
                f" Its {top.kind} at {at} read a value back {top.count} times: keeping the "
                "metrics on the GPU and reading them once helps where the host computes "
                "between those reads (a metric on the CPU), not where it only waits."
            )
        return fix(
            "Evaluate less often, or on a fixed subset of the validation set." + syncs,
            "phase.eval_less_often",
            site=site,
            period=every,
            twice=2 * every,
            share=round(share),
        )
    if phase.kind == EPOCH_START:
        return _keep_workers(phase, share, every, site)
    return fix(
        "Save less often, and write the checkpoint from a background thread.",
        "phase.checkpoint_less_often",
        site=site,
        ms=round(phase.ms_each),
        period=every,
        twice=2 * every,
        share=round(share),
    )


def _keep_workers(phase: PhaseSeen, share: float, every: int, site: str) -> Fix:
    init = (
        f" Its worker_init_fn ({phase.init_fn}) then runs once per worker, not at every "
        "epoch; if it builds something (a vocabulary, a tokenizer), build that once in the main "
        "process and hand it to the dataset."
        if phase.init_fn
        else ""
    )
    return fix(
        "Keep the DataLoader's worker processes alive between epochs "
        f"(persistent_workers=True): they start once, not every {every} steps." + init,
        "phase.keep_workers",
        site=site,
        period=every,
        workers=phase.workers,
        ms=round(phase.ms_each),
        share=round(share),
    )


def finding(phase: PhaseSeen, share: float, measured_steps: int) -> Finding:
    """The finding for one kind of phase taking ``share`` % of the run."""
    every = phase.period or max(1, round(measured_steps / max(1, len(phase.ms))))
    return Finding(
        id=FINDING_IDS[phase.kind],
        severity=_severity(share),
        title=_title(phase, share),
        evidence=_evidence(phase, share),
        impact=_impact(share, phase.period, phase.kind),
        fix=_fix(phase, share, every),
    )


def findings(phases: list[PhaseSeen], whole_ms: float, measured_steps: int) -> list[Finding]:
    """A finding per kind of phase the measured steps held; ``whole_ms`` is the long-run step,
    phases included."""
    if whole_ms <= 0:
        return []
    return [
        finding(p, 100.0 * per_step_ms(p, measured_steps) / whole_ms, measured_steps)
        for p in phases
        if p.ms
    ]


def summary(phases: list[PhaseSeen], share: float, busy: str) -> str:
    """The verdict's sentence when the phases take the most time."""
    top = max(phases, key=lambda p: sum(p.ms))
    what = {EVALUATION: "evaluation", CHECKPOINT: "checkpoint saving"}.get(
        top.kind, "the DataLoader's workers starting anew"
    )
    p = top.period
    often = f" every {p} steps" if p else ""
    start = _start(top)
    at = f" ({_where(start)})" if start is not None else ""
    return (
        f"Between steps: {what}{often}{at} takes {share:.0f}% of the run, "
        f"{format_ms(top.ms_each)} each; {busy}."
    )
