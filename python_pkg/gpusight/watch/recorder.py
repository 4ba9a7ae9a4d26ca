"""Step bookkeeping: which step we are in, its phase, and what the hooks measured in it. No torch.

Steps are found three ways, in priority order: an optimizer step ends a training step; without
an optimizer, a backward call does; without either (inference), a call of the outermost module
does. The recorder counts each kind; the highest-priority kind seen so far drives the steps.
When a higher kind first appears (the first ``optimizer.step()`` after a backward), what was
counted so far merges into one first step, so no time is lost or counted twice.

Phases: ``warmup`` steps (not measured), then, when profiling, one ``profile_warmup`` step
(the profiler's own start-up lands there) and ``profile_steps`` analysed ``profile`` steps,
then ``measure`` steps: clean, with only the cheap hooks running.

``boundary`` and ``begin_next`` run at every step end, inside the watch's own measured overhead:
they do a few comparisons and build one slotted record.
"""

from __future__ import annotations

from dataclasses import dataclass, field

KINDS = ("optimizer", "backward", "forward")
MAX_STEPS_FACTOR = 8
WINDOW_STEPS_FACTOR = 50
"""A window that must last ``min_window_ns`` ends at this many times the steps asked for: a
what-if re-run of 4 ms steps capped at 8x (160 steps, 0.7 s) saw none of a loader's stalls that
came once in 100 steps and took 21 % of the script's time (MNIST at batch 1024 on an H100,
``benchmarks/results/h100-run34``)."""
MIN_STEPS = 5
MAX_MEASURED = 20_000
"""Without ``steps``, the watch measures this many steps and lets the rest of the run go
unwatched: every measured step keeps its record (about 240 bytes), which on a long run of short
steps grew without bound (430 MB an hour at 2 ms a step), and so did the report's per-step
series."""
_PRIORITY = {k: i for i, k in enumerate(KINDS)}


@dataclass(slots=True)
class StepRecord:
    index: int
    phase: str
    start_ns: int
    end_ns: int = 0
    data_ns: int = 0
    copy_ns: int = 0
    framework_ns: int = 0
    overhead_ns: int = 0
    syncs: int = 0
    detail: bool = True
    """Whether this step recorded copies and syncs (``detail.py``)."""
    detail_ns: int = 0
    """Of ``overhead_ns``, what recording them cost."""
    full: bool = True
    """Whether this step ran the module hooks and timed its forward, backward and optimizer
    calls (``framework_ns``); see ``detail.py``."""
    epoch: bool = False
    """A new DataLoader iterator (an epoch, with fresh workers unless persistent) began here."""
    optimizer_ns: int = 0
    """Of ``framework_ns``, the host's time inside ``optimizer.step()`` (timed steps only)."""
    phase_ns: int = 0
    """Of the step's time, what evaluation and checkpoint saving between the training steps
    took (``phases.py``); what the hooks measured in them is not in the step's other figures."""
    compiled: bool = False
    """torch.compile compiled anew in this measured step (a new input shape, a recompile): a
    cost paid once per shape, not every step (``rerun/outcome.py`` sets it apart)."""
    new_shape: bool = False
    """The step's batch had a shape no batch had before in the run (an epoch's short last
    batch): cuDNN's autotuning and the allocator's growth for it are paid once per shape."""
    forwards: int = 0
    """Calls of the outermost modules in the step (full steps): with the modules a call runs
    (``WatchState._module_calls``), how large a profiled step's trace will be."""

    @property
    def duration_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)

    def absorb(self, other: StepRecord) -> None:
        self.data_ns += other.data_ns
        self.copy_ns += other.copy_ns
        self.framework_ns += other.framework_ns
        self.overhead_ns += other.overhead_ns
        self.syncs += other.syncs
        self.detail_ns += other.detail_ns
        self.full = self.full and other.full
        self.epoch = self.epoch or other.epoch
        self.phase_ns += other.phase_ns
        self.optimizer_ns += other.optimizer_ns
        self.new_shape = self.new_shape or other.new_shape
        self.forwards += other.forwards


@dataclass
class Intervals:
    """Host intervals kept only while the profiler window runs (perf_counter_ns)."""

    data_wait: list[tuple[int, int]] = field(default_factory=list)
    host_copies: list[tuple[int, int]] = field(default_factory=list)
    framework: list[tuple[int, int]] = field(default_factory=list)
    framework_phases: list[str] = field(default_factory=list)
    """``forward``, ``backward`` or ``optimizer`` for each of ``framework``, in its order."""
    syncs: list[tuple[int, str]] = field(default_factory=list)


class StepRecorder:
    def __init__(self, warmup: int, profile_steps: int, steps: int | None, start_ns: int) -> None:
        self.warmup = max(0, warmup)
        self.profile_steps = max(0, profile_steps)
        self.steps = steps
        self.line_steps = 0
        """Steps timed by line right after the profiled ones, not measured (a watch without
        ``steps``, whose measured steps may run to the code's end)."""
        self.kind: str | None = None
        self.kind_counts = dict.fromkeys(KINDS, 0)
        self.records: list[StepRecord] = []
        self.current = StepRecord(index=1, phase=self.phase_of(1), start_ns=start_ns)
        self.window = Intervals()
        self.recording_window = False
        self._measured = 0
        self._measured_ns = 0
        self.min_window_ns = 0
        """With ``steps``: go on measuring until the measured steps also take this long (at most
        ``WINDOW_STEPS_FACTOR`` times the steps asked for)."""
        self.max_window_ns = 0
        """With ``steps``: stop once the measured steps take this long (and ``MIN_STEPS`` are
        in), even short of ``steps``: slow steps do not stretch a what-if run without end."""
        self.phase_seen = False
        """An evaluation or a checkpoint ran between the training steps (``phases.py``)."""
        self.optimizer_built = False
        """An optimizer was built while the watch ran: its steps, once they come, end the steps
        (until then, with ``steps``, backward calls do not end the measuring: gradient
        accumulation calls backward many times before its first optimizer step)."""
        self.merges = 0
        """Times a higher-priority kind made the steps so far one (``_merge_into_first``)."""
        self.phase_measured = False
        """One ran within the measured steps: until then, with ``steps``, the measuring goes on
        (at most ``MAX_STEPS_FACTOR`` times the steps asked for) to cover one."""

    # -- phases -------------------------------------------------------------------------------
    @property
    def profiling(self) -> bool:
        return self.profile_steps > 0

    def phase_of(self, index: int) -> str:
        """Phase of the step with 1-based ``index``."""
        warmup = self.warmup
        if index <= warmup:
            return "warmup"
        profile = self.profile_steps
        if profile > 0 and index <= warmup + 1 + profile:
            return "profile_warmup" if index == warmup + 1 else "profile"
        before = warmup + (1 + profile if profile > 0 else 0)
        if index <= before + self.line_steps:
            return "lines"
        return "measure"

    @property
    def completed(self) -> int:
        return len(self.records)

    @property
    def measured(self) -> int:
        # Kept as a count: ``done()`` runs at every step boundary, so no scan of all steps.
        return self._measured

    def done(self) -> bool:
        """All requested measured steps are in (and, with ``min_window_ns``, enough time);
        without ``steps``, ``MAX_MEASURED`` of them."""
        steps = self.steps
        if steps is None:
            return self._measured >= MAX_MEASURED
        if self.max_window_ns and self._measured >= MIN_STEPS:
            if self._measured_ns >= self.max_window_ns:
                return True
        if self._measured < steps:
            return False
        if self._measured >= self.step_cap or self._waits_for_cap:
            return self._measured >= self.step_cap
        return self._measured_ns >= self.min_window_ns

    @property
    def _waits_for_cap(self) -> bool:
        """Past ``steps``, measuring goes on to ``step_cap`` whatever the window: a backward
        step that may yet reach an optimizer, a phase not yet measured."""
        return (self.kind == "backward" and self.optimizer_built) or (
            self.phase_seen and not self.phase_measured
        )

    @property
    def step_cap(self) -> int:
        """The measured steps at which measuring ends, whatever the window."""
        steps = self.steps
        if steps is None:
            return MAX_MEASURED
        if self._measured < steps:
            return steps
        return steps * (MAX_STEPS_FACTOR if self._waits_for_cap else WINDOW_STEPS_FACTOR)

    @property
    def capped(self) -> bool:
        """Measuring ended at ``MAX_MEASURED`` steps (no ``steps`` asked for)."""
        return self.steps is None and self._measured >= MAX_MEASURED

    # -- events -------------------------------------------------------------------------------
    def boundary(self, kind: str, now_ns: int) -> bool:
        """A step of ``kind`` ended at ``now_ns``. True when it ended a step of the driving kind."""
        self.kind_counts[kind] += 1
        if kind != self.kind:
            if self.kind is not None and _PRIORITY[kind] > _PRIORITY[self.kind]:
                return False
            if self.kind is not None:
                self._merge_into_first()
            self.kind = kind
        cur = self.current
        cur.end_ns = now_ns
        self.records.append(cur)
        if cur.phase == "measure":
            self._measured += 1
            self._measured_ns += now_ns - cur.start_ns
        return True

    def end_steady(self, end_ns: int) -> StepRecord | None:
        """``boundary`` for the steady state, in one call: the current step is a measured one of
        the driving kind (so every later step is measured too, and no merge can follow). Returns
        the ended step; None when the state is not steady (then ``boundary`` decides)."""
        cur = self.current
        if cur.phase != "measure":
            return None
        self.kind_counts[self.kind] += 1  # type: ignore[index]
        cur.end_ns = end_ns
        self.records.append(cur)
        self._measured += 1
        self._measured_ns += end_ns - cur.start_ns
        return cur

    def close_run(self, ends: list[int], datas: list[int], overhead_ns: int) -> None:
        """Light steps of the steady state that ended at ``ends`` in turn, the first of them the
        current step, recorded at once (``Watch._start_run``), each with its loader's wait from
        ``datas``; ``overhead_ns`` is the watch's cost over them, shared evenly with what the
        current step holds. The current step's other figures belong to the step under way after
        the last end (the run's steps held none of their own), which becomes the current step."""
        cur = self.current
        n = len(ends)
        share = (cur.overhead_ns + overhead_ns) // n
        held = (cur.data_ns, cur.copy_ns, cur.syncs, cur.detail_ns, cur.epoch, cur.phase_ns,
                cur.new_shape)  # fmt: skip
        cur.data_ns = cur.copy_ns = cur.syncs = cur.detail_ns = cur.phase_ns = 0
        cur.epoch = cur.new_shape = False
        detail, full = cur.detail, cur.full
        records = self.records
        start = cur.start_ns
        first = True
        for end, data in zip(ends, datas, strict=True):
            if first:
                r, first = cur, False
            else:
                r = StepRecord(len(records) + 1, "measure", start)
                r.detail, r.full = detail, full
            r.end_ns = end
            r.data_ns = data
            r.overhead_ns = share
            records.append(r)
            start = end
        self.kind_counts[self.kind] += n  # type: ignore[index]
        self._measured += n
        self._measured_ns += ends[-1] - cur.start_ns
        nxt = self.current = StepRecord(len(records) + 1, "measure", ends[-1])
        nxt.detail, nxt.full = detail, full
        (nxt.data_ns, nxt.copy_ns, nxt.syncs, nxt.detail_ns, nxt.epoch, nxt.phase_ns,
         nxt.new_shape) = held  # fmt: skip

    def begin_measured(self, now_ns: int) -> StepRecord:
        """``begin_next`` after ``end_steady``: the next step is measured."""
        self.current = cur = StepRecord(len(self.records) + 1, "measure", now_ns)
        return cur

    def _merge_into_first(self) -> None:
        """A higher-priority kind appeared: all steps so far become part of its first step."""
        if not self.records:
            return
        self.merges += 1
        first = self.records[0]
        for r in self.records[1:]:
            first.absorb(r)
        first.absorb(self.current)
        first.index = 1
        first.phase = self.phase_of(1)
        self.current = first
        self.records = []
        self._measured = 0
        self._measured_ns = 0

    def begin_next(self, now_ns: int) -> StepRecord:
        index = len(self.records) + 1
        # Positional: keyword arguments make this constructor several times slower.
        self.current = cur = StepRecord(index, self.phase_of(index), now_ns)
        return cur

    def finish(self, now_ns: int) -> None:
        """The watched code ended mid-step: keep the partial step only if nothing else exists."""
        if not self.records and self.current.start_ns < now_ns:
            self.current.end_ns = now_ns
            self.records.append(self.current)
            self._measured += self.current.phase == "measure"

    # -- selections ---------------------------------------------------------------------------
    def clean(self) -> tuple[list[StepRecord], str]:
        """The steps to report on, and which phase they came from."""
        for phase in ("measure", "profile", "profile_warmup", "warmup"):
            picked = [r for r in self.records if r.phase == phase]
            if picked:
                return picked, phase
        return [], "none"

    def analysed(self) -> list[StepRecord]:
        return [r for r in self.records if r.phase == "profile"]
