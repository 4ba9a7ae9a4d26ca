"""Which measured steps record the detail (host-to-device copies, host syncs), and how the
counts of the others are scaled. No torch.

Recording one copy or one sync costs the watch microseconds: the ``Tensor.to`` wrapper, the
``is_pinned`` query, torch's sync warning and Python's warning machinery. Next to a 50 ms
training step that is nothing; next to a 1.7 ms batch-1 inference step that copies its input
and reads its answer back, it is several percent (``benchmarks/cost/parts.py`` on the H200:
the detail cost about three times what the watch's own clocks saw, as it runs cache-cold
between the step's kernel launches).

So the first ``CENSUS`` measured steps all record the detail, and their own clocks say what it
cost. When that is more than ``BUDGET`` of the step, from then on each step records it with
probability 1/k, k the smallest that brings the cost within budget (at most ``MAX_EVERY``).
Random, not every k-th step: a pattern that repeats every few steps (a log line every 10
steps) is then neither always nor never seen. The gap to the next such step is drawn when one is
taken (geometric, the same as a draw of 1 in k on every step), so the steps between are a
countdown the watch can skip through cheaply. Counts are scaled by measured / detailed steps.
The step boundaries and the data wait run on every step.

The module hooks and the forward/backward/optimizer clocks (the step's framework time) are
sampled the same way, on their own budget, where a training step is short: on a 2 ms launch-bound
step they cost more than everything else the watch does (torch takes its slow hook path through
the model's call and two Python hooks run; ``benchmarks/cost/hook.py``). Steps that an optimizer
or a backward ends need them for nothing but that time, so on the other steps (``full`` false)
the hooks come off the model and the framework time is the mean of the steps that timed it.
Steps that a model call ends (inference) need the call's end on every step, as the step boundary:
on the other steps both hooks come off and a wrapper of the model's call ends the step
(``call_shim.py``: torch's hook path skipped), or the post-hook alone where the model's call
cannot take one; not where hooked modules were seen to run inside one another, as only the
pre-hooks tell the outermost call apart. Where both the detail and the hooks are sampled, they
are sampled on the same steps, at the rarer of the two rates (``joint``): the steps between then
switch nothing, and are known light until the countdown runs out, so the watch ends them as a
run (``Watch._start_run`` where a model call ends them, ``Watch._opt_post`` an optimizer step).
On an H200 that took batch-1 inference from +3.7 % to +0.8 % against its control
(``benchmarks/results/h200-run17/``).
"""

from __future__ import annotations

import math
import random
from typing import Protocol

CENSUS = 16
BUDGET = 0.001
"""The detail's share of the step, by the watch's own clocks, that every step may pay. From
outside the process a launch-bound step pays 2-5x what the clocks see (``calibration.py``), so
0.1 % seen is about 0.25-0.5 % paid."""
MAX_EVERY = 64
"""The rarest sampling. The census steps all record (detail and hooks), so a run has at least
that sample; past it, on a step of tens of microseconds (a decode loop's) the full steps'
bookkeeping at 1 in 16 cost the watch 7.2 us a step against 5.5 at 1 in 64 on this project's
CPU machine (``benchmarks/results/cpu-max-every/``)."""
TRIM = 2
HOOK_BUDGET = 0.001
"""The module hooks' and framework clocks' share of the step (by the watch's own clocks, less the
detail) that every step may pay."""


class _Step(Protocol):
    phase: str
    detail: bool
    detail_ns: int
    overhead_ns: int
    full: bool

    @property
    def duration_ns(self) -> int: ...


def every_for(share: float) -> int:
    """1 in how many steps records the detail, for a detail that costs ``share`` of a step."""
    if share <= BUDGET:
        return 1
    return min(MAX_EVERY, math.ceil(share / BUDGET))


def full_every_for(share: float) -> int:
    """1 in how many steps runs the module hooks, for hooks that cost ``share`` of a step."""
    if share <= HOOK_BUDGET:
        return 1
    return min(MAX_EVERY, math.ceil(share / HOOK_BUDGET))


def census_share(steps: list[tuple[int, int]]) -> float:
    """The detail's share of the step over ``(detail_ns, duration_ns)`` pairs, leaving out the
    two steps where it cost most: a line seen for the first time costs a file read once."""
    kept = sorted(steps)[: max(1, len(steps) - TRIM)]
    total = sum(d for _, d in kept)
    return sum(c for c, _ in kept) / total if total > 0 else 0.0


class DetailPlan:
    def __init__(self, seed: int = 0x5EED) -> None:
        self.every = 1
        """1: every step records the detail."""
        self.measured = 0
        self.detailed = 0
        """Measured steps that recorded the detail."""
        self.share: float | None = None
        """The detail's share of the step over the census, by the watch's own clocks."""
        self.full_every = 1
        """1: every step runs the module hooks and times its framework calls."""
        self.full = 0
        """Measured steps that did."""
        self.hook_share: float | None = None
        """The rest of the watch's share of the step over the census (hooks, clocks, records)."""
        self._rng = random.Random(seed)
        self.to_detail = 0
        """Steps to go until the next one that records the detail (1: the next step does)."""
        self.to_full = 0
        """Steps to go until the next full one."""
        self.joint = False
        """Both are sampled, on the same steps: a full step records the detail too, and the
        steps between record nothing (``next_step``)."""
        self._census: list[tuple[int, int]] = []
        self._hook_census: list[tuple[int, int]] = []

    @property
    def decided(self) -> bool:
        return self.share is not None

    def step_ended(self, step: _Step) -> None:
        if step.phase != "measure":
            return
        self.measured += 1
        if step.detail:
            self.detailed += 1
        if step.full:
            self.full += 1
        if self.share is None:
            self._census.append((step.detail_ns, step.duration_ns))
            self._hook_census.append((step.overhead_ns - step.detail_ns, step.duration_ns))
            if self.measured >= CENSUS:
                self.share = census_share(self._census)
                self.every = every_for(self.share)
                self.hook_share = census_share(self._hook_census)
                self.full_every = full_every_for(self.hook_share)
                if self.every > 1 and self.full_every > 1:
                    # One sample for both, at the rarer rate: each within its budget, and the
                    # steps between change nothing (no hooks and no sync-debug mode to switch).
                    self.joint = True
                    self.every = self.full_every = max(self.every, self.full_every)
                self.to_detail = self._gap(self.every)
                self.to_full = self._gap(self.full_every)

    def _gap(self, every: int) -> int:
        """Steps until the next pick of 1 in ``every`` (at least 1): geometric."""
        if every <= 1:
            return 1
        u = self._rng.random()
        return 1 + int(math.log1p(-u) / math.log1p(-1.0 / every))

    def next_step(self) -> tuple[bool, bool]:
        """Whether the next step records the detail, and whether it may be full (where the watch
        allows light steps at all)."""
        if self.joint:
            pick = self.next_full()
            return pick, pick
        return self.next_records(), self.next_full()

    def next_records(self) -> bool:
        """Whether the next step records the detail."""
        if self.every == 1:
            return True
        self.to_detail -= 1
        if self.to_detail > 0:
            return False
        self.to_detail = self._gap(self.every)
        return True

    def next_full(self) -> bool:
        """Whether the next step runs the module hooks and times its framework calls."""
        if self.full_every == 1:
            return True
        self.to_full -= 1
        if self.to_full > 0:
            return False
        self.to_full = self._gap(self.full_every)
        return True

    def scale(self, count: int) -> int:
        """A count from the detailed steps, for all measured steps."""
        if self.detailed == 0 or self.detailed >= self.measured:
            return count
        return round(count * self.measured / self.detailed)
