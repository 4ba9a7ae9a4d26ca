"""Milliseconds as text, with the precision their size needs; the same rules as the widget's
``formatMs`` (``src/charts/format.ts``), so the text and the charts say the same figure."""

from __future__ import annotations

import math


def format_ms(ms: float) -> str:
    """0.0033 ms, 0.12 ms, 1.23 ms, 12.3 ms, 1,234 ms: a 30 us step is not "0.0 ms"."""
    a = abs(ms)
    if a == 0:
        return "0 ms"
    if not math.isfinite(ms):
        return f"{ms} ms"
    if a < 0.01:
        # Two significant digits, trailing zeros dropped (d3's ".2~r").
        decimals = 1 - math.floor(math.log10(a))
        return f"{ms:.{decimals}f}".rstrip("0").rstrip(".") + " ms"
    if a < 10:
        return f"{ms:.2f} ms"
    if a < 100:
        return f"{ms:.1f} ms"
    return f"{ms:,.0f} ms"
