"""Which changes a ``--what-if`` re-runs, in what order. Pure.

The baseline run's facts (``facts.py``) say what the script has: a DataLoader and its settings,
a model and where it lives, the flags in force, where the step's time went. Each knob of the
registry (``knobs/``) turns them into groups of arms (one group per kind of change); groups are
ordered by the share of the step their change can act on, so the budget goes first where the
time goes. Two groups are sweeps that continue while they gain: DataLoader workers and the
batch.
"""

from __future__ import annotations

import math
from typing import Any

from ..knobs import Arm, Group, plan_groups
from ..knobs.gain_rule import sweep_goes_on, threshold
from ..knobs.loader import beyond_cores

__all__ = [
    "Arm",
    "Group",
    "beyond_cores",
    "combine",
    "hidden_by_noise",
    "plan",
    "sweep_goes_on",
    "together_label",
]


def plan(facts: dict[str, Any]) -> list[Group]:
    """The groups of arms for this run, highest priority first (skipped arms say why); a
    group whose runs pay a start-up of their own (compiling: ``Arm.extra_s``) after the
    others, as the kernel's ``diagnose`` runs it last. On the H100 (run31) the compile arms
    took 27 to 42 s a run, lost each time, and left pyg_gcn_graph_batches without its
    combined row and lightning_small_batch without its second control."""
    groups = plan_groups(facts)
    groups.sort(key=lambda g: (starts_up(g), -g.priority))
    return groups


def starts_up(g: Group) -> bool:
    """Whether ``g``'s runs pay a fixed start-up beyond the script's own (compiling)."""
    return any(a.extra_s > 0 for a in g.arms if not a.skipped)


def hidden_by_noise(g: Group, noise_pct: float) -> str | None:
    """Why ``g``'s arms are not run: the most they can gain would not clear the noise band
    (None: it could). On the H200 a 4-arm workers sweep of a step waiting 11 % for data (at most
    1.12x) ran inside a ±22 % band, and took the budget the batch needed."""
    need = threshold(noise_pct)
    if g.bound is None or g.bound >= need:
        return None
    reach = f"a gain must reach {need:.2f}x" if math.isfinite(need) else "no gain can clear it"
    return (
        f"at most {g.bound:.2f}x from the share of the step it acts on, inside the "
        f"noise band (±{noise_pct:.0f}%: {reach})"
    )


def combine(winners: list[Arm]) -> dict[str, Any]:
    """The winners' changes in one run (the best point of each sweep)."""
    out: dict[str, Any] = {}
    for arm in winners:
        out.update(arm.changes)
    return out


def together_label(winners: list[Arm], left_out: list[Arm] | None = None) -> str:
    """The combined run's label: the winners whose changes reach it. A winner whose every
    setting a later one sets again (the workers, where pinning won on top of other workers)
    ran as that one's part, which its label says ("... on top of ..."). ``left_out``: the
    winners the budget kept out of it (``stacking.fitting``), named first."""
    shown = [
        a
        for i, a in enumerate(winners)
        if not a.changes or not set(a.changes) <= set(combine(winners[i + 1 :]))
    ]
    but = ", ".join(a.label for a in left_out or [])
    head = f"the winners together but {but} (over the budget)" if but else "all winners together"
    return f"{head}: " + ", ".join(a.label for a in shown)
