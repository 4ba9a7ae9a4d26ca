"""How the in-process driver measures a knob's change: the knob (``knobs/``) says what the change
is and whether it applies; a procedure here times it on copies of the user's objects.

``OnCached``: the knob's one arm against the unchanged step, both on the same batches cached from
the user's loader (the loader is not what it measures), in interleaved repetitions.
"""

from __future__ import annotations

from ..knobs.base import Knob
from .context import Context, Skip
from .experiment import Experiment, Outcome


class OnCached(Experiment):
    """A compute knob's arm, A/B on cached batches."""

    group = "compute"

    def __init__(self, knob: Knob) -> None:
        self.knob = knob
        self.key = knob.name
        self.label = knob.local_label
        self.finding_id = knob.local_finding
        self.startup_s = knob.local_min_s

    def applies(self, ctx: Context) -> str | None:
        got = self.knob.local_arm(ctx)
        return got if isinstance(got, str) else None

    def cost_s(self, ctx: Context) -> float:
        return self.startup_s or super().cost_s(ctx)

    def apply(self, ctx: Context) -> Outcome:
        arm = self.knob.local_arm(ctx)
        if isinstance(arm, str):
            raise Skip(arm)
        out = self.measure_one(ctx, arm, arm.label, params=self.knob.local_params(arm))
        params, notes = self.knob.local_outcome(out.what_if.params or {})
        out.params.update(params)
        out.notes.extend(notes)
        return out
