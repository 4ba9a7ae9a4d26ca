"""What a re-run what-if measured: each run's result (its report, its rate of items) and the
whole outcome (the baseline, the controls, every arm) that ``results.apply`` turns into rows."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from ..knobs import run_items
from ..knobs.gain_rule import mean_noise_pct
from ..knobs.loader import keeps_workers, workers_of
from ..watch.shape_costs import MIN_SEEN_STEPS, costly_new_shapes
from .plan import Arm

RARE_SHAPES = 0.05
"""Steps at a new batch shape are set apart where they are at most this share of the measured
steps (one at least), or where they cost several times the others (``watch/shape_costs.py``)."""


@dataclass
class RunResult:
    label: str
    changes: dict[str, Any]
    ok: bool
    wall_s: float
    report: dict[str, Any] | None = None
    facts: dict[str, Any] | None = None
    error: str | None = None
    items_override: int | None = None
    """Items per step as the change makes them, where that needs the baseline's count
    (``Knob.items``; the driver sets it)."""

    @property
    def run(self) -> dict[str, Any]:
        return (self.report or {}).get("run") or {}

    @property
    def step_ms(self) -> float | None:
        """The measured mean step (``drained_mean_ms`` where the run drained the GPU), plus the
        loader's epoch start spread over the epoch."""
        v = self.run.get("step_time_ms")
        if not v:
            return None
        drained = self.drained_mean_ms
        if drained is None and self.one_off_steps and self.steady_times_ms:
            drained = statistics.fmean(self.steady_times_ms)
        return (drained if drained is not None else float(v)) + self.epoch_share_ms

    @property
    def recompiled(self) -> list[int]:
        """The measured steps in which torch.compile compiled anew (``StepRecord.compiled``)."""
        return [int(i) for i in (self.facts or {}).get("recompiled_steps") or []]

    @property
    def new_shapes(self) -> list[int]:
        """The measured steps whose batch had a shape new to the run, where such steps are
        rare (``RARE_SHAPES``: an epoch's short last batch, whose shape cuDNN autotunes once)
        or cost several times the others (``shapes_cost_once``). Otherwise a loader of many
        shapes pays for each new one as it comes, as its other steps do: nothing is set
        apart."""
        xs = [int(i) for i in (self.facts or {}).get("new_shape_steps") or []]
        return xs if len(xs) <= max(1, RARE_SHAPES * self.steps) or self.shapes_cost_once else []

    @property
    def shapes_cost_once(self) -> bool:
        """The steps at a new batch shape took, by their median, several times those at a
        shape seen before (``watch.shape_costs.costly_new_shapes``)."""
        marked = {int(i) for i in (self.facts or {}).get("new_shape_steps") or []}
        times = [float(x) for x in self.run.get("step_times_ms") or []]
        return costly_new_shapes(times, marked) is not None

    @property
    def shapes_unsettled(self) -> int | None:
        """Where more than a few measured steps took a batch of a shape new to the run and
        fewer than ``MIN_SEEN_STEPS`` a shape seen before, so a cost paid once per shape cannot
        be told from the step's own: the count of new-shape steps, else None. bf16 BERT at
        batch 16 ran 9 steps at 896 ms against fp32's 99 on an H100 (``h100-run36``); padded
        to five lengths it steps 2.7x faster than fp32 (``h100-run35``)."""
        xs = {int(i) for i in (self.facts or {}).get("new_shape_steps") or []}
        n = self.steps
        if len(xs) > max(1, RARE_SHAPES * n) and n - len(xs) < MIN_SEEN_STEPS:
            return len(xs)
        return None

    @property
    def one_off_steps(self) -> list[int]:
        return sorted(set(self.recompiled) | set(self.new_shapes))

    @property
    def steady_times_ms(self) -> list[float]:
        """The measured steps' times, each that compiled anew or took a rare new shape at the
        others' median: compiling or autotuning for a shape is paid once per shape, not every
        step. At batch 1024 the MNIST script's short last batch came every 59 steps: the
        recompile it set off inside the measured steps read a compiled combined run 0.44x
        (``h100-run33``), cuDNN's autotuning of it a run with ``cudnn.benchmark`` 0.74x
        (``h100-run34``)."""
        xs = [float(x) for x in self.run.get("step_times_ms") or []]
        marked = set(self.one_off_steps)
        rest = [x for i, x in enumerate(xs) if i not in marked]
        if not marked or not rest:
            return xs
        usual = statistics.median(rest)
        return [usual if i in marked else x for i, x in enumerate(xs)]

    @property
    def drained_mean_ms(self) -> float | None:
        """Every measured step's time and the GPU work still queued after the last, over the
        steps: the window from an empty launch queue to a drained GPU. A GPU-bound step's host
        timestamps run ahead of it by the queue's depth (the first steps short, the last ones
        ended before the GPU finished them): on the H200 an LSTM language model at batch 1280
        read a 20.9x batch gain from its steady steps, 18.5x drained, 17.2x by its own clock
        (benchmarks/results/h200-run19, h200-run20)."""
        drain, xs = self.run.get("end_drain_ms"), self.steady_times_ms
        if drain is None or not xs or len(xs) != self.steps:
            return None
        return (sum(xs) + float(drain)) / len(xs)

    @property
    def epoch_share_ms(self) -> float:
        """Each epoch starts the loader's workers and waits for their first batch; the measured
        steps come after that (warm-up). Spread over the epoch's batches, it is what every step
        pays: 112 workers whose measured steps ran 3x faster than 28 made a one-epoch notebook
        cell slower (the H200, ``benchmarks/whatifs/cell.py``). Workers that persist start
        once, not per epoch: nothing is spread then."""
        ld = (self.facts or {}).get("loader") or {}
        start, per_epoch = ld.get("epoch_start_ms"), ld.get("batches_per_epoch")
        if not start or not per_epoch or keeps_workers(self.facts):
            return 0.0
        if any(p.get("kind") == "epoch_start" for p in self.run.get("phases") or []):
            return 0.0  # short epochs: the measured window paid its epoch starts already
        # A step's usual wait for its batch is in the mean step already.
        usual = float((self.run.get("breakdown_ms") or {}).get("data_wait") or 0.0)
        return max(0.0, float(start) - usual) / int(per_epoch)

    @property
    def items(self) -> int | None:
        """Items per step: the watch's count, or as the change makes them (``Knob.items``)."""
        if self.items_override:
            return self.items_override
        v = self.run.get("items_per_step")
        return run_items(self.changes, int(v), None) if v else None

    @property
    def steps(self) -> int:
        return int(self.run.get("steps") or 0)

    def ms_per(self, items: int | None) -> float | None:
        """The step's time per ``items`` items (the baseline's batch: a larger batch's step
        counts for its share of it)."""
        if not self.step_ms:
            return None
        if self.items and items:
            return self.step_ms * items / self.items
        return self.step_ms

    def items_per_s(self, fallback_items: int | None) -> float | None:
        items = self.items or fallback_items
        if not self.step_ms or not items:
            return None
        return items / self.step_ms * 1000.0

    def noise_pct(self) -> float:
        """The band of the run's mean step (``gain_rule.mean_noise_pct``), by batch means: the
        steps in up to 8 blocks, each a whole number of stall periods, of a phase's or of
        rounds of the loader's workers (a bursty loader's steps are not independent: one block
        of 4 holds its stall, one step does or does not; an epoch start every 10 steps is in
        every block of 10; 14 workers deliver 14 batches, then wait). 0 with fewer than 3
        blocks."""
        xs = self.steady_times_ms
        phases = [int(p.get("period_steps") or 1) for p in self.run.get("phases") or []]
        workers = workers_of(self.facts)
        stall = int((self.run.get("stall") or {}).get("period_steps") or 1)
        period = max(stall, workers, *phases)
        blen = max(period, (len(xs) // 8) // period * period)
        blocks = [xs[i : i + blen] for i in range(0, len(xs) - blen + 1, blen)]
        return mean_noise_pct([statistics.fmean(b) for b in blocks])


@dataclass
class Outcome:
    baseline: RunResult
    control: RunResult | None
    arms: list[tuple[Arm, RunResult | None]] = field(default_factory=list)
    together: tuple[list[Arm], RunResult | None] | None = None
    noise_pct: float = 0.0
    """The unchanged script's noise band: its control's blocks of steps, its control runs."""
    budget_s: float = 0.0
    spent_s: float = 0.0
    interrupted: bool = False
    controls: list[RunResult] = field(default_factory=list)
    """Control runs after the first: the reference is the median of all of them."""
    noise_note: str = "within-run"
    runs: int = 0
    """Re-runs made (the baseline and the controls included)."""
    plan: list[str] = field(default_factory=list)
    """The planned groups in the order they run, each with its arms: said before the first."""
    stacked_on: dict[int, RunResult] = field(default_factory=dict)
    """For an arm run on top of the winning batch (its index in ``arms``): the batch winner's
    run, which its gain is over."""
    not_planned: dict[str, str] = field(default_factory=dict)
    """The changes asked for by name (``--try``) that this run gave nothing to try: why."""
    left_out: list[Arm] = field(default_factory=list)
    """Winners the combined run leaves out, its forecast with them over the budget."""
    together_from: str | None = None
    """The run the winners' combined row reuses, where one already ran exactly their changes
    (the batch winner and one arm on top of it)."""

    @property
    def reference(self) -> RunResult:
        """The unchanged script's run the changes are compared with: the control, or the
        baseline where the control failed."""
        return self.control if self.control is not None and self.control.ok else self.baseline

    def reference_ms(self, items: int | None) -> float | None:
        """The unchanged script's step per ``items`` items: the reference's, or the median of
        the control runs' where the control ran again (one slow phase of the host does not
        move it). The driver judges gains by it and the rows report it."""
        ref = self.reference
        first = ref.ms_per(items)
        if not first or ref is not self.control or not self.controls:
            return first
        more = [c.ms_per(items) for c in self.controls]
        return statistics.median([first, *(m for m in more if m)])

    def row_noise(self, res: RunResult | None, under: RunResult | None = None) -> float:
        """A changed run's noise band: the wider of the unchanged script's and the run's own
        (and that of the winner it ran on top of). One bursty loader arm (+-27 % on the H100's
        tv_transforms_loader) no longer widens every other row's band, nor hides the groups
        planned after it."""
        own = [r.noise_pct() for r in (res, under) if r is not None and r.ok]
        return max([self.noise_pct, *own])
