"""The model and its batches on the GPU, where the script left them on the CPU."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import After, Arm, Group, Knob, Situation, Target

if TYPE_CHECKING:
    from ..report import Fix

FINDING = "code.cpu_model"


def pinned_copy(t: Any, device: Any) -> Any:
    """``t`` on ``device``, pinned first: a CUDA copy from pageable memory waits for the GPU's
    queue, a host sync a step that the fix's pinned batches do not pay (on the H200, cpu_model's
    moved model measured 3.6x with pageable inputs, 4.7x pinned; its fix 6.2-7.9x)."""
    if device.type == "cuda" and t.device.type == "cpu" and not t.is_pinned():
        t = t.pin_memory()
    return t.to(device, non_blocking=True)


class ToDevice(Knob):
    name = "to_device"
    findings = (FINDING,)
    keys = ("to_device",)
    applied_as = "to_device"
    unapplied = "the model was already there"
    order = 10  # inputs move first; outputs go back last
    moves_parameters = True

    def needs_model(self, changes: dict[str, Any]) -> bool:
        return self.owns(changes)

    def groups(self, s: Situation) -> list[Group]:
        # The model left on the CPU: everything else waits for this.
        if not s.cuda or not s.model or s.model.get("param_devices") != ["cpu"]:
            return []
        arm = Arm("to_device", "model and batches on the GPU", {"to_device": "cuda"}, FINDING)
        return [Group("to_device", 200.0, [arm])]

    def prepare(self, hooks: Target, module: Any) -> None:
        dev = hooks.torch.device(hooks.changes["to_device"])
        if next(module.parameters()).device != dev:
            module.to(dev)  # in place: the optimizer keeps the same Parameter objects
            hooks.device = dev
            hooks.inj.hit("to_device")
        else:
            hooks.inj.notes.append(f"the model was already on {dev}")

    def before(self, hooks: Target, module: Any, call: Any) -> tuple[Any, After | None]:
        dev = hooks.device
        if dev is None:
            return call, None
        came_from: list[Any] = []

        def move(t: Any) -> Any:
            if t.device != dev:
                came_from.append(t.device)
                return pinned_copy(t, dev)
            return t

        new = hooks.map_tensors(call, move)
        if not came_from:
            return new, None
        back = came_from[0]

        def home(output: Any) -> Any:
            hooks.inj.hit("outputs_back")
            return hooks.map_tensors(output, lambda t: t.to(back))

        return new, home

    def fix(self, arm: Arm, items: int | None, facts: dict[str, Any]) -> Fix:
        from ..fixes import fix
        from ..fixes.workload_patches import to_device_fix
        from .user_lines import forward_source

        device = str(arm.changes.get("to_device") or "cuda")
        f = fix("Move the model and each batch to the GPU.", "placement.to_device", device="cuda")
        return to_device_fix(f, forward_source(facts), device)
