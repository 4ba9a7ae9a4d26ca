"""Evaluations that never call ``model.eval()``: a ``torch.no_grad()`` or
``torch.inference_mode()`` block (a ``with`` or a decorated function) that takes batches from a
DataLoader while a training loop runs.

A block is pending from its ``__enter__`` (its time and the step's counters then kept); where a
batch is taken from a DataLoader inside it, it is an evaluation, a phase from that ``__enter__``
to its ``__exit__`` (``phases.py``). Torch's own uses (``clip_grad_norm_``, an optimizer's step)
and a metric computed under ``no_grad`` in the step take no batch: they stay the step's. A loop
whose every step takes its batch under ``no_grad`` (a teacher's inputs) is seen as evaluations a
step apart, which the phases give back to the steps. Not seen: an evaluation over tensors held in
memory, with no loader.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

from .phases import EVALUATION, TRAINING_KINDS, Held, held_now

if TYPE_CHECKING:
    from .phases import PhaseHooks

MAX_DEPTH = 32
"""Blocks kept open at once: past this (a recursion under no_grad) none is tracked."""


@dataclass
class Pending:
    ctx: int
    """``id`` of the context manager object that entered it."""
    t: int
    held: Held
    frame: Any
    """The frame that entered it (a ``with`` line, or torch's decorator around a function)."""
    line: int
    """That frame's line when it entered."""
    evaluating: bool = False


class NoGradBlocks:
    """The grad-mode context managers' wrappers, and the blocks open now."""

    def __init__(self, hooks: PhaseHooks) -> None:
        self.hooks = hooks
        self.open: list[Pending] = []

    def install(self, torch: Any) -> None:
        p = self.hooks.w._patches
        for cls in (torch.no_grad, torch.inference_mode):
            p.set_attr(cls, "__enter__", self._wrap_enter(cls.__enter__))
            p.set_attr(cls, "__exit__", self._wrap_exit(cls.__exit__))

    def _wrap_enter(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        blocks = self

        @functools.wraps(orig)
        def __enter__(ctx: Any) -> Any:
            out = orig(ctx)
            blocks._entered(ctx, sys._getframe(1))
            return out

        return __enter__

    def _wrap_exit(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        blocks = self

        @functools.wraps(orig)
        def __exit__(ctx: Any, *exc: Any) -> Any:
            blocks._left(ctx)
            return orig(ctx, *exc)

        return __exit__

    def _entered(self, ctx: Any, frame: Any) -> None:
        hooks = self.hooks
        rec = hooks.w._rec
        if (
            rec is None
            or rec.kind not in TRAINING_KINDS
            or hooks.tracker.active is not None
            or hooks.per_step
            or len(self.open) >= MAX_DEPTH
            or not hooks._ours()
        ):
            return
        block = Pending(id(ctx), perf_counter_ns(), held_now(rec), frame, frame.f_lineno)
        self.open.append(block)

    def _left(self, ctx: Any) -> None:
        if not self.open or self.open[-1].ctx != id(ctx):
            return
        block = self.open.pop()
        block.frame = None
        tracker, rec = self.hooks.tracker, self.hooks.w._rec
        active = tracker.active
        if block.evaluating and active is not None and active.kind == EVALUATION and rec:
            tracker.end(rec, perf_counter_ns())

    def batch_taken(self) -> None:
        """A DataLoader gives a batch: inside a block, the block is an evaluation."""
        if not self.open or self.hooks.tracker.active is not None:
            return
        block = self.open[0]  # the outermost: the evaluation's own
        if block.evaluating:
            return
        hooks = self.hooks
        block.evaluating = hooks.begin_evaluation(block.frame, block.t, block.held, block.line)
        if not block.evaluating:
            self.open.clear()  # the watch stopped looking (evaluations at every step)
