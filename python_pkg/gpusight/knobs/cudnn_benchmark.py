"""``torch.backends.cudnn.benchmark``: cuDNN times its algorithms and keeps the fastest."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from .base import Arm, Group, Knob, Situation, Target

if TYPE_CHECKING:
    from ..report import Fix

FINDING = "cfg.cudnn_benchmark_off"


class CudnnBenchmark(Knob):
    name = "cudnn_benchmark"
    keys = ("cudnn_benchmark",)
    applied_as = "cudnn_benchmark"
    titles: ClassVar[dict[str, str]] = {
        "cfg.cudnn_benchmark_off": "cudnn.benchmark picks faster convolution algorithms"
    }

    def needs_model(self, changes: dict[str, Any]) -> bool:
        return self.owns(changes)

    def groups(self, s: Situation) -> list[Group]:
        m = s.model
        if not s.cuda or not m or not m.get("has_conv") or s.flags.get("cudnn.benchmark"):
            return []
        arm = Arm("cudnn_benchmark", "cudnn.benchmark=True", {"cudnn_benchmark": True}, FINDING)
        return [Group("cudnn_benchmark", s.compute_share * 0.4, [arm])]

    def prepare(self, hooks: Target, module: Any) -> None:
        hooks.torch.backends.cudnn.benchmark = True
        hooks.inj.hit("cudnn_benchmark")

    def fix(self, arm: Arm, items: int | None, facts: dict[str, Any]) -> Fix:
        from ..fixes import fix

        return fix("Let cuDNN pick the fastest algorithms.", "torch.cudnn_benchmark")
