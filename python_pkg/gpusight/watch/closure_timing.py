"""The closure an optimizer's step runs, timed apart from the step: Lightning's automatic
optimization passes its whole training step (``training_step``, the backward) to
``optimizer.step(closure)``, and LBFGS re-evaluates the loss through one. Counted as the
optimizer's, the user's lines in ``training_step`` (a metric, a logger) read as the framework's
compute; the closure's forward and backward have hooks of their own, and what else it runs is
the step's host work outside the model."""

from __future__ import annotations

import functools
from collections.abc import Callable
from time import perf_counter_ns
from typing import Any


def _closure_of(args: Any, kwargs: Any) -> tuple[Callable[..., Any] | None, str | int | None]:
    """The closure passed to ``step`` and where: a keyword, or the first positional after the
    optimizer (a step hook's ``args`` start with it)."""
    if isinstance(kwargs, dict) and callable(kwargs.get("closure")):
        return kwargs["closure"], "closure"
    if isinstance(args, tuple) and len(args) > 1 and callable(args[1]):
        return args[1], 1
    return None, None


def timed_closure(args: Any, kwargs: Any, spans: list[tuple[int, int]]) -> tuple[Any, Any] | None:
    """The step's ``(args, kwargs)`` (as its pre-hooks get them, the optimizer first) with its
    closure wrapped to add each run's span to ``spans``; None where the step has no closure
    (the hook then changes nothing)."""
    closure, at = _closure_of(args, kwargs)
    if closure is None:
        return None

    @functools.wraps(closure)
    def timed(*a: Any, **k: Any) -> Any:
        t0 = perf_counter_ns()
        try:
            return closure(*a, **k)
        finally:
            spans.append((t0, perf_counter_ns()))

    if at == "closure":
        return args, {**kwargs, "closure": timed}
    return (args[0], timed, *args[2:]), kwargs


def own_spans(t0: int, t1: int, closures: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of the step from ``t0`` to ``t1`` outside the closure's runs."""
    out, at = [], t0
    for a, b in sorted(closures):
        if a > at:
            out.append((at, min(a, t1)))
        at = max(at, b)
    if at < t1:
        out.append((at, t1))
    return out
