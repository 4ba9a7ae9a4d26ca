"""Text tables: columns aligned, figures formatted alike."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def fmt(x: Any, nd: int = 2) -> str:
    """A figure for a table: ``-`` for None, a float to ``nd`` decimals, anything else as is."""
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return str(x)


def signed(x: Any, nd: int = 1) -> str:
    """As ``fmt``, with the float's sign always shown (a difference)."""
    if x is None:
        return "-"
    return f"{x:+.{nd}f}" if isinstance(x, float) else str(x)


def cell(x: float | None, spec: str) -> str:
    """A figure in a format spec (``"+.1f"``, ``">8.2f"``), ``-`` for None."""
    return "-" if x is None else format(x, spec)


def aligned(rows: Sequence[Sequence[Any]], rule: bool = False) -> str:
    """Rows of cells (the first the header), each column left-aligned to its widest cell, two
    spaces apart; with ``rule``, a line of dashes under the header."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    if rule:
        lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
