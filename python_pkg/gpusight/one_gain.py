"""One gain per change in a report: a change measured twice shows one gain, and a skipped row
lends no number.

A report's what-if rows are measurements; its findings (and the rows' fixes) are the cards a user
acts on. A row that measured again a change some other row measured alone ("all winners
together" with one winner; ``params["repeat_of"]`` names the alone row's ``change``) keeps its
numbers as data, but it is no gain of its own: it loses its fix (the alone row's finding is that
change's card), and the finding keeps the alone gain and says, where the second measurement
differs beyond the noise, why. A skipped row carries no speedup, time after, noise or code.
"""

from __future__ import annotations

from .report import Finding, WhatIf

REPEAT_OF = "repeat_of"
"""The ``params`` key of a row that measured again the change of the row it names."""

MIN_DIFFERENCE = 0.03
"""Two measurements of one change closer than this (relative) are the same, whatever the noise."""

SCOPE_WORDS = {
    "end_to_end": "end to end, with the loader",
    "compute_only": "compute only, on cached batches",
}


def repeat_of(row: WhatIf) -> str | None:
    """The ``change`` of the row this one measured again, or None."""
    value = (row.params or {}).get(REPEAT_OF)
    return value if isinstance(value, str) else None


def shows_gain(row: WhatIf) -> bool:
    """Whether a report shows this row's speedup as a gain: measured, run, no repeat."""
    return row.speedup is not None and row.skipped is None and repeat_of(row) is None


def clear_skipped(row: WhatIf) -> None:
    """A row that did not run states no result: no speedup, time after, noise or code."""
    if row.skipped is None:
        return
    row.speedup = row.after_ms = row.noise_pct = None
    row.fix = None


def _noise(row: WhatIf) -> float:
    return abs(row.noise_pct or 0.0) / 100.0


def differs(alone: WhatIf, again: WhatIf) -> bool:
    """Whether two measurements of one change disagree by more than twice the wider noise."""
    if alone.speedup is None or again.speedup is None or alone.speedup <= 0:
        return False
    gap = abs(again.speedup / alone.speedup - 1.0)
    return gap > max(2.0 * max(_noise(alone), _noise(again)), MIN_DIFFERENCE)


def _noise_text(row: WhatIf) -> str:
    return f" ±{row.noise_pct:.1f}%" if row.noise_pct is not None else ""


def _time_reason(what: str, here: float | None, there: float | None, band: float) -> str | None:
    if not here or not there or abs(there / here - 1.0) <= band:
        return None
    more = "longer" if there > here else "less"
    return (
        f"{what} took {abs(there / here - 1.0) * 100:.0f}% {more} there ({there:.2f} ms "
        f"against {here:.2f} ms here)"
    )


def why_it_differs(alone: WhatIf, again: WhatIf) -> str:
    """One sentence: the second measurement, over which baseline, and what made it differ (a
    time that moved by more than the wider noise)."""
    band = max(_noise(alone), _noise(again), MIN_DIFFERENCE)
    reasons = [
        r
        for r in (
            _time_reason("the unchanged step", alone.before_ms, again.before_ms, band),
            _time_reason("the changed step", alone.after_ms, again.after_ms, band),
        )
        if r
    ]
    if alone.scope and again.scope and alone.scope != again.scope:
        reasons.append(f"it timed {SCOPE_WORDS[again.scope]}, this gain {SCOPE_WORDS[alone.scope]}")
    if _noise(again) > 2.0 * _noise(alone) and again.noise_pct is not None:
        reasons.append(f"its noise (±{again.noise_pct:.1f}%) is wider")
    why = "; ".join(reasons) or "the two runs were timed at different moments of a noisy machine"
    assert again.speedup is not None
    return (
        f"Measured again in another run ({again.change}): {again.speedup:.2f}x"
        f"{_noise_text(again)}, over a second baseline of its own: {why}. The gain shown is "
        "this change's own measurement, against its own baseline."
    )


def _card_of(findings: list[Finding], alone: WhatIf) -> Finding | None:
    """The finding whose gain is the alone row's (None: its gain came from another row)."""
    f = next((f for f in findings if f.id == alone.finding_id), None)
    if f is None or f.impact.speedup is None or alone.speedup is None:
        return None
    return f if round(f.impact.speedup, 2) == round(alone.speedup, 2) else None


def fold_repeat(findings: list[Finding], rows: list[WhatIf], again: WhatIf) -> None:
    """``again`` measured a change another row measured alone: its card is that row's."""
    name = repeat_of(again)
    alone = next((r for r in rows if r.change == name and repeat_of(r) is None), None)
    again.fix = None  # the alone row's finding carries the change's code, once
    if alone is None or again.speedup is None:
        return
    card = _card_of(findings, alone)
    if card is None:
        return
    if differs(alone, again):
        card.impact.text = f"{card.impact.text} {why_it_differs(alone, again)}".strip()
    else:
        card.impact.text = (
            f"{card.impact.text} Measured again in another run ({again.change}): the same "
            "within the noise."
        ).strip()


def one_gain_per_change(findings: list[Finding], rows: list[WhatIf]) -> None:
    """Apply the rule to a report's findings and what-if rows (in place)."""
    for row in rows:
        clear_skipped(row)
    for row in rows:
        if repeat_of(row) is not None:
            fold_repeat(findings, rows, row)
