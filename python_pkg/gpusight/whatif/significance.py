"""Whether a measured speedup is a gain at all: its noise band must leave 1x out.

The report shows a what-if's noise as a band of ``speedup * (1 ± noise_pct / 100)`` (the UI's
whisker); a gain whose band reaches down to 1x is "not significant" there, so it must never be a
warn or critical finding either.
"""

from __future__ import annotations


def band_excludes_one(speedup: float, noise_pct: float | None) -> bool:
    """True when the whole noise band of ``speedup`` lies above 1x (no noise: above 1x)."""
    noise = abs(noise_pct or 0.0) / 100.0
    return speedup * (1.0 - noise) > 1.0
