"""Milliseconds as text: the same figures as the widget's formatMs (src/charts/format.ts)."""

from __future__ import annotations

import pytest
from gpusight.durations import format_ms


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0.0, "0 ms"),
        (0.0033, "0.0033 ms"),
        (0.005, "0.005 ms"),
        (0.033, "0.03 ms"),
        (0.456, "0.46 ms"),
        (1.234, "1.23 ms"),
        (12.34, "12.3 ms"),
        (1234.4, "1,234 ms"),
    ],
)
def test_format_ms(ms: float, text: str) -> None:
    assert format_ms(ms) == text
