"""Statistics with intervals: medians and their distribution-free intervals, figures paired
round by round (a drift between rounds cancels), quartiles and spreads."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def median_ci(xs: Sequence[float], conf: float = 0.95) -> tuple[float, float] | None:
    """A distribution-free interval for the median: the order statistics whose ranks a
    Binomial(n, 1/2) puts outside with probability at most ``1 - conf``. None for too few."""
    n = len(xs)
    alpha = (1 - conf) / 2
    cdf, j = 0.0, -1
    while cdf + math.comb(n, j + 1) / 2**n <= alpha:
        j += 1
        cdf += math.comb(n, j) / 2**n
    if j < 0:
        return None
    s = sorted(xs)
    return s[j], s[n - 1 - j]


def pct(ratio: float, nd: int = 2) -> float:
    """A ratio as a percent difference, ``100 * (ratio - 1)``, rounded."""
    return round(100 * (ratio - 1), nd)


def ci_pct(ci: tuple[float, float] | None, nd: int = 2) -> list[float] | None:
    """An interval of ratios as percent differences (None stays None)."""
    return [pct(x, nd) for x in ci] if ci else None


def paired_ratios(xs: Sequence[float], base: Sequence[float]) -> list[float]:
    """Each round's figure over the same round's base figure."""
    return [x / b for x, b in zip(xs, base, strict=True)]


def paired_diffs(xs: Sequence[float], base: Sequence[float], scale: float = 1.0) -> list[float]:
    """Each round's figure minus the same round's base figure, times ``scale``."""
    return [(x - b) * scale for x, b in zip(xs, base, strict=True)]


def paired_ratio(runs: Sequence[float], base: Sequence[float]) -> float:
    """Median over rounds of each round's run over that round's bare run."""
    return statistics.median(paired_ratios(runs, base))


def paired_pct(
    runs: Sequence[tuple[int, str, float]], sides: tuple[str, str] = ("bare", "watched")
) -> float | None:
    """Median over rounds of watched / bare - 1 (in %), each round's two runs side by side.

    ``runs``: ``(round, side, figure)``; a round without both runs is left out.
    """
    base, other = sides
    by_round: dict[int, dict[str, float]] = {}
    for r, side, ms in runs:
        by_round.setdefault(r, {})[side] = ms
    ratios = [
        100.0 * (m[other] / m[base] - 1.0) for m in by_round.values() if m.get(base) and other in m
    ]
    return round(statistics.median(ratios), 2) if ratios else None


def quartiles(xs: Sequence[float]) -> list[float]:
    """The ``n // 4``-th value from each end of ``xs`` sorted (the whole range for fewer than
    four): an interquartile range that needs no interpolation."""
    s = sorted(xs)
    k = len(s) // 4
    return [s[k], s[-k - 1]]


def lower_quartile(xs: Sequence[float]) -> float:
    return statistics.quantiles(xs, n=4, method="inclusive")[0] if len(xs) > 1 else xs[0]


def spread_pct(xs: Sequence[float]) -> float | None:
    """(max - min) / median, in percent: the smallest difference the figures resolve (None for a
    zero median)."""
    mid = statistics.median(xs)
    return 100 * (max(xs) - min(xs)) / mid if mid else None


def spread(xs: Sequence[float]) -> dict[str, float]:
    """Coefficient of variation and max/min - 1, in percent."""
    m = statistics.fmean(xs)
    return {
        "cv_pct": 100 * statistics.pstdev(xs) / m,
        "range_pct": 100 * (max(xs) / min(xs) - 1),
    }


def corr(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Pearson's correlation; None for fewer than three or a constant side."""
    if len(a) < 3 or statistics.pstdev(a) == 0 or statistics.pstdev(b) == 0:
        return None
    return statistics.correlation(a, b)


def median_range(xs: Sequence[float]) -> tuple[float, list[float]]:
    """The median and ``[min, max]``."""
    return statistics.median(xs), [min(xs), max(xs)]
