"""Where one step ends and the next begins, and what happens between steps until it is all
settled: the warm-up's extensions, the switch to hooks on the outermost modules, the profiler
window, the sync-debug mode."""

from __future__ import annotations

import os
from time import perf_counter_ns

from .call_cycle import Cycle
from .compiled_models import _compiled_graphs
from .detail import DetailPlan
from .module_hooks import _DRIVE_PAST_FORWARD
from .profiler_window import CUPTI_TEARDOWN, ProfilerWindow
from .recorder import Intervals, StepRecord, StepRecorder
from .watch_state import WatchState

LONG_STEP_NS = 1_000_000_000
WINDOW_MODULE_CALLS = 2000
"""Module calls the profiler window (its start-up step and the profiled ones) may hold before
it profiles fewer steps: a trace grows with the calls' ops, and 3 steps of 730 calls (a
ConvNeXt-like stack, 8 micro-batches) made 35 MB of JSON that took 1.8 s to load on this
project's 2-core CPU."""
SETTLED_RATIO = 1.25


class StepBoundaries(WatchState):
    """A step's end (``_boundary``) and the work between steps (``_between_steps``)."""

    def _boundary(self, kind: str, t: int) -> bool:
        """A step of ``kind`` may have ended at ``t``; True when it did.

        Then the hook's own work from ``t`` on counts as the next step's overhead (the step just
        ended at ``t``), so the hook need not read the clock again.
        """
        rec = self._rec
        if rec is None:
            return False
        if self.flops.counting:
            return self._end_flop_step(kind, rec)
        if self.lines.tracing:
            if not self.lines_early:
                return self._end_line_step(kind, rec)
            if kind == rec.kind:
                self.lines.step_ended()  # a step timed by line, recorded as any other
        if self._in_run:
            self._close_run()
        plan = self.detail
        # Nearly every step: a measured one of the driving kind, once nothing is left to switch
        # (no merge can follow, every later step is measured), in fewer calls.
        steady = rec.end_steady(t) if self._settled and kind == rec.kind else None
        if steady is not None:
            plan.step_ended(steady)
            transition = False
        else:
            merges = rec.merges
            if not rec.boundary(kind, t):
                return False
            if rec.merges != merges:
                self._window_after_merge(rec)
            if rec.measured < plan.measured:
                # A step kind of higher priority appeared: the steps so far became one.
                plan = self.detail = DetailPlan()
            plan.step_ended(rec.records[-1])
            # Profiler start/stop and the hook switch happen between steps, outside both of
            # them; only the ordinary bookkeeping counts as the next step's overhead.
            transition = False if self._settled else self._between_steps(rec)
        self._compiled_in(steady if steady is not None else rec.records[-1])
        if kind == "optimizer":
            self._fwd_depth = 0
        detail, pick = plan.next_step()
        if detail is not self._detail:
            self._set_detail(detail)
        full = (
            pick
            if plan.full_every > 1
            and (rec.kind in _DRIVE_PAST_FORWARD or not self._top_nested)
            and self._light_allowed()
            else True
        )
        if full is not self._full:
            self._set_full(full)
        now = perf_counter_ns()
        if steady is not None:  # the hot path: every later step is a measured one
            nxt = rec.begin_measured(now)
        else:
            nxt = rec.begin_next(now)
            if nxt.phase == "lines" and not self.lines.tracing:
                self._begin_early_lines(rec, nxt)
        nxt.detail = detail
        nxt.full = full
        if not transition:
            nxt.overhead_ns += nxt.start_ns - t
        if rec.done():
            self._measuring_done()
        elif steady is not None and not full and kind == "optimizer":
            # The steps to the next full one end in a run: ``_opt_post``'s short way.
            self._run_left = self._run_length(rec)
            self._in_run = self._run_left > 0
        return True

    def _compiled_in(self, ended: StepRecord) -> None:
        """Mark a measured step in which torch.compile compiled anew (the last short batch of
        an epoch, a new shape): its time is mostly compiling, paid once per shape."""
        graphs = _compiled_graphs()
        if graphs != self._graphs_seen:
            self._graphs_seen = graphs
            ended.compiled = ended.phase == "measure"

    def _begin_early_lines(self, rec: StepRecorder, nxt: StepRecord) -> None:
        """The first step timed by line before the measured ones; where the clock cannot run
        (another tracer), the steps are measured ones instead."""
        self.lines_early = self.lines.begin()
        if not self.lines_early:
            rec.line_steps = 0
            nxt.phase = "measure"

    def _between_steps(self, rec: StepRecorder) -> bool:
        """Warm-up extension, profiler window, hook switch, sync-debug mode; True on a switch.

        Once all of that is behind us (``_settled``), steps skip this altogether.
        """
        n = rec.completed
        transition = False
        if not self._switched and self._cycle is None:
            if rec.kind != "forward":
                # A backward or an optimizer step ends the steps: model calls never do.
                self._cycle, self._calls = Cycle(1, None), []
                rec.warmup -= self._cycle_extra
                self._cycle_extra = 0
            elif n >= max(1, rec.warmup) and len(set(self._calls)) > 1:
                # The loop calls several models, and which call ends a round of them is not
                # known yet: one more warm-up step (a call, until then), at most
                # ``2 * MAX_PERIOD`` calls in all.
                rec.warmup = n + 1
                self._cycle_extra += 1
        if not self._switched and n >= max(1, rec.warmup):
            self._switch_hooks()
            transition = True
            if n == rec.warmup and _compiled_graphs() != self._graphs_at_start:
                # Compiled code ran in the warm-up, and torch.compile guards on the global
                # module hooks that just came off: it compiles again in the next step, one more
                # warm-up step rather than a measured or profiled one.
                rec.warmup = n + 1
        if (
            rec.profiling
            and self._window is None
            and n == rec.warmup
            and n > 0
            and self._extra_warmup < max(3, self.warmup)
            and self._cuda
            and not warmup_settled([r.duration_ns for r in rec.records])
        ):
            # The GPU runs behind the host until the launch queue fills: profile steady steps.
            rec.warmup += 1
            self._extra_warmup += 1
        if rec.profiling and self._window is None and n >= rec.warmup:
            self._start_window()
            transition = True
        elif (
            self._window is not None
            and rec.recording_window
            and not self._window.recording
            and n >= rec.warmup + 1
        ):
            self._start_window(record=True)  # the start-up step is behind: keep what follows
            transition = True
        elif (
            self._window is not None
            and rec.recording_window
            and n >= rec.warmup + 1 + rec.profile_steps
        ):
            self._stop_window()
            transition = True
        if not self._measure_drained and rec.phase_of(n + 1) == "measure":
            self._drain_before_measure()
            transition = True
        self._maybe_enable_sync_mode()
        self._settled = (
            self._switched
            and self._measure_drained
            and (self._sync_mode_set or not self._cuda)
            and (not rec.profiling or (self._window is not None and not rec.recording_window))
        )
        return transition

    def _window_after_merge(self, rec: StepRecorder) -> None:
        """The steps so far became one (an optimizer's first step after many backward calls, as
        in gradient accumulation): a profiler window that already ended covered steps that no
        longer exist, and the profiled steps to come would lie outside it. A new window runs
        over the new steps."""
        window = self._window
        if window is None or rec.recording_window:
            return  # none yet, or still recording: it goes on over the new steps
        window.restore_env()
        self._window = None
        rec.window = Intervals()  # the old window's host intervals belong to its trace
        self._settled = False
        self.notes.append(
            f"the first {rec.kind} step came after the profiler window had ended (the calls "
            "before it had been taken for steps): the window ran again over the new steps"
        )

    def _start_window(self, record: bool = False) -> None:
        t0 = perf_counter_ns()
        # The profiler's own work (a device sync when it starts or stops) is not the user's:
        # every hook passes it through.
        tid, self._tid = self._tid, None
        try:
            if record and self._window is not None:
                self._window.record()
            else:
                self._start_window_now()
        finally:
            self._tid = tid
            self.window_start_ms += (perf_counter_ns() - t0) / 1e6

    def _start_window_now(self) -> None:
        rec = self._rec
        assert rec is not None
        # The run may have set TF32 and friends after the watch began: read them now.
        self._flags_window = self._flags_now()
        # Long steps make long traces: profile one step (after the start-up one) when the
        # warm-up steps after the first (which pays one-off imports and autotuning) took over
        # a second each.
        warm = [r.duration_ns for r in rec.records if r.phase == "warmup"][1:]
        if warm and min(warm) > LONG_STEP_NS:
            rec.profile_steps = 1
        # Steps of many module calls (a deep model, micro-batches) make large traces too.
        nested, outer = self._module_calls
        last = rec.records[-1].forwards if rec.records else 0
        if outer and last:
            per_step = last * (nested + outer) / outer
            fit = max(1, int(WINDOW_MODULE_CALLS // per_step) - 1)
            rec.profile_steps = min(rec.profile_steps, fit)
        self._window = ProfilerWindow(cuda=self._cuda)
        if self._window.start():
            rec.recording_window = True
            if self._window.cupti_left_on:
                self.notes.append(
                    f"{CUPTI_TEARDOWN}={os.environ.get(CUPTI_TEARDOWN)} is set: torch's profiler "
                    "leaves CUPTI's callbacks on after its window, and every later kernel launch "
                    "pays for them (a launch-bound step ran 32 % slower on an H200), so the steps "
                    f"measured after the window are slower than unwatched; unset {CUPTI_TEARDOWN} "
                    "to measure without"
                )
        else:
            if self._window.error:
                self.notes.append(self._window.error)
            # No window: the remaining steps are all measured.
            rec.profile_steps = 0
            rec.recording_window = False

    def _stop_window(self) -> None:
        assert self._rec is not None and self._window is not None
        t0 = perf_counter_ns()
        tid, self._tid = self._tid, None  # as in _start_window: not the user's syncs
        try:
            self._window.stop()
        finally:
            self._tid = tid
        self.window_stop_ms += (perf_counter_ns() - t0) / 1e6
        self._rec.recording_window = False

    def _end_window(self) -> None:
        if self._window is not None:
            self._window.stop()
            self._window.restore_env()


def warmup_settled(durations_ns: list[int]) -> bool:
    """Has the step time settled? The last two steps within 25 % of each other.

    The first step (one-off start-up) never counts. Asynchronous devices make early steps look
    short while the host fills the launch queue, then step times jump to the device's pace;
    the profiler window should see the steps after that jump.
    """
    d = durations_ns[1:]
    if len(d) < 2:
        return True
    a, b = d[-2], d[-1]
    if a <= 0 or b <= 0:
        return True
    return max(a, b) <= SETTLED_RATIO * min(a, b)
