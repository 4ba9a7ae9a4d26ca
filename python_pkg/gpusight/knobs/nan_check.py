"""Hugging Face's Trainer without its per-step nan/inf check of the loss:
``TrainingArguments(..., logging_nan_inf_filter=False)``, the change ``code.host_sync``'s fix
writes where that check is the step's wait for the GPU (``rules/library_syncs``).

The check reads every step's loss from the GPU (``torch.isnan(tr_loss_step)``): the host waits
for the queued step before it queues the next. Taken into a re-run by the Trainer's arguments,
patched as ``transformers.training_args`` is imported. The steps compute the same: only the loss
the Trainer logs then counts a nan step's as any other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..after_import import after_import
from .base import Arm, Group, Knob, Situation, Target, amdahl, share
from .framework_precision import _wrap_post_init

if TYPE_CHECKING:
    from ..report import Fix

FINDING = "code.host_sync"
KEY = "nan_check"
OFF = "off"
LABEL = "TrainingArguments(..., logging_nan_inf_filter=False)"


def checks_nan(facts: dict[str, Any]) -> bool:
    """The run's syncs include the Trainer's nan/inf check of the loss."""
    from ..rules.library_syncs import NAN_CHECK, known_sync

    return any(
        known_sync(str(s.get("file") or ""), str(s.get("code") or "")) is NAN_CHECK
        for s in facts.get("syncs") or []
    )


def filter_off(args: Any) -> bool:
    """``args`` (a ``TrainingArguments`` before its ``__post_init__``) with the check off; False
    where it was off already."""
    if not getattr(args, "logging_nan_inf_filter", False):
        return False
    args.logging_nan_inf_filter = False
    return True


class NanCheck(Knob):
    name = KEY
    findings = (FINDING,)
    keys = (KEY,)
    applied_as = KEY
    unapplied = "the script made no Hugging Face TrainingArguments with logging_nan_inf_filter on"

    def groups(self, s: Situation) -> list[Group]:
        if FINDING not in s.ids or not checks_nan(s.facts):
            return []
        # What the check's wait can give back: the step's time the host waited for the GPU.
        waited = share(s.facts, "sync_stall")
        arm = Arm(self.name, LABEL, {KEY: OFF}, FINDING)
        return [Group(self.name, waited, [arm], bound=amdahl(waited))]

    def not_planned(self, s: Situation) -> str:
        return "the run's host syncs did not include Hugging Face's Trainer's nan/inf check"

    def validate(self, changes: dict[str, Any]) -> str | None:
        v = changes.get(KEY)
        return None if v is None or v == OFF else f'{KEY} takes "{OFF}"'

    def install(self, hooks: Target) -> None:
        def patch(mod: Any) -> None:
            hit = lambda: hooks.inj.hit(KEY)  # noqa: E731
            hooks.inj.on_undo(_wrap_post_init(mod.TrainingArguments, filter_off, hit))

        hooks.inj.on_undo(after_import({"transformers.training_args": patch}))

    def fix(self, arm: Arm, items: int | None, facts: dict[str, Any]) -> Fix:
        from ..report import Fix
        from ..rules.library_syncs import NAN_CHECK
        from .user_lines import patched_setup

        f = Fix(text=NAN_CHECK.text, code=NAN_CHECK.code, language="python")
        return patched_setup(f, {**facts, "framework": "transformers"}, dict(NAN_CHECK.setup or {}))
