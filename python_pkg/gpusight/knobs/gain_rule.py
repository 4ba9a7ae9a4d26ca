"""When a measured change counts as a gain, when a sweep stops, and when a gain is too large to
believe: one rule for every what-if (the re-run of a script, ``diagnose`` on copies, the
inference what-if).

``noise_pct`` (the report schema's field of that name) is the width of the middle 80 % of
repeated measurements of one thing (the baseline's blocks of steps, its calls, its control
runs: p10 to p90), in % of their median. The report draws ``speedup * (1 ± noise_pct / 100)``:
taken as a half-width the band is wide on purpose (about 2.6 standard deviations of a normal
spread), so that a noisy machine never reads as a gain. Within one re-run of a script, whose
figure is its mean step, the band is that mean's (``mean_noise_pct``: twice its standard error
from the means of its blocks); a re-run's row takes the widest of its runs' bands and the
control runs' spread. A change wins when it gains at least
``MIN_GAIN`` and that whole band lies above 1x, so a winning row is never drawn as "not
significant".
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

# A change wins when it gains at least this much (and its noise band leaves 1x out).
MIN_GAIN = 1.05
# A sweep goes on while its last point beats the best before it by this much.
KNEE_GAIN = 1.05
# A sweep's answer: its smallest point within this share of the best point's gain.
KNEE_SHARE = 0.95
# A batch k times larger gives at most k times the items per second; past k times this margin
# (and the noise) the run timed something else, or the baseline was disturbed.
BOUND_MARGIN = 1.10


def noise_pct(samples: Sequence[float]) -> float | None:
    """THE noise band of repeated measurements of one thing (see above); None for fewer than
    two or a median that is not positive. The hardware benchmarks report the same band
    (``bench/timer.Stats``); it is computed here so that a re-run never imports them."""
    if len(samples) < 2:
        return None
    qs = statistics.quantiles(samples, n=10, method="inclusive")
    med = statistics.median(samples)
    return 100.0 * (qs[-1] - qs[0]) / med if med > 0 else None


def mean_noise_pct(block_means: Sequence[float]) -> float:
    """The band of one run's mean step, from the means of its blocks of steps (batch means: a
    block holds whole stall periods, so the blocks are close to independent): twice the mean's
    standard error, in % of it; 0 with fewer than three blocks or a mean that is not positive."""
    if len(block_means) < 3:
        return 0.0
    m = statistics.fmean(block_means)
    sem = statistics.stdev(block_means) / len(block_means) ** 0.5
    return 200.0 * sem / m if m > 0 else 0.0


def band_excludes_one(speedup: float, noise_pct: float | None) -> bool:
    """True when the whole noise band of ``speedup`` lies above 1x (no noise: above 1x)."""
    noise = abs(noise_pct or 0.0) / 100.0
    return speedup * (1.0 - noise) > 1.0


def threshold(noise_pct: float | None) -> float:
    """The smallest speedup that wins at this noise: ``MIN_GAIN``, and the band above 1x."""
    noise = abs(noise_pct or 0.0) / 100.0
    return max(MIN_GAIN, 1.0 / (1.0 - noise)) if noise < 1.0 else float("inf")


def wins(speedup: float | None, noise_pct: float | None) -> bool:
    return speedup is not None and speedup >= threshold(noise_pct)


def loses(speedup: float | None, noise_pct: float | None) -> bool:
    """Measurably slower: as far below 1x as a win must be above it."""
    return speedup is not None and speedup * threshold(noise_pct) <= 1.0


def sweep_goes_on(gains: list[float | None]) -> bool:
    """Whether a sweep goes on after the points measured so far (``gains`` in order, None for a
    point that failed: an OOM or a crash, which a larger point would repeat)."""
    if not gains:
        return True
    if gains[-1] is None:
        return False
    got = [g for g in gains if g is not None]
    if len(got) < 2:
        return True
    return got[-1] >= KNEE_GAIN * max(got[:-1])


def beyond_bound(speedup: float, items_factor: float, noise_pct: float | None) -> bool:
    """A gain larger than ``items_factor`` (the items per step grew that many times) allows:
    more than the extra items can explain, so not a gain of this change alone."""
    if items_factor <= 1.0:
        return False
    noise = abs(noise_pct or 0.0) / 100.0
    return speedup > items_factor * BOUND_MARGIN * (1.0 + noise)


def knee_of(points: Sequence[tuple[T, float]]) -> T:
    """A sweep's answer: the first point (the smallest change) within ``KNEE_SHARE`` of the
    best gain measured."""
    top = max(g for _, g in points)
    return next(x for x, g in points if g >= KNEE_SHARE * top)
