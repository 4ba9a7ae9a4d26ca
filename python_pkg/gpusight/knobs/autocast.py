"""bf16 (or fp16) mixed precision: through the training framework's own switch where the script
trains through one (``framework_precision``), else autocast around the model's forward."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..after_import import after_import
from . import framework_precision
from .base import After, Arm, Group, Knob, Local, Situation, Target

if TYPE_CHECKING:
    from ..report import Fix

FINDING = "load.amp_unused"
WAS_OFF = "autocast_was_off"
"""Model calls that found autocast off: in the kernel, which runs the whole step under it, the
user's ``step_fn`` turned it off around the forward."""
# Planned for a float32 model whose compute takes at least this share of the step (%).
MIN_COMPUTE_SHARE = 30.0


class Autocast(Knob):
    name = "autocast"
    findings = (FINDING,)
    keys = ("autocast", "autocast_via")
    model_facts = (("autocast", "autocast"), ("autocast_dtype", "autocast_dtype"))
    applied_as = "autocast"
    order = 90  # entered last, so it covers the call as the model makes it
    stacks_on_batch = True

    def owns(self, changes: dict[str, Any]) -> bool:
        return bool(changes.get("autocast"))

    def needs_model(self, changes: dict[str, Any]) -> bool:
        return self.owns(changes) and not changes.get("autocast_via")

    def groups(self, s: Situation) -> list[Group]:
        model = s.model
        if not s.cuda or not model or model.get("autocast"):
            return []
        if FINDING not in s.ids and s.compute_share < MIN_COMPUTE_SHARE:
            return []
        fw = framework_precision.by_name(s.facts.get("framework"))
        if fw is not None:
            arm = Arm("autocast", f"bf16 through the framework's switch: {fw.switch}",
                      {"autocast": "bfloat16", "autocast_via": fw.name}, FINDING)  # fmt: skip
        else:
            arm = Arm("autocast", "bf16 autocast around the model's forward",
                      {"autocast": "bfloat16"}, FINDING)  # fmt: skip
        return [Group("autocast", s.compute_share + 1.0, [arm], bound=s.kernels_bound)]

    def validate(self, changes: dict[str, Any]) -> str | None:
        if changes.get("autocast") not in (None, "bfloat16", "float16"):
            return "autocast must be 'bfloat16' or 'float16'"
        via = changes.get("autocast_via")
        if via is not None and framework_precision.by_name(via) is None:
            names = ", ".join(fw.name for fw in framework_precision.FRAMEWORKS)
            return f"autocast_via must be one of {names}"
        if via is not None and not changes.get("autocast"):
            return "autocast_via needs autocast"
        return None

    def took_effect(self, facts: dict[str, Any] | None, changes: dict[str, Any]) -> str | None:
        if not self.owns(changes) or ((facts or {}).get("injected") or {}).get("autocast"):
            return None
        fw = framework_precision.by_name(changes.get("autocast_via"))
        if fw is not None:
            return f"the re-run made no object whose switch turns it on ({fw.switch})"
        return self.unapplied or self.name

    def install(self, hooks: Target) -> None:
        fw = framework_precision.by_name(hooks.changes.get("autocast_via"))
        if fw is None:
            return
        dtype = str(hooks.changes["autocast"])

        def hit(name: str) -> None:
            if name == fw.name:
                hooks.inj.hit("autocast")

        undo: list[Callable[[], None]] = []  # each class patched, then the import callbacks
        switches = framework_precision.switches(dtype, hit, undo)
        undo.append(after_import({m: switches[m] for m in fw.modules}))
        for fn in undo:
            hooks.inj.on_undo(fn)

    def before(self, hooks: Target, module: Any, call: Any) -> tuple[Any, After | None]:
        torch = hooks.torch
        dtype = getattr(torch, hooks.changes["autocast"])
        weight = next(module.parameters(), None)
        device_type = weight.device.type if weight is not None else _device_type(call, hooks)
        if not torch.is_autocast_enabled(device_type):
            hooks.inj.hit(WAS_OFF)
        ctx = torch.autocast(device_type, dtype=dtype, cache_enabled=not hooks.capturing)
        ctx.__enter__()
        hooks.inj.hit("autocast")

        def leave(output: Any) -> Any:
            ctx.__exit__(None, None, None)
            return output

        return call, leave

    local_finding = FINDING
    local_label = "bf16 autocast (fp16 + GradScaler without bf16)"
    local_hooks = True
    infer_label = "bf16 autocast"

    def infer_arm(self, cuda: bool) -> Arm | str:
        if not cuda:
            return "GPU only: bf16 autocast pays off on Tensor Cores"
        return Arm(self.name, self.infer_label, {"autocast": "bfloat16"}, FINDING)

    def infer_params(self, arm: Arm) -> dict[str, Any]:
        return {"dtype": arm.changes["autocast"]}

    def step_context(self, torch: Any, changes: dict[str, Any], device_type: str) -> Any:
        # The kernel's own step computes the loss under autocast too, as its snippet does.
        dtype = changes.get("autocast")
        return torch.autocast(device_type, dtype=getattr(torch, dtype)) if dtype else None

    def scales_loss(self, changes: dict[str, Any]) -> bool:
        return changes.get("autocast") == "float16"

    def local_notes(self, hits: dict[str, int]) -> list[str]:
        if not hits.get(WAS_OFF):
            return []
        return [
            "Your step_fn runs the model's forward with autocast turned off "
            "(torch.autocast(..., enabled=False) or a disabled amp flag): the autocast "
            "what-if turned it back on for the forward. In your code, enable it there."
        ]

    def local_arm(self, ctx: Local) -> Arm | str:
        if not ctx.cuda:
            return "no CUDA device: bf16 autocast on the CPU is not a speedup gpusight measures"
        if ctx.half_model:
            return "the model's weights are already half precision"
        dt = "bfloat16" if ctx.torch.cuda.is_bf16_supported() else "float16"
        if dt == "float16" and ctx.step_fn is not None and ctx.optimizer is not None:
            return "fp16 needs a GradScaler inside your step_fn (this GPU has no bf16)"
        # The whole step runs under autocast (the driver's own step adds the GradScaler).
        label = f"torch.autocast('cuda', dtype=torch.{dt})"
        return Arm(self.name, label + (" with a GradScaler" if dt == "float16" else ""),
                   {"autocast": dt}, FINDING)  # fmt: skip

    def local_params(self, arm: Arm, ctx: Local) -> dict[str, Any]:
        return {"dtype": arm.changes["autocast"]}

    def local_outcome(self, row: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        return {"dtype": row["dtype"]}, []

    def local_snippet(self, key: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        bf16 = params.get("dtype") == "bfloat16"
        return ("whatif.autocast_bf16" if bf16 else "whatif.autocast_fp16"), {}

    def fix(self, arm: Arm, items: int | None, facts: dict[str, Any]) -> Fix:
        from ..fixes import fix
        from ..fixes.statement_patches import autocast_patch, autocast_text
        from .user_lines import patched_statement

        dtype = str(arm.changes["autocast"])
        fw = framework_precision.by_name(arm.changes.get("autocast_via"))
        if fw is not None:
            from .user_lines import patched_setup

            switch = _SWITCHES[fw.name](dtype == "float16")
            return patched_setup(_framework_fix(fw, dtype), {**facts, "framework": fw.name}, switch)
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


# Each framework's precision switch as keywords of the call that sets it up.
_SWITCHES: dict[str, Callable[[bool], dict[str, object]]] = {
    "transformers": lambda fp16: {"fp16": True} if fp16 else {"bf16": True},
    "lightning": lambda fp16: {"precision": "16-mixed" if fp16 else "bf16-mixed"},
    "accelerate": lambda fp16: {"mixed_precision": "fp16" if fp16 else "bf16"},
}


def _framework_fix(fw: framework_precision.Framework, dtype: str) -> Fix:
    from ..fixes import fix

    fp16 = dtype == "float16"
    switch = fw.switch_fp16 if fp16 else fw.switch
    text = f"Turn on mixed precision where the script trains: {switch}."
    if fw is framework_precision.TRANSFORMERS:
        return fix(text, "precision.trainer", dtype=dtype, bf16=not fp16, fp16=fp16)
    if fw is framework_precision.LIGHTNING:
        return fix(text, "precision.lightning", precision="16-mixed" if fp16 else "bf16-mixed")
    return fix(text, "precision.accelerate", mixed_precision="fp16" if fp16 else "bf16")


def _device_type(call: Any, hooks: Target) -> str:
    """Where a model without weights computes: its inputs' device."""
    found = hooks.tensors_of(call)
    return str(found[0].device.type) if found else "cpu"
