"""``fused=True`` in the script's optimizer: the whole update as a few kernels.

Taken into a re-run by wrapping the constructors of the optimizers that accept it, before the
script builds its own: the optimizer the script makes is then fused, whatever its call says. An
optimizer that cannot be fused (parameters off CUDA, a dtype the fused kernels do not take) is
built as the script asked, and the re-run says the change did not take effect.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .base import Arm, Group, Knob, Situation, Target

if TYPE_CHECKING:
    from ..report import Fix

FINDING = "load.optimizer_unfused"
FUSED = ("Adam", "AdamW", "SGD")
MIN_TENSORS = 64
"""Fewer parameter tensors launch too few kernels for a fused update to matter."""


def eligible(optimizer: dict[str, Any] | None, cuda: bool) -> bool:
    """An optimizer (the watch's facts of it) that a re-run can build fused."""
    o = optimizer or {}
    return bool(
        cuda
        and o.get("cuda")
        and o.get("name") in FUSED
        and not o.get("fused")
        and int(o.get("tensors") or 0) >= MIN_TENSORS
    )


def _fused_init(
    orig: Callable[..., Any], hit: Callable[[], None], inside: list[int]
) -> Callable[..., Any]:
    """``orig`` building its optimizer fused; ``inside`` counts the wrapped constructors under
    way, so that AdamW's, which calls Adam's, counts once."""

    @functools.wraps(orig)
    def __init__(opt: Any, params: Any, *args: Any, **kwargs: Any) -> None:
        if inside[0]:
            orig(opt, params, *args, **kwargs)
            return
        params = list(params)  # a generator could be read only once, and twice is needed
        fused = {**kwargs, "fused": True}
        if fused.get("foreach"):
            fused["foreach"] = None  # fused and foreach together are an error
        inside[0] += 1
        try:
            orig(opt, params, *args, **fused)
        except (RuntimeError, ValueError, TypeError):
            orig(opt, params, *args, **kwargs)  # not fusable here: as the script asked
            return
        finally:
            inside[0] -= 1
        hit()

    return __init__


class FusedOptimizer(Knob):
    name = "fused_optimizer"
    findings = (FINDING,)
    keys = ("fused_optimizer",)
    applied_as = "fused_optimizer"
    unapplied = "the script built no optimizer that takes fused=True here"

    def groups(self, s: Situation) -> list[Group]:
        o = s.facts.get("optimizer")
        if not eligible(o, s.cuda):
            return []
        arm = Arm(
            "fused_optimizer",
            f"fused=True in {o['name']}(...)",  # type: ignore[index]
            {"fused_optimizer": True},
            FINDING,
        )
        # A launch-bound step's host time is where a fused update gives time back.
        return [Group("fused_optimizer", s.host_share * 0.6, [arm])]

    def install(self, hooks: Target) -> None:
        optim = hooks.torch.optim
        inside = [0]
        for name in FUSED:
            cls = getattr(optim, name, None)
            if cls is None or "__init__" not in vars(cls):
                continue
            orig = vars(cls)["__init__"]
            cls.__init__ = _fused_init(orig, lambda: hooks.inj.hit("fused_optimizer"), inside)
            hooks.inj.on_undo(functools.partial(setattr, cls, "__init__", orig))

    def fix(self, arm: Arm, items: int | None, facts: dict[str, Any]) -> Fix:
        from ..fixes import fix
        from ..fixes.workload_patches import optimizer_fused_fix
        from ..rules.workload_evidence import CodeSource

        o = facts.get("optimizer") or {}
        name = str(o.get("name") or "AdamW")
        site = o.get("site") or {}
        f = fix(
            f"Build the optimizer with fused=True: {name}(..., fused=True).",
            "optim.fused",
            site=f"{site.get('shown')}:{site.get('line')}" if site else "the optimizer's line",
            name=name,
            tensors=int(o.get("tensors") or 0),
        )
        src = _source(site, CodeSource)
        return optimizer_fused_fix(f, src, o.get("foreach"))


def _source(site: dict[str, Any], code_source: Any) -> Any:
    """The optimizer's line as a patch reads it, from the facts' site (None where unknown)."""
    path, line = site.get("file"), site.get("line")
    if not path or not line:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError:
        return None
    return code_source(str(site.get("shown") or path), text, int(line))
