"""When a measured change counts as a gain, when a sweep stops, and when a gain is too large to
believe: one rule for every what-if.

``noise_pct`` (the report schema's field of that name) is the half-width, in percent, of the
band a re-measurement of the same thing falls in: ``speedup * (1 ± noise_pct / 100)``. A change
wins when it gains at least ``MIN_GAIN`` and more than its noise.
"""

from __future__ import annotations

# A change wins when it gains at least this much (and its noise band leaves 1x out).
MIN_GAIN = 1.05
# A sweep goes on while its last point beats the best before it by this much.
KNEE_GAIN = 1.05
# A batch k times larger gives at most k times the items per second; past k times this margin
# (and the noise) the run timed something else, or the baseline was disturbed.
BOUND_MARGIN = 1.10


def band_excludes_one(speedup: float, noise_pct: float | None) -> bool:
    """True when the whole noise band of ``speedup`` lies above 1x (no noise: above 1x)."""
    noise = abs(noise_pct or 0.0) / 100.0
    return speedup * (1.0 - noise) > 1.0


def threshold(noise_pct: float | None) -> float:
    """The smallest speedup that wins at this noise."""
    return max(MIN_GAIN, 1.0 + abs(noise_pct or 0.0) / 100.0)


def wins(speedup: float | None, noise_pct: float | None) -> bool:
    return speedup is not None and speedup >= threshold(noise_pct)


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
