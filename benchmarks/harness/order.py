"""The order in which runs and blocks take turns, so that a slow drift of the machine weighs on
every side alike."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

S = TypeVar("S", bound=Sequence[Any])

WBBW = ("W", "B", "B", "W")
"""Blocks of a watched (W) and a bare (B) side: each adjacent pair has one of each, and the
pairs alternate which goes first."""


def round_order(r: int, first: str = "bare", others: Sequence[str] = ("watched",)) -> list[str]:
    """Round ``r``'s runs: ``first`` then ``others`` in even rounds, the other way round in odd
    ones (ABBA over each pair of rounds)."""
    return [first, *others] if r % 2 == 0 else [*others, first]


def abba(
    rounds: int, first: int = 0, sides: tuple[str, str] = ("bare", "watched")
) -> list[tuple[int, str]]:
    """``(round, side)`` in order for rounds ``first .. first + rounds - 1``, ABBA."""
    a, b = sides
    return [(r, side) for r in range(first, first + rounds) for side in round_order(r, a, (b,))]


def rotated(items: S, r: int) -> S:
    """``items`` started ``r`` places on (round ``r`` of a rotation: each item in each place)."""
    k = r % len(items)
    return items[k:] + items[:k]  # type: ignore[return-value]


def pair_ratios(blocks: list[dict[str, Any]], key: str) -> list[float]:
    """W / B of ``key`` over the adjacent pairs of the W B B W order."""
    out = []
    for i in range(0, len(blocks) - 1, 2):
        a, b = blocks[i], blocks[i + 1]
        w, bare = (a, b) if a["who"] == "W" else (b, a)
        if w["who"] == "W" and bare["who"] == "B" and bare[key] > 0:
            out.append(w[key] / bare[key])
    return out
