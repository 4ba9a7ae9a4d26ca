"""A change run on top of another's winner.

Precision and memory layout (``Knob.stacks_on_batch``) add work per launch (casts, layout
conversions) that a larger batch amortises: on a launch-bound step they lose alone and gain on
top of a larger batch. The arm run on top of the batch winner (its changes merged in) is judged
against the batch winner's own run, by the one gain rule; a gain there makes it a winner.
A knob that ``stacks_on`` another (the DataLoader's settings on the winning workers) is planned
again on that winner and each of its arms run on top of it (``on_winner``). Pure: the driver
runs what this plans.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..knobs import Arm, Group, Situation, by_name
from ..knobs.base import Scope
from .plan import combine


def stacks(group: str) -> bool:
    knob = by_name(group)
    return knob is not None and knob.stacks_on_batch


def grows_batch(group: str) -> bool:
    knob = by_name(group)
    return knob is not None and knob.grows_batch


def batch_winner(winners: list[Arm]) -> Arm | None:
    return next((a for a in winners if grows_batch(a.group)), None)


def on_top(arm: Arm, base: Arm) -> Arm:
    """``arm`` run on top of the winning batch ``base``: both changes, the batch's pace."""
    scope: Scope = "compute_only" if "compute_only" in (arm.scope, base.scope) else "end_to_end"
    return Arm(arm.group, f"{arm.label} on top of {base.label}", {**base.changes, **arm.changes},
               arm.finding_id, slowdown=max(arm.slowdown, base.slowdown),
               items_factor=base.items_factor, scope=scope,
               extra_s=max(arm.extra_s, base.extra_s), stacked_on=base.label)  # fmt: skip


def on_winner(
    g: Group, winners: list[Arm], facts: dict[str, Any], bases: dict[str, Arm] | None = None
) -> tuple[Group, Arm | None]:
    """``g`` planned again on top of the winner its knob ``stacks_on`` (each arm run with the
    winner's changes, judged against the winner's run), and that winner; ``g`` and None where
    its knob stacks on nothing or that knob has no winner. ``bases``: the arm each won group
    is stacked on where that is not its winner (``Knob.stack_base``)."""
    knob = by_name(g.name)
    base = next((a for a in winners if knob is not None and a.group == knob.stacks_on), None)
    if knob is None or base is None:
        return g, None
    base = (bases or {}).get(base.group, base)
    again = next((x for x in knob.groups_on(Situation.of(facts), base) if x.name == g.name),
                 Group(g.name, g.priority))  # fmt: skip
    again.arms = [a if a.skipped else on_top(a, base) for a in again.arms]
    return again, base


def is_together(top: Arm, winners: list[Arm]) -> bool:
    """Whether ``top``'s run is the winners' combined run too (the batch and it alone won)."""
    return combine(winners) == top.changes


def over_budget(need: float, left: float, keep: float) -> str | None:
    """Why a run on top of the batch winner is not made (None: it fits). ``keep``: what the
    winners' combined run will take, which goes first (it is the answer)."""
    if need + keep <= left:
        return None
    left = max(0.0, left)
    if keep and need <= left:
        return (
            f"needs ~{need:.0f} s; the {left:.0f} s left are kept for the winners "
            f"together (~{keep:.0f} s; raise --budget for this one too)"
        )
    return f"over the budget: needs ~{need:.0f} s, {left:.0f} s left (raise --budget)"


def fitting(
    winners: list[Arm], need: Callable[[list[Arm]], float], left: float
) -> tuple[list[Arm], list[Arm]]:
    """The winners whose combined run fits the ``left`` seconds (``need``: a combined run's
    forecast), and those left out: all where they fit, else fewer, each time leaving out the
    winner whose leaving out saves the most (``torch.compile``'s compiling, say; on a tie the
    later winner, the smaller gain as a rule), never the batch winner that others won on top
    of. At least two, or none: ``([], winners)``."""
    fit, batch = list(winners), batch_winner(winners)
    while need(fit) > left:
        if len(fit) <= 2:
            return [], list(winners)
        cuts = [a for a in reversed(fit) if a is not batch]
        cut = min(cuts, key=lambda a: need([w for w in fit if w is not a]))
        fit = [w for w in fit if w is not cut]
    return fit, [a for a in winners if all(a is not w for w in fit)]


def _runs(g: Group) -> bool:
    return any(a.skipped is None for a in g.arms)


def plan_lines(groups: list[Group]) -> list[str]:
    """The groups in the order they run, each with its arms, and where a stacking group gets its
    second try: after it and the batch group both ran."""
    lines: list[str] = []
    batch_ran = False
    waiting: list[str] = []
    for g in groups:
        knob = by_name(g.name)
        on = (
            f"; planned again on the winning {knob.stacks_on} if one wins"
            if knob and knob.stacks_on
            else ""
        )
        lines.append(f"{g.name} ({len(g.arms)}{on})")
        if stacks(g.name) and _runs(g):
            waiting.append(
                f"{g.name} again on the winning batch if it loses alone (or its share of the "
                "step alone is too small to show)"
            )
        if grows_batch(g.name) and _runs(g):
            batch_ran = True
        if batch_ran:
            lines.extend(waiting)
            waiting = []
    return lines
