"""``torch.compile`` of the model: fused kernels, and with ``mode="reduce-overhead"`` its calls
replayed as CUDA graphs (one launch for many).

Taken into a re-run by compiling the model's ``forward`` at its first changed call (the model's
own hooks, which apply the other knobs, stay outside the compiled code). Compiling takes seconds
to minutes: the re-run's warm-up is longer by ``extra_warmup`` steps so that the measured steps
are compiled ones, and the compile time is read from the warm-up's steps and said apart from
the steady gain, with the steps it takes to pay for itself. The CUDA-graph arm runs only where
``graph_safety`` finds nothing that a replay cannot follow; otherwise its row names the blocker
and its line.
"""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING, Any

from .base import Arm, Group, Knob, Local, Situation, Target, share
from .graph_safety import blockers

if TYPE_CHECKING:
    from ..report import Fix

FINDING = "load.launch_bound"
MODES = ("default", "reduce-overhead")
MIN_LAUNCH_SHARE = 15.0
"""% of the step idle between launches below which compiling has little to give back (the
launch finding's own bar)."""
FORECAST_S = 60.0
"""A compiled run's time beyond the control's, for the budget: compiling forward and backward
of a model the size the launch-bound steps have took 20-60 s on the H200."""
LOCAL_MIN_S = 45.0
"""The in-process arm's least cost: compiling a training step rarely takes less (below it the
row is skipped, honestly)."""


def _label(mode: str) -> str:
    return "torch.compile(model)" if mode == "default" else f"torch.compile(model, mode={mode!r})"


def compile_s(arm_facts: dict[str, Any] | None, ref_facts: dict[str, Any] | None,
              step_ms: float | None) -> float | None:  # fmt: skip
    """Seconds the compiled run's warm-up took beyond the control's warm-up and its own extra
    steady steps: the compile, paid once per process."""
    arm_w = (arm_facts or {}).get("warmup_step_ms") or []
    ref_w = (ref_facts or {}).get("warmup_step_ms") or []
    if not arm_w or not ref_w or step_ms is None:
        return None
    extra = max(0, len(arm_w) - len(ref_w)) * step_ms
    return max(0.0, (float(sum(arm_w)) - float(sum(ref_w)) - extra) / 1000.0)


class Compile(Knob):
    name = "compile"
    findings = (FINDING,)
    keys = ("compile",)
    applied_as = "compile"
    unapplied = "the model's forward was not compiled"
    order = 90  # after the other knobs have moved or relaid the model
    extra_warmup = 6

    def needs_model(self, changes: dict[str, Any]) -> bool:
        return self.owns(changes)

    def validate(self, changes: dict[str, Any]) -> str | None:
        mode = changes.get("compile")
        if mode and mode not in MODES:
            return f"compile must be one of {', '.join(MODES)} (got {mode!r})"
        return None

    def groups(self, s: Situation) -> list[Group]:
        m = s.model
        launch = share(s.facts, "launch_overhead")
        if not s.cuda or not m or s.facts.get("compiled") or launch < MIN_LAUNCH_SHARE:
            return []
        if m.get("name") in ("DataParallel", "DistributedDataParallel"):
            return []
        arms = [
            Arm("compile", _label("default"), {"compile": "default"}, FINDING, extra_s=FORECAST_S)
        ]
        graph = Arm("compile", _label("reduce-overhead"), {"compile": "reduce-overhead"},
                    FINDING, extra_s=FORECAST_S)  # fmt: skip
        blocked = blockers(s.facts)
        if blocked:
            graph.skipped = "CUDA graphs are unsafe here: " + blocked[0].text()
        arms.append(graph)
        return [Group("compile", launch * 0.5, arms)]

    def prepare(self, hooks: Target, module: Any) -> None:
        mode = hooks.changes.get("compile")
        kwargs = {} if mode == "default" else {"mode": mode}
        module.forward = hooks.torch.compile(module.forward, **kwargs)
        hooks.inj.on_undo(lambda: vars(module).pop("forward", None))
        hooks.inj.hit("compile")

    def cost(
        self, arm_facts: dict[str, Any] | None, ref_facts: dict[str, Any] | None,
        step_ms: float | None, ref_step_ms: float | None,
    ) -> dict[str, float]:  # fmt: skip
        secs = compile_s(arm_facts, ref_facts, step_ms)
        if secs is None:
            return {}
        out = {"compile_s": round(secs, 1)}
        if step_ms and ref_step_ms and ref_step_ms > step_ms:
            out["break_even_steps"] = float(round(secs * 1000.0 / (ref_step_ms - step_ms)))
        return out

    local_warmup = 1  # the first call compiles (timed on its own as compile_s)
    local_hooks = True  # the copy's forward compiled by ``prepare``, its hooks outside

    def local_first_step(self, seconds: float) -> dict[str, Any]:
        return {"compile_s": round(seconds, 1)}

    setup_code = ("model = torch.compile(model)",)
    local_finding = FINDING
    local_label = "torch.compile"
    local_min_s = LOCAL_MIN_S

    def local_arm(self, ctx: Local) -> Arm | str:
        torch = ctx.torch
        if not hasattr(torch, "compile"):
            return "this torch has no torch.compile"
        try:
            import torch._dynamo as dynamo

            if not dynamo.is_dynamo_supported():  # type: ignore[attr-defined]
                return "torch.compile does not support this Python version"
        except Exception as exc:
            return f"torch.compile is unavailable: {type(exc).__name__}: {exc}"
        if type(ctx.model).__name__ == "OptimizedModule":
            return "the model is already compiled"
        if not ctx.cuda and not _has_cxx():
            return "no C++ compiler for torch.compile on the CPU (install g++)"
        if not ctx.affordable(LOCAL_MIN_S):
            return (
                f"budget exhausted: torch.compile usually needs {LOCAL_MIN_S:.0f} s or more to "
                f"compile a training step, {max(0.0, ctx.seconds_left()):.0f} s were left "
                "(raise budget_s)"
            )
        return Arm(self.name, "model = torch.compile(model)", {"compile": "default"}, FINDING)

    def local_outcome(self, row: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        secs = row.get("compile_s")
        note = (
            f"torch.compile took {secs} s to compile (once per process); "
            "the speedup is for steps after that."
        )
        return {"compile_s": secs}, [note]

    def fix(self, arm: Arm, items: int | None, facts: dict[str, Any]) -> Fix:
        from ..fixes import fix
        from ..fixes.workload_patches import compile_fix
        from ..report import Fix
        from .user_lines import forward_source, patched_setup

        mode = str(arm.changes.get("compile") or "default")
        graphs = " (its calls replayed as CUDA graphs)" if mode == "reduce-overhead" else ""
        arg = "" if mode == "default" else f"mode={mode!r}"
        if facts.get("framework") == "transformers":
            # The Trainer compiles the model it wraps: its own switch, not a line of the script.
            values: dict[str, object] = {"torch_compile": True}
            if mode != "default":
                values["torch_compile_mode"] = mode
            said = ", ".join(f"{k}={v!r}" for k, v in values.items())
            text = f"Compile the model through the Trainer: TrainingArguments(..., {said}){graphs}."
            f = Fix(text=text, code=f"TrainingArguments(..., {said})", language="python")
            return patched_setup(f, facts, values)
        f = fix(
            f"Compile the model once it is built, before the loop: model.compile({arg}){graphs}; "
            "in place, so its state_dict keeps its keys.",
            "launch.compile_mode",
            mode=mode,
        )
        return compile_fix(f, forward_source(facts), mode)


def _has_cxx() -> bool:
    return any(shutil.which(c) for c in (os.environ.get("CXX", "g++"), "g++", "c++", "clang++"))
