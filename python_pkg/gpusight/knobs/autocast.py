"""bf16 (or fp16) autocast around the model's forward."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from .base import After, Arm, Group, Knob, Situation

if TYPE_CHECKING:
    from ..report import Fix

FINDING = "load.amp_unused"
# Planned for a float32 model whose compute takes at least this share of the step (%).
MIN_COMPUTE_SHARE = 30.0


class Autocast(Knob):
    name = "autocast"
    keys = ("autocast",)
    applied_as = "autocast"
    titles: ClassVar[dict[str, str]] = {"load.amp_unused": "bf16 autocast makes the step faster"}
    order = 90  # entered last, so it covers the call as the model makes it

    def needs_model(self, changes: dict[str, Any]) -> bool:
        return self.owns(changes)

    def groups(self, s: Situation) -> list[Group]:
        model = s.model
        if not s.cuda or not model or model.get("autocast"):
            return []
        if FINDING not in s.ids and s.compute_share < MIN_COMPUTE_SHARE:
            return []
        arm = Arm("autocast", "bf16 autocast around the model's forward",
                  {"autocast": "bfloat16"}, FINDING)  # fmt: skip
        return [Group("autocast", s.compute_share + 1.0, [arm])]

    def validate(self, changes: dict[str, Any]) -> str | None:
        if changes.get("autocast") not in (None, "bfloat16", "float16"):
            return "autocast must be 'bfloat16' or 'float16'"
        return None

    def before(self, hooks: Any, module: Any, call: Any) -> tuple[Any, After | None]:
        torch = hooks.torch
        dtype = getattr(torch, hooks.changes["autocast"])
        ctx = torch.autocast(next(module.parameters()).device.type, dtype=dtype)
        ctx.__enter__()
        hooks.inj.hit("autocast")

        def leave(output: Any) -> Any:
            ctx.__exit__(None, None, None)
            return output

        return call, leave

    def fix(self, arm: Arm, items: int | None, facts: dict[str, Any]) -> Fix:
        from ..fixes import fix
        from ..fixes.statement_patches import autocast_patch, autocast_text
        from .user_lines import patched_statement

        dtype = str(arm.changes["autocast"])
        f = fix("Run the forward under bf16 autocast.", "precision.autocast", dtype="bfloat16")
        return patched_statement(
            f,
            facts,
            lambda src: autocast_text(
                src.compiled, src.line, dtype=dtype, torch_alias=src.torch_alias
            ),
            lambda text, line, shown: autocast_patch(text, line, shown, dtype=dtype),
            [facts.get("forward_site")],
        )
