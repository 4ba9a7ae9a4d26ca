"""Where the model and its inputs live: ``code.cpu_model``, ``code.device_mismatch`` and
``code.dataparallel``, one function each (a model left partly on the CPU: ``split_placement``).
Pure; never imports torch.
"""

from __future__ import annotations

from ..fixes import fix
from ..fixes import workload as _workload_snippets  # noqa: F401  (registers the snippets)
from ..fixes.workload_patches import to_device_fix
from ..report import Evidence, Finding, Impact
from .split_placement import split_model
from .step_view import StepView
from .workload_evidence import mean
from .workload_impacts import GPU_MATH_SPEEDUP_MIN, MAX_RANGE, idle_impact, range_impact, rnd


def cpu_model(view: StepView) -> list[Finding]:
    """``code.cpu_model``: the model on the CPU beside a usable GPU; all of it: where some of
    the modules the step calls are on a GPU, the rest left behind is ``split_model``'s."""
    ev, total, p = view.ev, view.total, view.p
    out: list[Finding] = []
    if ev.cuda_available and p.param_devices == ["cpu"] and p.accelerator is None:
        host = mean(ev.framework_ms)
        # The model's math moves to the GPU: 5x faster there at the least, free at the most;
        # the rest of the step stays where it is.
        rest = max(total - host, 0.0)
        lo = total / (rest + host / GPU_MATH_SPEEDUP_MIN) if host > 0 else 1.0
        hi = total / rest if rest > 0 else MAX_RANGE
        out.append(
            Finding(
                id="code.cpu_model",
                severity="critical",
                title="The model runs on the CPU although a GPU is available",
                evidence=[
                    Evidence("model", p.module),
                    Evidence("parameters on", "cpu"),
                    Evidence("inputs on", ", ".join(p.input_devices) or None),
                    Evidence("CUDA devices available", ev.cuda_devices),
                    Evidence("host time in forward/backward/optimizer", rnd(host, 2), "ms/step"),
                ],
                impact=range_impact(
                    lo,
                    hi,
                    f"The forward/backward/optimizer time ({rnd(host, 1)} ms of the "
                    f"{rnd(total, 1)} ms step) would move to the GPU: from its math running 5x "
                    "faster there to it costing nothing, with the rest of the step unchanged. "
                    "gpusight run --what-if measures it.",
                ),
                fix=to_device_fix(
                    fix(
                        "Move the model (before building the optimizer) and each batch to the GPU.",
                        "placement.to_device",
                        device="cuda",
                    ),
                    ev.forward_source,
                ),
            )
        )
    return out


def device_mismatch(view: StepView) -> list[Finding]:
    """``code.device_mismatch``: parameters or inputs on more than one device; where parts of
    the model stay on the CPU beside the rest on a GPU, those parts by name (``split_model``)."""
    if view.p.cpu_modules:
        return split_model(view)
    share, p = view.share, view.p
    out: list[Finding] = []
    devices = sorted(set(p.param_devices) | set(p.input_devices))
    if len(set(p.param_devices)) > 1 or (
        p.param_devices and p.input_devices and set(p.input_devices) - set(p.param_devices)
    ):
        out.append(
            Finding(
                id="code.device_mismatch",
                severity="warn",
                title="Parameters and inputs live on different devices",
                evidence=[
                    Evidence("model", p.module),
                    Evidence("parameter devices", ", ".join(p.param_devices)),
                    Evidence("input devices", ", ".join(p.input_devices)),
                ],
                impact=idle_impact(share["copy"], "Copies between devices every step.")
                if share["copy"] > 0
                else Impact(basis="none", text="Each step moves tensors between devices."),
                fix=fix(
                    "Keep the whole model and its inputs on one device.",
                    "placement.one_device",
                    devices=", ".join(devices),
                ),
            )
        )
    return out


def dataparallel(view: StepView) -> list[Finding]:
    """``code.dataparallel``: the model wrapped in ``nn.DataParallel``."""
    p = view.p
    out: list[Finding] = []
    if p.dataparallel:
        n = p.dataparallel_devices
        # Without a GPU it wraps nothing: each call goes straight to the model, at no cost here.
        idle = not n
        out.append(
            Finding(
                id="code.dataparallel",
                severity="info" if idle else "warn",
                title="torch.nn.DataParallel wraps the model",
                detail=(
                    "DataParallel replicates the model on every GPU each step and drives them from "
                    "one Python thread; PyTorch recommends DistributedDataParallel, even on one "
                    "node."
                ),
                evidence=[Evidence("DataParallel devices", n)],
                impact=Impact(
                    basis="none",
                    text=(
                        "Without a GPU it passes each call straight to the model: no cost here. "
                        if idle
                        else ""
                    )
                    + "On one GPU it only adds scatter/gather; on several it is bound by one "
                    "Python thread.",
                ),
                fix=fix(
                    "Drop the wrapper on one GPU; use DistributedDataParallel on several.",
                    "parallel.ddp",
                    gpus=max(1, n or 1),
                ),
            )
        )
    return out
