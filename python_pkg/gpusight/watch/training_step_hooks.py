"""The hooks that end a training step: optimizer steps (global pre/post hooks, also where several
optimizers step, or one steps inside another) and, where no optimizer steps, ``backward``."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from threading import get_ident
from time import perf_counter_ns
from typing import Any

from .closure_timing import own_spans, timed_closure
from .optimizers_seen import OptimizerSeen, describe
from .watch_state import WatchState, never_compiling

MAX_OPT_DEPTH = 64
"""Frames looked up from an optimizer step for the steps it runs inside."""

_is_compiling: Callable[[], bool] = never_compiling
"""``watch_state._is_compiling``, as this module's own global (``session._use_is_compiling``)."""


class TrainingStepHooks(WatchState):
    """Optimizer step hooks and the ``backward`` wrapper."""

    def _opt_pre(self, opt: Any, args: Any, kwargs: Any) -> tuple[Any, Any] | None:
        if _is_compiling() or get_ident() != self._tid:
            return None
        phases = self.phases
        phases.steps += 1
        if phases.tracker.active is not None:
            phases.training_resumes()
        open_ = self._opt_open
        key = id(opt)
        if key not in self.collected.optimizers:
            self._see_optimizer(opt, key)
        frame = sys._getframe(1)  # torch's wrapper of this step
        if open_:
            self._prune_open(frame)
        open_.append(key)
        self._opt_frames.append(frame)
        if not self._full or len(open_) > 1:
            return None
        if self._opt_clock is None:
            self._clock.start(opt)
            self._opt_clock = key
        if key == self._opt_clock or self._clock.same(opt):
            self._closure_spans = []
            timed = timed_closure(args, kwargs, self._closure_spans)
            self._opt_t0 = perf_counter_ns()
            return timed
        return None

    def _opt_post(self, opt: Any, args: Any, kwargs: Any) -> None:
        t = perf_counter_ns()
        rec = self._rec
        if _is_compiling() or get_ident() != self._tid or rec is None:
            return
        key = id(opt)
        open_ = self._opt_open
        if open_ and open_[-1] == key:
            open_.pop()
            self._opt_frames.pop()
        elif key in open_:
            i = len(open_) - 1 - open_[::-1].index(key)
            del open_[i:], self._opt_frames[i:]
        if open_:
            # Inside another optimizer's step (Lookahead's, SAM's base optimizer): that
            # one's end is the step's.
            return
        if key != self._opt_clock:
            if self._clock.same(opt):
                # A new optimizer over the same parameters (one made every step, for a
                # hand-written schedule): the same clock.
                self._opt_clock = key
            elif not self._other_optimizer(opt):
                return
        cur = rec.current
        if self._run_left:
            # A light step that the plan knows is light, in a run: its end and its loader's
            # wait into the run's lists (``_start_run`` says why), unless it recorded more.
            if not (
                cur.syncs or cur.copy_ns or cur.detail_ns or cur.epoch or cur.phase_ns
                or cur.new_shape
            ):  # fmt: skip
                self._run_left -= 1
                self._run.append(t)
                self._run_data.append(cur.data_ns)
                cur.data_ns = 0
                return
            self._close_run()
            cur = rec.current
        if self._opt_t0:
            # The closure's forward and backward are timed by their own hooks; the rest of it
            # (a training_step's own lines) is the user's work, not the optimizer's.
            own = own_spans(self._opt_t0, t, self._closure_spans)
            cur.framework_ns += sum(b - a for a, b in own)
            cur.optimizer_ns += sum(b - a for a, b in own)
            if rec.recording_window:
                rec.window.framework.extend(own)
                rec.window.framework_phases.extend(["optimizer"] * len(own))
            self._opt_t0 = 0
            self._closure_spans = []
        if not self._boundary("optimizer", t):
            cur.overhead_ns += perf_counter_ns() - t

    def _see_optimizer(self, opt: Any, key: int) -> None:
        """An optimizer's first step: what it is and how it updates, once."""
        t = perf_counter_ns()
        try:
            seen = describe(opt)
        except Exception:  # what an optimizer is, for a fix: never the user's problem
            # Kept as unknown, so that its later steps do not ask again.
            seen = OptimizerSeen(type(opt).__name__, 0, None, None, False)
        seen.site = self.collected.optimizer_sites.get(key)
        self.collected.optimizers[key] = seen
        rec = self._rec
        if rec is not None:
            rec.current.overhead_ns += perf_counter_ns() - t

    def _prune_open(self, frame: Any) -> None:
        """Another optimizer step begins while some are open: keep those still running below
        ``frame`` (this one is inside them: Lookahead's base optimizer, or a subclass's
        ``super().step()`` that torch hooks twice), drop the rest (a step that raised before its
        post-hook ran, the script having caught it)."""
        running = set()
        f = frame.f_back
        for _ in range(MAX_OPT_DEPTH):
            if f is None:
                break
            running.add(id(f))
            f = f.f_back
        frames = self._opt_frames
        for i, f in enumerate(frames):
            if id(f) not in running:
                del self._opt_open[i:], frames[i:]
                return

    def _other_optimizer(self, opt: Any) -> bool:
        """An optimizer other than the clock's stepped: True when its steps end the step from
        now on (the clock's has stopped stepping: ``optimizer_clock.py``)."""
        rec = self._rec
        assert rec is not None
        if self._opt_clock is None:
            # The first optimizer step came on a light step, which skips the pre-hook.
            self._clock.start(opt)
            self._opt_clock = id(opt)
            return True
        # The clock's steps so far: a count that a merge of the first steps leaves alone.
        steps = rec.kind_counts["optimizer"] + len(self._run)
        handover = self._clock.other_stepped(opt, steps, perf_counter_ns())
        if handover is None:
            return False
        if self._in_run:
            self._close_run()
        self._opt_clock = self._clock.key
        self._opt_t0 = 0
        cur = rec.current
        ends = [e for e in handover.ends if e > cur.start_ns]
        if ends and cur.phase == "measure" and rec.kind == "optimizer":
            # The new clock's steps since the old one's last end steps of their own, rather
            # than one step as long as all of them; their loader waits shared evenly.
            n = len(ends)
            share = cur.data_ns // (n + 1)
            cur.data_ns -= share * n
            rec.close_run(ends, [share] * n, 0)
            self.detail.measured += n
            if cur.detail:
                self.detail.detailed += n
        if handover.why == "replaced":
            why = "a new optimizer over some of the same parameters"
        else:
            why = "another optimizer, over other parameters, stepping on its own"
        self.notes.append(
            f"the optimizer whose step ended each step ({handover.old}) stopped stepping after "
            f"step {handover.after}, and {why} ({handover.new}) went on: its steps end them "
            "from there on"
        )
        return True

    def optimizer_notes(self) -> list[str]:
        """How the optimizers' rates compare, where more than one stepped at different rates."""
        return self._clock.rate_notes()

    def _wrap_backward(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        w = self

        @functools.wraps(orig)
        def backward(*args: Any, **kwargs: Any) -> Any:
            rec = w._rec
            if _is_compiling() or w._bwd_depth or get_ident() != w._tid or rec is None:
                return orig(*args, **kwargs)
            if rec.kind != "optimizer":
                w.phases.steps += 1
            if w.phases.tracker.active is not None:
                w.phases.training_resumes()
            if not w._full and rec.kind == "optimizer":
                # A light step: an optimizer ends it, and its backward is not timed.
                rec.current.overhead_ns += w.calibration.wrapper_ns
                return orig(*args, **kwargs)
            w._bwd_depth += 1
            t0 = perf_counter_ns()
            try:
                out = orig(*args, **kwargs)
            finally:
                w._bwd_depth -= 1
            t1 = perf_counter_ns()
            cur = rec.current
            if w._full:
                cur.framework_ns += t1 - t0
            if rec.recording_window:
                rec.window.framework.append((t0, t1))
                rec.window.framework_phases.append("backward")
            cur.overhead_ns += w.calibration.wrapper_ns
            if rec.kind == "optimizer" or not w._boundary("backward", t1):
                cur.overhead_ns += perf_counter_ns() - t1
            return out

        return backward
