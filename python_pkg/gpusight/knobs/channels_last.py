"""channels_last for a convolutional model and its 4-d inputs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import After, Arm, Group, Knob, Local, Situation, Target

if TYPE_CHECKING:
    from ..report import Fix

FINDING = "load.channels_last"


class ChannelsLast(Knob):
    name = "channels_last"
    findings = (FINDING,)
    keys = ("channels_last",)
    model_facts = (("channels_last", "model_channels_last"),
                   ("input_channels_last", "input_channels_last"))  # fmt: skip
    applied_as = "channels_last"
    order = 20
    moves_parameters = True
    stacks_on_batch = True

    def needs_model(self, changes: dict[str, Any]) -> bool:
        return self.owns(changes)

    def groups(self, s: Situation) -> list[Group]:
        m = s.model
        if not s.cuda or not m or not m.get("has_conv") or m.get("channels_last"):
            return []
        weight = 0.95 if FINDING in s.ids else 0.5
        arm = Arm("channels_last", "channels_last for the model and its inputs",
                  {"channels_last": True}, FINDING)  # fmt: skip
        return [Group("channels_last", s.compute_share * weight, [arm], bound=s.kernels_bound)]

    def prepare(self, hooks: Target, module: Any) -> None:
        module.to(memory_format=hooks.torch.channels_last)
        hooks.relaid = True
        hooks.inj.hit("channels_last")

    def before(self, hooks: Target, module: Any, call: Any) -> tuple[Any, After | None]:
        cl = hooks.torch.channels_last
        return hooks.map_tensors(
            call, lambda t: t.contiguous(memory_format=cl) if t.dim() == 4 else t
        ), None

    def input_layout(self, torch: Any) -> Any:
        return torch.channels_last

    setup_code = ("model = model.to(memory_format=torch.channels_last)",)
    local_hooks = True
    local_finding = FINDING
    local_label = "channels_last memory format"

    def local_arm(self, ctx: Local) -> Arm | str:
        if not ctx.has_module(ctx.torch.nn.Conv2d):
            return "the model has no 2-d convolutions"
        return Arm(self.name, "model and 4-d inputs in torch.channels_last memory format",
                   {"channels_last": True}, FINDING)  # fmt: skip

    def fix(self, arm: Arm, items: int | None, facts: dict[str, Any]) -> Fix:
        from ..fixes import fix
        from ..fixes.workload_patches import channels_last_fix
        from .user_lines import forward_source

        f = fix("Use channels_last for the model and its inputs.", "memory.channels_last")
        inputs = ((facts.get("model") or {}).get("input_channels_last")) is False
        return channels_last_fix(f, forward_source(facts), inputs)
