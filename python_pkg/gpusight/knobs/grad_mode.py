"""``torch.inference_mode()`` around a forward that records autograd history no backward reads.

Planned where the watch saw a forward-only loop (inference) run with autograd on
(``infer.grad_enabled``): in a re-run each outermost call of the model runs under
``torch.inference_mode()``, the fix's own switch, so the measured run is the fix's. A script that
then changes a model output in place outside inference mode raises, and its row says so (a
crashed run is never a gain). ``gpusight.diagnose_inference`` measures the same change on the
user's forward in the kernel (``whatif/inference.py``), under this knob's label and finding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import After, Arm, Group, Knob, Situation, Target

if TYPE_CHECKING:
    from ..report import Fix

FINDING = "infer.grad_enabled"
KEY = "inference_mode"
# The step's host share it may act on at least: recording costs host time per op and keeps
# activations alive; the group goes after the changes that act on the step's larger shares.
MIN_PRIORITY = 10.0


class GradMode(Knob):
    name = "grad_mode"
    keys = (KEY,)
    findings = (FINDING,)
    applied_as = KEY
    order = 5  # entered first, left last: the whole call, the other knobs' changes inside it

    local_label = "torch.inference_mode()"
    infer_label = local_label
    local_hooks = True  # the kernel's forward-only timing (``diagnose_inference``)

    def infer_arm(self, cuda: bool) -> Arm | str:
        return Arm(self.name, self.infer_label, {KEY: True}, FINDING)

    def needs_model(self, changes: dict[str, Any]) -> bool:
        return self.owns(changes)

    def groups(self, s: Situation) -> list[Group]:
        if s.mode != "forward" or FINDING not in s.ids:
            return []
        arm = Arm(self.name, "torch.inference_mode() around the model's calls", {KEY: True},
                  FINDING)  # fmt: skip
        return [Group(self.name, max(s.host_share, MIN_PRIORITY), [arm])]

    def not_planned(self, s: Situation) -> str:
        if s.mode != "forward":
            return "the loop trains (a backward reads the autograd history)"
        return "the forward already runs without autograd recording"

    def before(self, hooks: Target, module: Any, call: Any) -> tuple[Any, After | None]:
        mode = hooks.torch.inference_mode()
        mode.__enter__()
        hooks.inj.hit(KEY)

        def leave(output: Any) -> Any:
            mode.__exit__(None, None, None)
            return output

        return call, leave

    def fix(self, arm: Arm, items: int | None, facts: dict[str, Any]) -> Fix:
        from ..fixes import fix

        return fix("Run inference under torch.inference_mode().", "infer.inference_mode")
