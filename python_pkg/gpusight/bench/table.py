"""Benchmark rows as a compact plain-text table for the terminal."""

from __future__ import annotations

from collections.abc import Sequence

from ..report import Benchmark, Finding


def _num(value: float) -> str:
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def format_table(benchmarks: Sequence[Benchmark]) -> str:
    """One line a benchmark: id, value and unit, share of the ceiling, ceiling; skipped ones say
    why (rows skipped for the same reason are folded into one line)."""
    rows: list[tuple[str, str, str, str]] = [("benchmark", "value", "of ceiling", "ceiling")]
    folded: dict[str, list[str]] = {}
    for b in benchmarks:
        if b.value is None:
            folded.setdefault(b.skipped or "no value", []).append(b.id)
            continue
        value = f"{_num(b.value)} {b.unit}"
        share = f"{100 * b.value / b.ceiling:.0f} %" if b.ceiling else ""
        ceiling = f"{_num(b.ceiling)}" if b.ceiling else ""
        rows.append((b.id, value, share, ceiling))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = []
    if len(rows) > 1:
        w0, w1, w2, w3 = widths
        for r in rows:
            lines.append(f"{r[0]:<{w0}}  {r[1]:>{w1}}  {r[2]:>{w2}}  {r[3]:>{w3}}")
    for reason, ids in folded.items():
        names = ids[0] if len(ids) == 1 else f"{ids[0]} (+{len(ids) - 1} more)"
        lines.append(f"{names}: skipped: {reason}")
    return "\n".join(line.rstrip() for line in lines)


def format_findings(findings: Sequence[Finding]) -> str:
    return "\n".join(f"[{f.severity}] {f.id}: {f.title}" for f in findings)
