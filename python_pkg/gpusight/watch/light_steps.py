"""Light steps: steps that run without the module hooks and framework clocks (``detail.py``
picks them), ended from a call shim (``call_shim.py``) or a post-hook where a model call ends
the steps; runs of them whose ends a stand-in of the shim only appends to a list."""

from __future__ import annotations

from collections.abc import Callable
from threading import get_ident
from time import perf_counter_ns
from typing import Any

from . import call_shim
from .compiled_models import _compiled_graphs
from .recorder import StepRecorder
from .watch_state import WatchState, never_compiling

ATTR_CALL = call_shim.ATTR
MAX_RUN = 64
"""At most this many light steps end as one run (``Watch._start_run``): what reads the recorder
between the watch's own boundaries (a trainer callback's step count) lags by no more, and so
does the end of a measuring that waits for its window to be long enough (``min_window_s``)."""

_is_compiling: Callable[[], bool] = never_compiling
"""``watch_state._is_compiling``, as this module's own global (``session._use_is_compiling``)."""


class LightSteps(WatchState):
    """Switching steps between full and light, and the runs of light steps."""

    def _light_allowed(self) -> bool:
        """Light steps take the hooks off the model and put them back: not where compiled code
        may trace them and compile again at each change. Not on a model compiled in place
        (``model.compile()``: its compiled call runs its hooks), decided once; and not once
        torch.compile has compiled anything (a compiled step function that calls the model
        traces the model's hooks too) since the watch started, asked at each step (a counter's
        lookup)."""
        if self._light_ok is None:
            self._light_ok = all(
                getattr(m, "_compiled_call_impl", None) is None for m in self._top_modules.values()
            )
        if not self._light_ok:
            return False
        if _compiled_graphs() != self._graphs_at_start:
            self._light_ok = False
            if self._shims:  # the hooks back, which compiled code sees (and stand aside)
                self._hook_top_modules()
        return self._light_ok

    def _set_full(self, on: bool) -> None:
        """The next step runs the module hooks and times its framework calls, or not (a light
        step: the hooks come off the model, so torch's call takes its hook-free path; where a
        model call ends the step, a call shim or the post-hook still sees the call end, the
        step's boundary: ``_lighten_forward``)."""
        self._full = on
        forward = self._rec is not None and self._rec.kind == "forward"
        if on:
            if not forward:
                self._unhook_top_modules()  # a light step that a model call ended left some
            self._hook_top_modules(keep_shims=forward and bool(self._light_ok))
        elif forward:
            self._lighten_forward()
        else:
            self._unhook_top_modules()

    def _lighten_forward(self) -> None:
        """A light step that a model call ends: no pre-hook, and the step's end from a call
        shim where the module takes one (torch's hook path skipped), else from the post-hook.
        The shim stays for the full steps too (it runs the hooks' code then), so that going
        from light to full and back switches nothing on the model."""
        self._fwd_depth = 0
        self._fwd_top = None
        for module in self._hooked_modules():
            key = id(module)
            pre = self._pre_handles.pop(key, None)
            if pre is not None:
                pre.remove()
            if key in self._shims:
                continue
            shim = call_shim.install(module, self._shim_end, _is_compiling, before=self._shim_begin)
            if shim is not None:
                self._shims[key] = shim
                post = self._post_handles.pop(key, None)
                if post is not None:
                    post.remove()

    def _shim_begin(self, module: Any, args: Any) -> None:
        """A call shim's, before the call: on a full step, the pre-hook's work."""
        if self._full:
            self._fwd_pre(module, args, self.calibration.wrapper_ns)

    def _shim_end(self, module: Any) -> None:
        """A call shim's, after the call: on a full step, the post-hook's work; on a light one,
        the step's end (``_light_end``)."""
        if self._full:
            self._fwd_post(module, (), None)
            return
        if self._bwd_depth or get_ident() != self._tid:
            return
        self._light_end(module, perf_counter_ns(), self.calibration.wrapper_ns)

    def _light_end(self, module: Any, t: int, dispatch_ns: int) -> None:
        """A light step that a model call ends: no pre-hook ran, and hooked modules do not nest
        (``_top_nested``), so this is an outermost call, and the step's boundary."""
        rec = self._rec
        if rec is None or rec.kind != "forward":
            return
        closer = self._closer
        if closer is not None and id(module) != closer:
            # A call within the round (``call_cycle.py``): the step goes on.
            rec.current.overhead_ns += dispatch_ns + perf_counter_ns() - t
            return
        if self._in_run:
            self._close_run()
        cur = rec.current
        cur.overhead_ns += dispatch_ns  # the way into this call, before t
        info = self.collected.modules.get(id(module))
        if info is None or info.n_params == 0 or not self._boundary("forward", t):
            cur.overhead_ns += perf_counter_ns() - t
        elif self._settled and not self._full:
            shim = self._shims.get(id(module))
            n = self._run_length(rec) if shim is not None else 0
            if n:
                self._start_run(shim, n)  # type: ignore[arg-type]

    def _start_run(self, shim: call_shim.Shim, steps: int) -> None:
        """The next ``steps`` calls of the shim's module end light steps that the plan already
        knows are light (the countdown to the next full step, detail.py). On a launch-bound
        inference step the shim runs between the step's kernel launches, cache cold, where each
        object it touches costs from outside several times what it costs hot; so for those
        calls a stand-in of the shim's wrapper (``call_shim.stand_in``) appends each call's end
        time to ``_run`` and touches nothing else, everything it needs in its closure. The
        steps go into the recorder when the run is closed (``_close_run``), at the next step
        that takes the long way. Each step's wait for its loader goes into a list beside; a
        step that recorded anything else of its own (a copy, a sync, a new epoch, a batch of a
        new shape) takes the long way itself."""
        w = self
        rec = self._rec
        assert rec is not None
        module = shim.module
        call = call_shim.target(shim)
        attrs = vars(module)
        back = shim.wrapper
        ends, datas = self._run, self._run_data
        tid = self._tid
        dispatch_ns = self.calibration.wrapper_ns
        left = steps

        def run(*args: Any, **kwargs: Any) -> Any:
            nonlocal left
            if _is_compiling() or w._bwd_depth or get_ident() != tid:
                return call(*args, **kwargs)
            try:
                return call(*args, **kwargs)
            finally:
                t = perf_counter_ns()
                cur = rec.current
                if cur.syncs or cur.copy_ns or cur.detail_ns or cur.epoch or cur.new_shape:
                    attrs[ATTR_CALL] = back
                    w._light_end(module, t, dispatch_ns)
                else:
                    ends.append(t)
                    datas.append(cur.data_ns)
                    cur.data_ns = 0
                    left -= 1
                    if not left:
                        attrs[ATTR_CALL] = back

        call_shim.stand_in(shim, run)
        self._run_shim = shim
        self._in_run = True

    def _run_length(self, rec: StepRecorder) -> int:
        """How many of the steps after this light one are known light too (their ends can go
        into a run), taken off the plan's countdown; 0 where each step must decide."""
        plan = self.detail
        if plan.share is None or not (plan.every == 1 or plan.joint):
            return 0
        if rec.current.phase != "measure":
            return 0
        if not plan.joint:
            # Copies and syncs are recorded on every step: a step that had some would end each
            # run as it began (a run is for steps that record nothing of their own).
            last = rec.records[-1] if rec.records else None
            if last is None or last.syncs or last.copy_ns or last.detail_ns:
                return 0
        n = min(plan.to_full - 1, MAX_RUN)
        # A run never carries the recorder past a step count that ends the measuring: the step
        # that reaches it takes the long way. (Past ``steps``, the measuring goes on until the
        # measured steps are long enough; a run's steps count towards that when it closes.)
        n = min(n, rec.step_cap - rec.measured - 1)
        if n <= 0:
            return 0
        plan.to_full -= n
        return n

    def _close_run(self) -> None:
        """The shim's own wrapper back, and the run's steps into the recorder and the plan's
        counts."""
        shim, self._run_shim = self._run_shim, None
        if shim is not None:
            call_shim.end_run(shim)
        self._in_run = False
        self._run_left = 0
        ends, datas = self._run, self._run_data
        rec = self._rec
        if rec is None or not ends:
            return
        # New lists: a stand-in that outlives its run appends to the old ones.
        self._run, self._run_data = [], []
        n = len(ends)
        # Each step of the run went through a wrapper's or a hook's layer; what the run's own
        # appends cost is on no clock (the unseen factor's part).
        rec.close_run(ends, datas, n * self.calibration.wrapper_ns)
        self.detail.measured += n
        if self._detail:
            self.detail.detailed += n
