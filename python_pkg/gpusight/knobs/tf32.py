"""TF32 for float32 matmuls and convolutions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import Arm, Group, Knob, Local, Situation, Target

if TYPE_CHECKING:
    from ..report import Fix

FINDING = "cfg.tf32_disabled"
TF32 = "tf32"
"""torch's value of a backend's ``fp32_precision`` that computes float32 in TF32."""
MIN_COMPUTE_SHARE = 20.0


def tf32_on(flags: dict[str, Any]) -> bool:
    return bool(flags.get("matmul.allow_tf32")) or flags.get("float32_matmul_precision") in (
        "high",
        "medium",
    )


def tf32_state(flags: dict[str, Any]) -> tuple[bool, bool]:
    """(matmul TF32 on, cudnn TF32 on) from torch's settings as ``whatif/restore`` reads them."""
    matmul = flags.get("float32_matmul_precision") != "highest" or (
        flags.get("fp32_precision.cuda.matmul") == TF32
    )
    return matmul, bool(flags.get("cudnn.allow_tf32"))


class Tf32(Knob):
    name = "tf32"
    findings = (FINDING,)
    keys = ("tf32",)
    applied_as = "tf32"
    stacks_on_batch = True

    def needs_model(self, changes: dict[str, Any]) -> bool:
        return self.owns(changes)

    def groups(self, s: Situation) -> list[Group]:
        if not s.cuda or not s.model or tf32_on(s.flags) or s.compute_share < MIN_COMPUTE_SHARE:
            return []
        # Under autocast the matmuls and convolutions already run in half precision: TF32
        # reaches only what autocast leaves in float32, so it goes after the changes the
        # watch's findings point at (on the H200 conv_nchw_amp's TF32 run took the budget that
        # its channels_last finding needed).
        weight = 0.2 if s.model.get("autocast") else 0.9
        arm = Arm("tf32", "TF32 for float32 matmuls and convolutions", {"tf32": True}, FINDING)
        return [Group("tf32", s.compute_share * weight, [arm], bound=s.kernels_bound)]

    def flags_on(self, torch: Any) -> None:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        torch.set_float32_matmul_precision("high")

    def prepare(self, hooks: Target, module: Any) -> None:
        self.flags_on(hooks.torch)
        hooks.inj.hit("tf32")

    setup_code = (
        'torch.set_float32_matmul_precision("high")',
        "torch.backends.cudnn.allow_tf32 = True",
    )

    local_finding = FINDING
    local_label = "TF32 matmuls and convolutions"

    def local_arm(self, ctx: Local) -> Arm | str:
        if not ctx.cuda:
            return "no CUDA device"
        if ctx.torch.cuda.get_device_capability(ctx.device)[0] < 8:
            return "this GPU has no TF32 (needs compute capability 8.0 or newer)"
        if ctx.half_model:
            return "the model's weights are half precision: TF32 only affects float32"
        if all(tf32_state(ctx.flags)):
            return "TF32 is already on for matmuls and cudnn"
        return Arm(self.name,
                   "torch.set_float32_matmul_precision('high') and cudnn.allow_tf32 = True",
                   {"tf32": True}, FINDING)  # fmt: skip

    def fix(self, arm: Arm, items: int | None, facts: dict[str, Any]) -> Fix:
        from ..fixes import fix
        from ..fixes.statement_patches import tf32_cell_text, tf32_patch
        from .user_lines import patched_statement

        f = fix("Allow TF32 for float32 matmuls and convolutions.", "torch.enable_tf32")
        # After the import torch of the file that calls the model, else of the loader's.
        return patched_statement(
            f,
            facts,
            lambda src: tf32_cell_text(src.compiled, src.torch_alias or "torch"),
            lambda text, _line, shown: tf32_patch(text, shown),
            [facts.get("forward_site"), facts.get("loader_site")],
        )
