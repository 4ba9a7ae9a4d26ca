"""A training framework's per-step hooks, timed by the names it gives them.

Lightning wraps each hook it calls in ``trainer.profiler.profile(name)``: a callback's
``[Callback]TQDMProgressBar.on_train_batch_end``, the module's ``[LightningModule]...``, the
strategy's, the loop's ``run_training_batch``. Its default profiler (``PassThroughProfiler``)
does nothing with them; while the watch runs, its ``start``/``stop`` time them on the detailed
measured steps (``detail.py``), so the host time the line clock puts on ``trainer.fit(...)``
has names: which callback's hook costs what. Each span's time is its own, less the named spans
inside it. A Trainer given a profiler of the user's own keeps it, untouched. Hugging Face's
Trainer names none: its methods a step runs (the next batches, the training step, the logging
checks) and the events it sends its callbacks are timed under names of the same form.
"""

from __future__ import annotations

import functools
from bisect import bisect_right
from collections.abc import Callable, Iterable
from time import perf_counter_ns
from typing import Any

from ..after_import import after_import
from ..rules.framework_hook_fix import ALL_TRAINER_CALLBACKS, HookTime

PROFILER_MODULES = ("lightning.pytorch.profilers.base", "pytorch_lightning.profilers.base")
HF_TRAINER = "transformers.trainer"
HF_CALLBACKS = "transformers.trainer_callback"
HF_PARTS = ("get_batch_samples", "training_step", "_clip_grad_norm", "_maybe_log_save_evaluate")
"""Hugging Face's Trainer's methods a step runs, timed as its parts (it names none itself)."""
MAX_SPANS = 100_000
"""Spans kept (about 35 a step): the detailed steps of a long measured run fit many times."""
SHOWN = 8


class FrameworkHookClock:
    """Spans of a framework's named hooks: ``(name, start_ns, own_ns)``."""

    def __init__(self, recording: Callable[[], bool]) -> None:
        self._recording = recording
        self.spans: list[tuple[str, int, int]] = []
        self._open: list[list[Any]] = []  # [name, start_ns, named children's ns]

    def install(self, patches: Any) -> None:
        """Time Lightning's default profiler's spans and Hugging Face's Trainer's parts from
        when each is imported (now, if it is)."""

        def apply(mod: Any) -> None:
            cls = getattr(mod, "PassThroughProfiler", None)
            if cls is not None:
                patches.set_attr(cls, "start", self._start_method())
                patches.set_attr(cls, "stop", self._stop_method())

        patches.add("Lightning's hook names", after_import(dict.fromkeys(PROFILER_MODULES, apply)))
        patches.add(
            "Hugging Face's Trainer parts",
            after_import(
                {HF_TRAINER: self._hf_trainer(patches), HF_CALLBACKS: self._hf_events(patches)}
            ),
        )

    def _hf_trainer(self, patches: Any) -> Callable[[Any], None]:
        """The Trainer's parts of a step, named as Lightning names its hooks."""

        def apply(mod: Any) -> None:
            cls = getattr(mod, "Trainer", None)
            for method in HF_PARTS if cls is not None else ():
                orig = vars(cls).get(method)
                if callable(orig):
                    named = functools.partial(_fixed, f"[Trainer]Trainer.{method}")
                    patches.set_attr(cls, method, self._timed(orig, named))

        return apply

    def _hf_events(self, patches: Any) -> Callable[[Any], None]:
        """Each event the Trainer sends its callbacks (``on_step_end``), all callbacks as one."""

        def apply(mod: Any) -> None:
            cls = getattr(mod, "CallbackHandler", None)
            orig = vars(cls).get("call_event") if cls is not None else None
            if callable(orig):

                def name(args: tuple[Any, ...]) -> str:
                    return f"[Callback]{ALL_TRAINER_CALLBACKS}.{args[1] if len(args) > 1 else '?'}"

                patches.set_attr(cls, "call_event", self._timed(orig, name))

        return apply

    def _timed(
        self, orig: Callable[..., Any], name_of: Callable[[tuple[Any, ...]], str]
    ) -> Callable[..., Any]:
        begin, end = self._start_method(), self._stop_method()

        @functools.wraps(orig)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if not self._recording():
                return orig(*args, **kwargs)
            name = name_of(args)
            begin(None, name)
            try:
                return orig(*args, **kwargs)
            finally:
                end(None, name)

        return timed

    def _start_method(self) -> Callable[[Any, str], None]:
        clock = self

        def start(profiler: Any, action_name: str) -> None:
            if clock._recording() and len(clock.spans) < MAX_SPANS:
                clock._open.append([action_name, perf_counter_ns(), 0])

        return start

    def _stop_method(self) -> Callable[[Any, str], None]:
        clock = self

        def stop(profiler: Any, action_name: str) -> None:
            stack = clock._open
            if not stack or stack[-1][0] != action_name:
                # Not begun on a recorded step (the step's end came inside it): not timed.
                return
            name, t0, inner = stack.pop()
            took = perf_counter_ns() - t0
            if stack:
                stack[-1][2] += took
            clock.spans.append((name, t0, max(0, took - inner)))

        return stop


def _fixed(name: str, _args: tuple[Any, ...]) -> str:
    return name


def hook_times(
    spans: Iterable[tuple[str, int, int]], steps: list[tuple[int, int]]
) -> list[HookTime]:
    """Each name's own time and calls per step over ``steps`` (their ``(start_ns, end_ns)``),
    a span counted in the step it began in; the costliest first."""
    if not steps:
        return []
    bounds = sorted(steps)
    starts = [a for a, _ in bounds]
    own: dict[str, int] = {}
    calls: dict[str, int] = {}
    for name, t0, ns in spans:
        i = bisect_right(starts, t0) - 1
        if i >= 0 and t0 < bounds[i][1]:
            own[name] = own.get(name, 0) + ns
            calls[name] = calls.get(name, 0) + 1
    n = len(bounds)
    out = [HookTime(k, v / 1e6 / n, calls[k] / n) for k, v in own.items()]
    return sorted(out, key=lambda h: -h.ms)


def framework_hook_evidence(
    clock: FrameworkHookClock | None, steps: Iterable[Any]
) -> list[HookTime]:
    """The named hooks' times over the reported steps that were detailed (``StepRecord``)."""
    if clock is None or not clock.spans:
        return []
    return hook_times(clock.spans, [(r.start_ns, r.end_ns) for r in steps if r.detail])


def hooks_run(times: list[HookTime]) -> dict[str, Any] | None:
    """The report's ``run.framework_hooks`` (schema 1.9)."""
    if not times:
        return None
    rows = [
        {"name": h.name, "ms_per_step": round(h.ms, 4), "calls_per_step": round(h.calls, 3)}
        for h in times[:SHOWN]
    ]
    return {"hooks": rows}
