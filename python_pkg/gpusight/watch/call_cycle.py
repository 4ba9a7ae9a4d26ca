"""Which model call ends a step that model calls end (inference), when a loop calls more than
one model.

A loop that calls an encoder and then a decoder (a VAE, a two-stage pipeline, a detector's
backbone and head called apart) makes two outermost calls an iteration; were each call's end a
step's, a step would be half the user's. So the watch notes which outermost module each call
was, in order, over its first calls, and finds the shortest period that repeats twice: the
iteration is one round of it, and the module that ends the round ends the step. No such period
within ``MAX_PERIOD`` calls (a decode loop whose token count varies) leaves every call's end a
step's end, as for a single model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MAX_PERIOD = 8
"""The longest round of calls looked for: twice as many calls are watched before deciding."""


@dataclass(frozen=True, slots=True)
class Cycle:
    period: int
    """Outermost calls a round (1: each call ends a step)."""
    closer: int | None
    """The key of the module whose call ends a round; None where every call ends a step."""


def find_cycle(calls: Sequence[int], max_period: int = MAX_PERIOD) -> Cycle | None:
    """The round that ``calls`` (the outermost modules' keys, in order, from the loop's first
    call) repeat, or None while too few calls have been seen to say."""
    n = len(calls)
    for p in range(1, max_period + 1):
        if n < 2 * p:
            return None  # a shorter period did not fit, and this one cannot be told yet
        if all(calls[i] == calls[i - p] for i in range(p, n)):
            closer = calls[p - 1]
            if p == 1 or calls[: p - 1].count(closer):
                # One module, or a round whose last module is called earlier in it too: its
                # calls cannot tell the round's end (each call ends a step then).
                return Cycle(1, None)
            return Cycle(p, closer)
    return Cycle(1, None)  # no round within reach: each call ends a step
