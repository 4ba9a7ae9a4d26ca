"""Timed steps: blocks of steps between device synchronisations, interleaved A/B comparisons.

Device work is asynchronous, so a block is timed on the host clock between two
``torch.cuda.synchronize()`` calls, never per step: a per-step sync would serialise the host's
launches with the GPU and change what is measured. Baseline and variant blocks alternate
(baseline, variant, baseline, variant, ...) so that drift (clocks, temperature, other processes)
hits both; the speedup is the ratio of the two medians and the noise band is the spread of
the baseline's own blocks, by the one rule of every what-if (``knobs/gain_rule.noise_pct``:
robust, so that one block disturbed by another process does not hide a real gain).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import torch

from ..bench.timer import quantile
from ..knobs import gain_rule
from .arms import Arm

FailureKind = Literal["loader", "step", "oom"]

_OOM_TYPES: tuple[type[BaseException], ...] = tuple(
    {t for t in (getattr(torch, "OutOfMemoryError", None), torch.cuda.OutOfMemoryError) if t}
)


def is_oom(exc: BaseException) -> bool:
    return isinstance(exc, _OOM_TYPES) or (
        isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()
    )


class ArmFailure(Exception):
    """A block could not finish: the loader raised, the step raised, or memory ran out."""

    def __init__(self, kind: FailureKind, index: int, cause: BaseException) -> None:
        super().__init__(f"{kind} failure at {index}: {type(cause).__name__}: {cause}")
        self.kind: FailureKind = kind
        self.index = index
        self.cause = cause
        self.in_variant = False  # set by compare(): the baseline ran, the variant failed


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Overrun(Exception):
    """A block ran past the time it was given (``stop_at``): stopped between two steps."""


@dataclass
class Block:
    ms_per_step: float
    steps: int


def _release_frames(exc: BaseException) -> None:
    # The traceback's finished frames hold the step's locals (activations, the copied model):
    # clear them so that device memory returns now, not when the exception object dies.
    traceback.clear_frames(exc.__traceback__)


def run_block(arm: Arm, steps: int, warmup: int, stop_at: float | None = None) -> Block:
    """Run ``warmup`` untimed and ``steps`` timed steps of ``arm``; raises ArmFailure.

    With ``stop_at`` (a ``time.perf_counter()`` value) the block stops between two steps once
    that time has passed and raises :class:`Overrun`: a forecast that was wrong (a loader far
    slower at a larger batch, say) costs at most one step more than the budget allowed.
    """
    with arm.settings():
        arm.start_epoch()
        try:
            for i in range(warmup + steps):
                if stop_at is not None and i > 0 and time.perf_counter() > stop_at:
                    raise Overrun(f"stopped after {i} of {warmup + steps} steps: out of time")
                if i == warmup:
                    sync(arm.device)
                    t0 = time.perf_counter()
                try:
                    batch = arm.next_batch()
                except Exception as exc:
                    _release_frames(exc)
                    raise ArmFailure(
                        "oom" if is_oom(exc) else "loader", arm.batch_index, exc
                    ) from exc
                try:
                    if arm.first_step_s is None:
                        t_first = time.perf_counter()
                        arm.step(batch)
                        sync(arm.device)
                        arm.first_step_s = time.perf_counter() - t_first
                    else:
                        arm.step(batch)
                except Exception as exc:
                    _release_frames(exc)
                    raise ArmFailure("oom" if is_oom(exc) else "step", i, exc) from exc
                del batch
            sync(arm.device)
            elapsed = time.perf_counter() - t0
        finally:
            arm.stop()
    return Block(ms_per_step=elapsed * 1000.0 / steps, steps=steps)


# --- statistics ---------------------------------------------------------------------------------


@dataclass
class Comparison:
    """Interleaved blocks of a baseline and a variant (ms per step, normalised per sample)."""

    base_ms: list[float] = field(default_factory=list)
    variant_ms: list[float] = field(default_factory=list)

    @property
    def pairs(self) -> int:
        return min(len(self.base_ms), len(self.variant_ms))

    @property
    def before_ms(self) -> float:
        return quantile(self.base_ms, 0.5)

    @property
    def after_ms(self) -> float:
        return quantile(self.variant_ms, 0.5)

    @property
    def speedup(self) -> float:
        """Median baseline over median variant: the same numbers as before_ms and after_ms."""
        if not self.base_ms or not self.variant_ms or self.after_ms <= 0:
            return 0.0
        return self.before_ms / self.after_ms

    @property
    def noise_pct(self) -> float | None:
        return gain_rule.noise_pct(self.base_ms)

    def wins(self) -> bool:
        """A gain by the rule of every what-if: at least ``MIN_GAIN``, its noise band above 1x."""
        return self.pairs > 0 and gain_rule.wins(self.speedup, self.noise_pct)


def compare(
    base: Arm,
    variant: Arm,
    *,
    reps: int,
    steps: tuple[int, int],
    warmup: tuple[int, int],
    scale: float = 1.0,
    fits: Callable[[], bool] = lambda: True,
    on_block: Callable[[], None] = lambda: None,
    stop_at: float | None = None,
) -> Comparison:
    """Alternate baseline and variant blocks ``reps`` times while ``fits()`` says time is left.

    ``scale`` divides the variant's step time (a batch ``scale`` times larger does ``scale``
    times the work). Raises ArmFailure from either arm (``in_variant`` says which), and
    Overrun when a block runs past ``stop_at``.
    """
    cmp = Comparison()
    for r in range(reps):
        if not fits():  # forecast before each pair, the first too: never start what won't fit
            break
        try:
            cmp.base_ms.append(run_block(base, steps[0], warmup[0], stop_at).ms_per_step)
            on_block()
            try:
                block = run_block(variant, steps[1], warmup[1], stop_at)
            except ArmFailure as exc:
                exc.in_variant = True
                raise
        except Overrun:
            if r == 0:
                raise
            del cmp.base_ms[r:]  # the whole pairs measured before time ran out stand
            break
        cmp.variant_ms.append(block.ms_per_step / scale)
        on_block()
    return cmp
