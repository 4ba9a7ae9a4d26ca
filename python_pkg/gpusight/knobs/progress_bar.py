"""Lightning's progress bar redrawn less often: the script's own bar with ``refresh_rate=50``,
or, where the script makes none (Lightning's default bar), ``Trainer(...,
enable_progress_bar=False)``: the change the finding's patch makes (``fixes/framework_calls``).

The bar redraws at every batch and reads the values logged with ``prog_bar=True`` (on the GPU, a
wait for it); ``code.framework_callback`` names it where it takes a share of the step. Taken
into a re-run by the Trainer's constructor, patched as Lightning is imported: the bar in its
``callbacks`` given the refresh rate, or the keyword set. What the steps compute is unchanged:
the bar only reads what was logged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..after_import import after_import
from ..fixes.framework_calls import PROGRESS_BAR_CLASSES, REFRESH_EVERY
from .base import Arm, Group, Knob, Situation, Target, amdahl
from .framework_precision import LIGHTNING, _wrap_init

if TYPE_CHECKING:
    from ..report import Fix

FINDING = "code.framework_callback"


def slower_bar(kwargs: dict[str, Any], refresh: int | None) -> bool:
    """The Trainer's keyword arguments with its progress bar redrawn every ``refresh`` batches
    (its bar in ``callbacks``), or off (``refresh`` None, or no bar there); False where nothing
    changed."""
    callbacks = kwargs.get("callbacks")
    listed = callbacks if isinstance(callbacks, list | tuple) else [callbacks]
    bars = [c for c in listed if c is not None and _is_bar(c)]
    if refresh is not None and bars:
        for bar in bars:  # the rate the bar's own refresh_rate argument sets
            bar._refresh_rate = refresh
        return True
    if bars:  # Lightning refuses a bar in callbacks with the switch off
        kwargs["callbacks"] = [c for c in listed if c is not None and not _is_bar(c)]
    was_on = kwargs.get("enable_progress_bar") is not False
    kwargs["enable_progress_bar"] = False
    return was_on


def _is_bar(callback: Any) -> bool:
    return any(c.__name__ in PROGRESS_BAR_CLASSES for c in type(callback).__mro__)


class ProgressBar(Knob):
    name = "progress_bar"
    findings = (FINDING,)
    keys = ("progress_bar",)
    applied_as = "progress_bar"
    unapplied = "the script made no Lightning Trainer with its progress bar on here"

    def groups(self, s: Situation) -> list[Group]:
        cb = s.facts.get("framework_callback") or {}
        if FINDING not in s.ids or cb.get("name") not in PROGRESS_BAR_CLASSES:
            return []
        share = float(cb.get("share_pct") or 0.0)
        value: int | str
        if cb.get("change") == f"refresh_rate={REFRESH_EVERY}":
            label, value = f"{cb['name']}(refresh_rate={REFRESH_EVERY})", REFRESH_EVERY
        else:
            label, value = "Trainer(..., enable_progress_bar=False)", "off"
        arm = Arm("progress_bar", label, {"progress_bar": value}, FINDING)
        return [Group("progress_bar", share, [arm], bound=amdahl(share))]

    def not_planned(self, s: Situation) -> str:
        return "the run's Lightning progress bar took under 3 % of its step, or it had none"

    def validate(self, changes: dict[str, Any]) -> str | None:
        v = changes.get("progress_bar")
        if v is None or v == "off" or (isinstance(v, int) and not isinstance(v, bool) and v > 0):
            return None
        return 'progress_bar takes "off" or a refresh rate (batches between redraws)'

    def install(self, hooks: Target) -> None:
        undo: list[Callable[[], None]] = []

        v = hooks.changes.get("progress_bar")
        refresh = v if isinstance(v, int) and not isinstance(v, bool) else None

        def patch(mod: Any) -> None:
            change = functools.partial(slower_bar, refresh=refresh)
            undo.append(_wrap_init(mod.Trainer, change, lambda: hooks.inj.hit("progress_bar")))

        undo.append(after_import(dict.fromkeys(LIGHTNING.modules, patch)))
        for fn in undo:
            hooks.inj.on_undo(fn)

    def fix(self, arm: Arm, items: int | None, facts: dict[str, Any]) -> Fix:
        from ..fixes.framework_calls import progress_bar_patch
        from ..fixes.patch_files import with_patch
        from ..report import Fix
        from .user_lines import site_text

        f = Fix(text=f"Redraw Lightning's progress bar less often: {arm.label}.", code=arm.label,
                language="python")  # fmt: skip
        site = facts.get("forward_site") or {}
        text = site_text(site) if site.get("file") else None
        if text is None:
            return f
        shown = str(site.get("shown") or site["file"])
        made = progress_bar_patch(text, shown)
        if made is None or made[1] not in arm.label:
            return f
        return with_patch(f, made[0], {shown: text})
