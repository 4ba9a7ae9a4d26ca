"""How the measured steps end: the GPU's launch queue drained at their start and end, the step
whose FLOPs are counted after them, then the watched code stopped or left to run unwatched."""

from __future__ import annotations

from time import perf_counter_ns

from .compiled_models import _compiled_graphs
from .flop_step import flops_blocked
from .recorder import StepRecorder
from .watch_state import WatchState


class StopWatch(BaseException):
    """Raised from a step hook after the requested steps; the watch catches it.

    A BaseException so that the user's ``except Exception`` does not swallow it.
    """


class MeasuringEnd(WatchState):
    """The drains around the measured steps, the FLOP-counted step, the measuring's end."""

    def _gpu_queue_drain_ms(self) -> float | None:
        """Wait for the GPU's queued work (ms), where this process uses CUDA."""
        torch = self._torch
        if not self._cuda or torch is None or not torch.cuda.is_initialized():
            return None
        tid, self._tid = self._tid, None  # not one of the user's syncs
        t0 = perf_counter_ns()
        try:
            torch.cuda.synchronize()
        finally:
            self._tid = tid
        return (perf_counter_ns() - t0) / 1e6

    def _drain_before_measure(self) -> None:
        """The measured steps start with an empty launch queue, between steps (outside both),
        so that the drain at their end (``end_drain_ms``) holds their own GPU work only."""
        self._measure_drained = True
        self._gpu_queue_drain_ms()

    def _measuring_done(self) -> None:
        rec = self._rec
        assert rec is not None
        if self._measure_drained:
            # Now, at the last measured step's end: the counted step after it runs slowly on
            # the host and lets the GPU's queue run dry (8 % of a GPU-bound step lost on an H200).
            self.end_drain_ms = self._gpu_queue_drain_ms()
        # The FLOP count first (one step), then the line clock (two): a short loop that ends
        # on the way cuts the line clock short, not the count.
        if self._begin_flop_step(rec) or self._begin_line_steps():
            return
        self._finish_measuring(rec)

    def _begin_line_steps(self) -> bool:
        """Time the next steps by line of the user's code (``host_lines.py``); False: none.

        Only where steps end at step boundaries (a block without steps has no boundary to end
        the clock on: its trace would stay on)."""
        rec = self._rec
        if rec is None or rec.kind is None or not self.lines.begin():
            return False
        self._unmeasured_step()
        return True

    def _end_line_step(self, kind: str, rec: StepRecorder) -> bool:
        """A step boundary while the line clock runs: a step of the driving kind counts."""
        if kind != rec.kind:
            return False
        self.lines.step_ended()
        if not self.lines.tracing:
            self._finish_measuring(rec)
        return False

    def _begin_flop_step(self, rec: StepRecorder) -> bool:
        """Count the next step's FLOPs (the hooks stay on until it ends); False: no count."""
        fs = self.flops
        if not fs.enabled or fs.result is not None:
            return False
        why = flops_blocked(self._top_modules.values(), _compiled_graphs() > self._graphs_at_start)
        if not fs.begin(self._torch, self._flags_now(), rec.current.index, why):
            return False
        self._unmeasured_step()
        return True

    def _unmeasured_step(self) -> None:
        """The hooks for a step after the measured ones (counted, timed by line): every step's
        boundary seen; its copies and syncs are not the report's steps': they pass through."""
        self._in_run, self._run_left = False, 0
        self._unrecorded = True
        if not self._full:
            self._set_full(True)
        if self._detail:
            self._set_detail(False)

    def _end_flop_step(self, kind: str, rec: StepRecorder) -> bool:
        """A step boundary while counting: a step of the driving kind ends the count."""
        if kind != rec.kind:
            return False
        cur = rec.current

        def again() -> bool:
            cur.phase_ns = 0
            return self.flops.begin(self._torch, self._flags_now(), cur.index, None)

        self.flops.end(cur.phase_ns > 0, again)
        if not self.flops.counting and not self._begin_line_steps():
            self._finish_measuring(rec)
        return False

    def _finish_measuring(self, rec: StepRecorder) -> None:
        self._done = True
        self._tid = None  # every hook passes straight through from here on
        if self.stop_after_steps:
            raise StopWatch(f"gpusight: {rec.measured} steps measured")
        # The run goes on unwatched: nothing of ours left on its path (the rest is undone
        # when the watch stops).
        self._unhook_top_modules()
        self._restore_sync_mode()
