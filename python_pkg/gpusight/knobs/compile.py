"""torch.compile / CUDA graphs: named for launch-bound steps, not yet run from outside."""

from __future__ import annotations

from .base import Arm, Group, Knob, Situation

SKIPPED = (
    "not tried from outside the script: compiling takes longer than a what-if run, and CUDA "
    "graphs need static shapes and inputs; measure it with gpusight.diagnose(), or apply "
    "launch.compile and compare with gpusight diff"
)


class Compile(Knob):
    name = "compile"

    def groups(self, s: Situation) -> list[Group]:
        if not s.cuda or not s.model or "load.launch_bound" not in s.ids:
            return []
        arm = Arm("compile", "torch.compile / CUDA graphs", {}, "load.launch_bound",
                  skipped=SKIPPED)  # fmt: skip
        return [Group("compile", 0.0, [arm])]
