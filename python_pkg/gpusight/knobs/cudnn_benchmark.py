"""``torch.backends.cudnn.benchmark``: cuDNN times its algorithms and keeps the fastest."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import Arm, Group, Knob, Local, Situation, Target

if TYPE_CHECKING:
    from ..report import Fix

FINDING = "cfg.cudnn_benchmark_off"


class CudnnBenchmark(Knob):
    name = "cudnn_benchmark"
    findings = (FINDING,)
    keys = ("cudnn_benchmark",)
    applied_as = "cudnn_benchmark"

    def needs_model(self, changes: dict[str, Any]) -> bool:
        return self.owns(changes)

    def groups(self, s: Situation) -> list[Group]:
        m = s.model
        if not s.cuda or not m or not m.get("has_conv") or s.flags.get("cudnn.benchmark"):
            return []
        arm = Arm("cudnn_benchmark", "cudnn.benchmark=True", {"cudnn_benchmark": True}, FINDING)
        return [Group("cudnn_benchmark", s.compute_share * 0.4, [arm], bound=s.kernels_bound)]

    def flags_on(self, torch: Any) -> None:
        torch.backends.cudnn.benchmark = True

    def prepare(self, hooks: Target, module: Any) -> None:
        self.flags_on(hooks.torch)
        hooks.inj.hit("cudnn_benchmark")

    local_warmup = 1  # cuDNN times its algorithms at a shape's first step
    setup_code = ("torch.backends.cudnn.benchmark = True",)

    local_finding = FINDING
    local_label = "torch.backends.cudnn.benchmark = True"

    def local_arm(self, ctx: Local) -> Arm | str:
        torch = ctx.torch
        if not ctx.cuda:
            return "no CUDA device"
        if not torch.backends.cudnn.is_available():
            return "cudnn is not available in this torch build"
        if ctx.flags.get("cudnn.benchmark"):
            return "cudnn.benchmark is already on"
        nn = torch.nn
        tuned = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d,
                 nn.ConvTranspose3d, nn.RNNBase)  # fmt: skip
        if not ctx.has_module(*tuned):
            return "the model has no convolutions or RNNs (what cudnn.benchmark tunes)"
        return Arm(self.name, self.local_label, {"cudnn_benchmark": True}, FINDING)

    def fix(self, arm: Arm, items: int | None, facts: dict[str, Any]) -> Fix:
        from ..fixes import fix

        return fix("Let cuDNN pick the fastest algorithms.", "torch.cudnn_benchmark")
