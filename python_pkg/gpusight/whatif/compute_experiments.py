"""The compute experiments on cached batches (the loader is not what they measure): autocast,
channels_last, TF32, cudnn.benchmark and torch.compile.
"""

from __future__ import annotations

import os
import shutil

import torch
from torch import nn

from .arms import planned
from .context import Context
from .experiment import Experiment, Outcome
from .restore import read_flags

CONV_TYPES = (
    nn.Conv1d,
    nn.Conv2d,
    nn.Conv3d,
    nn.ConvTranspose1d,
    nn.ConvTranspose2d,
    nn.ConvTranspose3d,
)
RNN_TYPES = (nn.RNNBase,)
# torch.compile of a training step rarely finishes in less than this; below it, skip honestly.
COMPILE_MIN_S = 45.0


def _half_model(ctx: Context) -> bool:
    params = list(ctx.work.model.parameters())
    return bool(params) and all(p.dtype in (torch.float16, torch.bfloat16) for p in params)


class Autocast(Experiment):
    key = "autocast"
    finding_id = "load.amp_unused"
    label = "bf16 autocast (fp16 + GradScaler without bf16)"
    group = "compute"

    def dtype(self) -> str:
        return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"

    def applies(self, ctx: Context) -> str | None:
        if not ctx.cuda:
            return "no CUDA device: bf16 autocast on the CPU is not a speedup gpusight measures"
        if _half_model(ctx):
            return "the model's weights are already half precision"
        if (
            self.dtype() == "float16"
            and ctx.work.step_fn is not None
            and ctx.work.optimizer is not None
        ):
            return "fp16 needs a GradScaler inside your step_fn (this GPU has no bf16)"
        return None

    def apply(self, ctx: Context) -> Outcome:
        dt = self.dtype()
        variant = planned(f"autocast {dt}", autocast="bfloat16" if dt == "bfloat16" else "float16")
        out = self.measure_one(
            ctx,
            variant,
            f"torch.autocast('cuda', dtype=torch.{dt})"
            + (" with a GradScaler" if dt == "float16" else ""),
            params={"dtype": dt},
        )
        out.params.update(dtype=dt)
        return out


class ChannelsLast(Experiment):
    key = "channels_last"
    finding_id = "load.channels_last"
    label = "channels_last memory format"
    group = "compute"

    def applies(self, ctx: Context) -> str | None:
        if not ctx.has_module(nn.Conv2d):
            return "the model has no 2-d convolutions"
        return None

    def apply(self, ctx: Context) -> Outcome:
        variant = planned("channels_last", channels_last=True)
        return self.measure_one(
            ctx, variant, "model and 4-d inputs in torch.channels_last memory format"
        )


def tf32_state() -> tuple[bool, bool]:
    """(matmul TF32 on, cudnn TF32 on) as torch would run them now."""
    flags = read_flags()
    matmul = flags["float32_matmul_precision"] != "highest" or (
        flags.get("fp32_precision.cuda.matmul") == "tf32"
    )
    conv = bool(flags["cudnn.allow_tf32"])
    return matmul, conv


class TF32(Experiment):
    key = "tf32"
    finding_id = "cfg.tf32_disabled"
    label = "TF32 matmuls and convolutions"
    group = "compute"

    def applies(self, ctx: Context) -> str | None:
        if not ctx.cuda:
            return "no CUDA device"
        if torch.cuda.get_device_capability(ctx.device)[0] < 8:
            return "this GPU has no TF32 (needs compute capability 8.0 or newer)"
        if _half_model(ctx):
            return "the model's weights are half precision: TF32 only affects float32"
        if all(tf32_state()):
            return "TF32 is already on for matmuls and cudnn"
        return None

    def apply(self, ctx: Context) -> Outcome:
        return self.measure_one(
            ctx,
            planned("TF32", tf32=True),
            "torch.set_float32_matmul_precision('high') and cudnn.allow_tf32 = True",
        )


class CudnnBenchmark(Experiment):
    key = "cudnn_benchmark"
    finding_id = "cfg.cudnn_benchmark_off"
    label = "torch.backends.cudnn.benchmark = True"
    group = "compute"

    def applies(self, ctx: Context) -> str | None:
        if not ctx.cuda:
            return "no CUDA device"
        if not torch.backends.cudnn.is_available():  # type: ignore[no-untyped-call]
            return "cudnn is not available in this torch build"
        if torch.backends.cudnn.benchmark:
            return "cudnn.benchmark is already on"
        if not ctx.has_module(*CONV_TYPES, *RNN_TYPES):
            return "the model has no convolutions or RNNs (what cudnn.benchmark tunes)"
        return None

    def apply(self, ctx: Context) -> Outcome:
        return self.measure_one(
            ctx,
            planned("cudnn.benchmark", cudnn_benchmark=True),
            "torch.backends.cudnn.benchmark = True",
        )


def _has_cxx() -> bool:
    return any(shutil.which(c) for c in (os.environ.get("CXX", "g++"), "g++", "c++", "clang++"))


class Compile(Experiment):
    key = "compile"
    finding_id = "load.launch_bound"
    label = "torch.compile"
    group = "compute"

    def applies(self, ctx: Context) -> str | None:
        if not hasattr(torch, "compile"):
            return "this torch has no torch.compile"
        try:
            import torch._dynamo as dynamo

            if not dynamo.is_dynamo_supported():  # type: ignore[attr-defined]
                return "torch.compile does not support this Python version"
        except Exception as exc:
            return f"torch.compile is unavailable: {type(exc).__name__}: {exc}"
        if type(ctx.work.model).__name__ == "OptimizedModule":
            return "the model is already compiled"
        if not ctx.cuda and not _has_cxx():
            return "no C++ compiler for torch.compile on the CPU (install g++)"
        if not ctx.affordable(COMPILE_MIN_S):
            return (
                f"budget exhausted: torch.compile usually needs {COMPILE_MIN_S:.0f} s or more to "
                f"compile a training step, {max(0.0, ctx.budget.left()):.0f} s were left "
                "(raise budget_s)"
            )
        return None

    def cost_s(self, ctx: Context) -> float:
        return COMPILE_MIN_S

    def apply(self, ctx: Context) -> Outcome:
        out = self.measure_one(
            ctx, planned("torch.compile", compile=True), "model = torch.compile(model)"
        )
        out.params["compile_s"] = (
            out.what_if.params.get("compile_s") if out.what_if.params else None
        )
        out.notes.append(
            f"torch.compile took {out.params['compile_s']} s to compile (once per process); "
            "the speedup is for steps after that."
        )
        return out
