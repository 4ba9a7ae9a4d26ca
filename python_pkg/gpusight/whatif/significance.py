"""Whether a measured speedup is a gain at all: its noise band must leave 1x out.

The report shows a what-if's noise as a band of ``speedup * (1 ± noise_pct / 100)`` (the UI's
whisker); a gain whose band reaches down to 1x is "not significant" there, so it must never be a
warn or critical finding either. The rule is the knobs' one (``knobs/gain_rule.py``).
"""

from __future__ import annotations

from ..knobs.gain_rule import band_excludes_one

__all__ = ["band_excludes_one"]
