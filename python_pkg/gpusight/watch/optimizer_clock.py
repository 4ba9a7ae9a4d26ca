"""Which optimizer's step ends a training step, when a script steps more than one.

The first optimizer to step is the clock, and so is any optimizer over the same first parameter
(one made anew every step for a hand-written schedule, or after a warm-up). It hands over to
another in two cases, both where it has stopped stepping while the run goes on:

* **replaced**: an optimizer over some of the same parameters steps twice with no step of the
  clock's between. A fine-tuning script that makes a new optimizer after unfreezing layers,
  still holding the old one; without the hand-over no later step would end and the report
  would describe the steps before the swap only.
* **stale**: an optimizer over other parameters steps ``STALE_AFTER`` times in a row with none
  of the clock's (a new model and optimizer in the same run: cross-validation folds).

Where optimizers step at different rates and all keep stepping (a GAN's critic stepping n
times per generator step), the step stays the clock's: whether a script's own iteration is the
critic's step (``if i % n_critic == 0: step the generator``) or the generator's (``for _ in
range(n_critic): step the critic``) is not in what the hooks see, so the report says how the
rates compare instead (``rate_notes``). A step inside another optimizer's step (the base
optimizer of Lookahead or SAM) is the outer one's business: only the outermost step ends a step
(``Watch._opt_post``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

STALE_AFTER = 8
"""Steps in a row of an optimizer over other parameters, with none of the clock's, that hand
the clock over (more where that optimizer has run that long before with the clock still
stepping)."""
REPLACED_AFTER = 1
"""The same for an optimizer that holds some of the clock's parameters: a second step of it
with none of the clock's between."""
MAX_OTHERS = 8
"""Other optimizers followed; more are let through unseen."""


def first_param(opt: Any) -> int | None:
    """``id`` of the first tensor an optimizer updates: what tells optimizers over the same
    model apart from others in one lookup."""
    try:
        return id(opt.param_groups[0]["params"][0])
    except (AttributeError, IndexError, KeyError, TypeError):
        return None


def param_ids(opt: Any) -> frozenset[int]:
    """The ids of the tensors an optimizer updates (empty where it has no ``param_groups``)."""
    try:
        return frozenset(id(p) for group in opt.param_groups for p in group["params"])
    except (AttributeError, KeyError, TypeError):
        return frozenset()


@dataclass(slots=True)
class _Other:
    name: str
    at: int
    """The clock's steps when it last stepped."""
    shares: bool
    """It updates some of the clock's parameters."""
    first_at: int
    steps: int = 1
    idle: int = 0
    """Its steps in a row, since the last, with no step of the clock's between."""
    longest_idle: int = 0
    last_t: int = 0
    """When it last stepped (perf_counter_ns)."""
    idle_ends: list[int] = field(default_factory=list)
    """When it stepped since the clock last did, but for its latest step."""


@dataclass(frozen=True, slots=True)
class Handover:
    why: str
    """"replaced" or "stale"."""
    after: int
    """The clock's steps when it stopped."""
    old: str
    new: str
    ends: list[int]
    """When the new clock stepped before, since the old one last did: the ends of the steps
    between (the step under way holds them all otherwise)."""


class OptimizerClock:
    """The clock's identity and what the other optimizers did, fed from the step post-hook."""

    def __init__(self) -> None:
        self.key: int | None = None
        """``id`` of the optimizer whose steps end the step."""
        self.name = ""
        self.first: int | None = None
        """``id`` of its first parameter: an optimizer made anew over the same model (every
        step, for a hand-written schedule) is the same clock."""
        self._params: frozenset[int] = frozenset()
        self._others: dict[int, _Other] = {}
        self.handovers: list[Handover] = []

    def start(self, opt: Any) -> None:
        self.key = id(opt)
        self.name = type(opt).__name__
        self.first = first_param(opt)
        self._params = param_ids(opt)

    def same(self, opt: Any) -> bool:
        """``opt`` updates the clock's first parameter: it is the clock (made anew); then its
        ``id`` is the clock's from now on."""
        first = self.first
        if first is None or first_param(opt) != first:
            return False
        self.key = id(opt)
        return True

    def other_stepped(self, opt: Any, clock_steps: int, t: int) -> Handover | None:
        """An optimizer that is not the clock stepped at ``t``, the clock having stepped
        ``clock_steps`` times so far. A hand-over when the clock has stopped: then ``opt`` is
        the clock."""
        key = id(opt)
        o = self._others.get(key)
        if o is None:
            if len(self._others) >= MAX_OTHERS:
                return None
            shares = not self._params.isdisjoint(param_ids(opt))
            self._others[key] = _Other(type(opt).__name__, clock_steps, shares, clock_steps)
            self._others[key].last_t = t
            return None
        o.steps += 1
        if clock_steps != o.at:
            o.at = clock_steps
            o.longest_idle = max(o.longest_idle, o.idle)
            o.idle = 0
            o.last_t = t
            if o.idle_ends:
                o.idle_ends = []
            return None
        o.idle += 1
        o.idle_ends.append(o.last_t)
        o.last_t = t
        base = REPLACED_AFTER if o.shares else STALE_AFTER
        if o.idle < max(base, 2 * o.longest_idle + 2 if o.longest_idle else 0):
            return None
        why = "replaced" if o.shares else "stale"
        handover = Handover(why, clock_steps, self.name, o.name, o.idle_ends)
        self.handovers.append(handover)
        old_key = self.key
        old = _Other(self.name, clock_steps, o.shares, clock_steps, steps=0, longest_idle=o.idle)
        del self._others[key]
        self.start(opt)
        if old_key is not None and len(self._others) < MAX_OTHERS:
            # Should the old one step again, it takes over back only by stalling the new one
            # longer than the new one stalled it.
            self._others[old_key] = old
        return handover

    def rate_notes(self) -> list[str]:
        """How often each other optimizer stepped against the clock, where that is far from
        once per step (so a step is not one round of them all)."""
        notes = []
        for o in self._others.values():
            if o.steps < 3:
                continue
            per = (o.at - o.first_at) / (o.steps - 1)
            if per >= 1.5:
                what = f"once every {per:.1f} steps"
            elif per <= 1 / 1.5:
                what = f"{1 / per:.1f} times a step" if per > 0 else "many times a step"
            else:
                continue
            notes.append(
                f"a step ends at one optimizer's step ({self.name}); another ({o.name}) stepped "
                f"{what}: the step time is the time between the first one's steps, not one "
                "round of both"
            )
        return notes
