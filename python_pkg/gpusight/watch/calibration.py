"""What being watched costs outside the hooks' own clocks, measured once when a watch starts.

A hook reads the clock when it starts running; what comes before is invisible to it: torch
dispatching a module call through its hooks instead of its fast path, the Python layer of a
wrapped function (``Tensor.to``, ``DataLoader.__next__``, ...), and Python's warning machinery
that carries a sync warning to ``showwarning``. Each is timed here on stand-ins of the same shape
(a do-nothing module with a pre- and a post-hook, a pass-through wrapper, a warning under an
"always" filter), and the watch adds the figure per event to the step's overhead, so that
``run.overhead_pct`` is closer to what the user's loop pays. Not included: torch's C++ side of
a sync warning (CUDA only; ``benchmarks/cost/overhead.py --micro`` measures the whole).

Each figure is the smallest per-call difference over a few short repeats (the least disturbed
repeat), never below zero; the whole calibration takes a few milliseconds.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from time import perf_counter_ns
from typing import Any

CALLS = 200
REPEATS = 3

UNSEEN_FACTOR = 2.4
"""What the watch cost a launch-bound step from outside its clocks, over what its clocks saw
with the figures above added, both as means over the same steps: 2.7x on unbatched_inference
(109 us against 40 us a 2.8 ms step, 80 rounds) and 2.1x on tiny_batch (79 us against 38 us a
2.6 ms step, 50 rounds), paired in one process on an H200 (``benchmarks/cost/parts.py``,
``benchmarks/results/h200-run12/b-conv-and-parts``); 2.4 is within 1 percentage point of both.
Between a step's kernel launches the hooks run cache-cold, which stand-ins timed in a tight loop
are not; ``run.overhead_pct`` is the hooks' time times this factor, and
``run.kernels.overhead_seen_pct`` what they saw.

Measured again with every public scenario's own script, bare and watched in one process taking
turns at its step clock (``benchmarks/cost/scenario.py``, ``h200-run16/b``), each
against its control: the training steps cost 1.3-2.3x what the clocks saw (tiny_batch 2.0 %
against 1.05 %, small_batch_rnn 1.8 % against 0.82 %, item_per_step 1.2 % against 0.49 %),
so 2.4 stays for them; the inference step did not (``UNSEEN_FACTOR_FORWARD``)."""

UNSEEN_FACTOR_FORWARD = 4.5
"""The same for steps that a model call ends (inference): there the module hooks run on every
step, since the call is the step boundary, and their cost from outside was 3.7-5.3x what the
clocks saw on unbatched_inference on an H200 (+3.5 % against its control at 0.95 % seen,
``cost/interleaved.py``, ``h200-run16/c``; +4.6 % at 0.87 %, ``cost/scenario.py``,
``h200-run16/b``; +4.1 % at 0.87 % in ``h200-run16/a``, no control). On this repository's 2-core
CPU machine the same step's factor was about 2.7x, so on a CPU-only run the figure is high.
Measured while both hooks still ran on every such step, as they still do where the steps are
long enough (``detail.py``). Where they are sampled (light steps), the watch's cost a call fell
from 3.6 to 2.2 us on this CPU machine while its clocks still saw about 3.0
(``benchmarks/results/cpu-hook-cost/infer-light/``): those runs take ``UNSEEN_FACTOR``
(``unseen_factor``). Measured on an H200 once their light steps ended in runs
(``cost/interleaved.py``, ``h200-run17/c``): the watch +1.5 % against a control of +0.7 %
where its clocks saw 0.48 % (1.7x), the step and module hooks alone +1.7 % at 0.74 % (1.4x);
2.4 reads 0.35 percentage points high there."""


def unseen_factor(step_kind: str | None, hooks_every: int = 1) -> float:
    """The factor for a run whose steps ``step_kind`` ends (the recorder's driving kind), whose
    module hooks ran on 1 in ``hooks_every`` steps. ``UNSEEN_FACTOR_FORWARD`` was measured on
    steps that a model call ends with the hooks on every step; where they were sampled, those
    steps are shaped as training's light steps are, and take training's factor (they paid
    1.4-1.7x on an H200, ``UNSEEN_FACTOR_FORWARD``'s note)."""
    if step_kind == "forward" and hooks_every <= 1:
        return UNSEEN_FACTOR_FORWARD
    return UNSEEN_FACTOR


@dataclass(frozen=True)
class Calibration:
    module_hooks_ns: int = 0
    """Extra cost of a module call with one pre- and one post-hook (do-nothing) over none."""
    wrapper_ns: int = 0
    """Extra cost of calling through a Python pass-through wrapper."""
    warning_ns: int = 0
    """Python's path from ``warnings.warn`` to a ``showwarning`` replacement that returns."""

    def as_dict(self) -> dict[str, int]:
        return {
            "module_hooks_ns": self.module_hooks_ns,
            "wrapper_ns": self.wrapper_ns,
            "warning_ns": self.warning_ns,
        }


def _per_call_ns(fn: Callable[[], object], calls: int = CALLS, repeats: int = REPEATS) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = perf_counter_ns()
        for _ in range(calls):
            fn()
        best = min(best, (perf_counter_ns() - t0) / calls)
    return best


def _extra_ns(base: Callable[[], object], hooked: Callable[[], object]) -> int:
    # Interleaved, so that a burst of noise hits both sides: the smallest difference wins.
    diffs = [
        _per_call_ns(hooked, repeats=1) - _per_call_ns(base, repeats=1) for _ in range(REPEATS)
    ]
    return max(0, round(min(diffs)))


def module_hooks_ns(torch: Any) -> int:
    class Stand(torch.nn.Module):  # type: ignore[misc]
        def forward(self, x: object) -> object:
            return x

    plain, hooked = Stand(), Stand()
    hooked.register_forward_pre_hook(lambda m, a: None)
    hooked.register_forward_hook(lambda m, a, o: None, always_call=True)
    return _extra_ns(lambda: plain(0), lambda: hooked(0))


def wrapper_ns() -> int:
    def orig(*args: Any, **kwargs: Any) -> object:
        return None

    def wrapped(*args: Any, **kwargs: Any) -> object:
        return orig(*args, **kwargs)

    return _extra_ns(lambda: orig(1, flag=True), lambda: wrapped(1, flag=True))


def warning_ns() -> int:
    message = "gpusight calibration: a warning carried to showwarning"
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = lambda *a, **k: None
        per = _per_call_ns(lambda: warnings.warn(message, UserWarning, stacklevel=1), calls=100)
    return max(0, round(per))


def calibrate(torch: Any) -> Calibration:
    """All three figures; a part that fails counts as zero (the watch must still start)."""
    parts: dict[str, int] = {}
    steps: tuple[tuple[str, Callable[[], int]], ...] = (
        ("module_hooks_ns", partial(module_hooks_ns, torch)),
        ("wrapper_ns", wrapper_ns),
        ("warning_ns", warning_ns),
    )
    for name, fn in steps:
        try:
            parts[name] = int(fn())
        except Exception:
            parts[name] = 0
    return Calibration(**parts)
