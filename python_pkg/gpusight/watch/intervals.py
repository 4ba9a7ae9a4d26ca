"""Sets of time intervals: the arithmetic behind "each millisecond counted once".

An interval set is a sorted list of disjoint ``(start, end)`` pairs with ``start < end``. The
functions here are pure and unit-free (the trace analysis feeds microseconds).
"""

from __future__ import annotations

from collections.abc import Iterable

Interval = tuple[float, float]
Intervals = list[Interval]


def union(items: Iterable[Interval]) -> Intervals:
    """Merge possibly overlapping intervals into a disjoint, sorted set."""
    out: Intervals = []
    for start, end in sorted(i for i in items if i[1] > i[0]):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def total(items: Intervals) -> float:
    return sum(end - start for start, end in items)


def clip(items: Intervals, lo: float, hi: float) -> Intervals:
    """The part of a disjoint set that lies within ``[lo, hi]``."""
    out: Intervals = []
    for start, end in items:
        if end <= lo:
            continue
        if start >= hi:
            break
        s, e = max(start, lo), min(end, hi)
        if e > s:
            out.append((s, e))
    return out


def intersect(a: Intervals, b: Intervals) -> Intervals:
    """Both sets disjoint and sorted; linear merge."""
    out: Intervals = []
    i = j = 0
    while i < len(a) and j < len(b):
        s = max(a[i][0], b[j][0])
        e = min(a[i][1], b[j][1])
        if e > s:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(a: Intervals, b: Intervals) -> Intervals:
    """``a`` minus ``b``; both disjoint and sorted."""
    out: Intervals = []
    j = 0
    for start, end in a:
        cur = start
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < end:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            if cur >= end:
                break
            k += 1
        if cur < end:
            out.append((cur, end))
    return out


def gaps(items: Intervals, lo: float, hi: float) -> Intervals:
    """The complement of a disjoint set within ``[lo, hi]``."""
    return subtract([(lo, hi)], items) if hi > lo else []
