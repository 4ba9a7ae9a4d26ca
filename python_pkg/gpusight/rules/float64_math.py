"""``load.float64``: the watched model runs in float64, most often by accident (a model made
``.double()`` to match numpy's float64 arrays). float64 never runs on the TF32 or bf16 Tensor
Cores (autocast leaves float64 ops alone), and outside data-center GPUs its rate is 1/32 to
1/64 of float32's.

The estimate: the step's float64 matmul/conv time at the float32 rate instead (the datasheet
rates of this GPU, ``bench/fp64_peaks.py``; TF32's where torch allows it for matmuls), and at
most its other float64 kernels at twice their speed (half the bytes). On a CPU float32 runs the
math at about twice float64's rate. Where the GPU's rate or the matmul time is not known, the
range runs over what it could be, and the impact's text says so. Pure; never imports torch.
"""

from __future__ import annotations

from ..bench.fp64_peaks import Fp64Rate, fp64_rate
from ..fixes import fix
from ..fixes import workload as _workload_snippets  # noqa: F401  (registers the snippets)
from ..fixes.float32_patch import float32_fix, forward_names
from ..report import Evidence, Finding, Impact, SourceLine
from .step_view import StepView
from .workload_evidence import Float64Line, Float64Use
from .workload_impacts import range_impact, rnd
from .workload_thresholds import (
    CPU_FP32_OVER_FP64,
    FLOAT64_CRITICAL_SPEEDUP,
    FP64_BYTES_RATIO,
    FP64_RATIO_UNKNOWN,
)

_LINE_LABELS = {
    "model": "model made float64 at",
    "default": "default dtype set to float64 at",
    "data": "float64 tensor made at",
    "source": "float64 in the source at",
}


def _gain(total: float, saved: float) -> float:
    return total / max(1e-9, total - saved)


def _share(use: Float64Use) -> float:
    """The float64 share of the model's parameters: of the model's work, what runs in float64."""
    return use.params_float64 / use.params if use.params else 1.0


def _cpu_impact(view: StepView, use: Float64Use) -> Impact:
    math = view.split["compute"] * _share(use)
    hi = _gain(view.total, math * (1.0 - 1.0 / CPU_FP32_OVER_FP64))
    return range_impact(
        1.0,
        hi,
        f"On a CPU float32 runs the math at about {CPU_FP32_OVER_FP64:g}x float64's rate (twice "
        f"the values per SIMD instruction, half the bytes): the model's {rnd(math, 2)} ms of "
        f"float64 work in the {rnd(view.total, 2)} ms step would take about half, from no gain "
        "where the step is Python and dispatch rather than math.",
    )


def _rate_text(rate: Fp64Rate | None, fp32: float | None, tf32: bool, name: str | None) -> str:
    if rate is None or not fp32:
        return (
            f"gpusight has no float64 rate for {name or 'this GPU'}: float32 matmuls run from "
            f"{FP64_RATIO_UNKNOWN[0]:g}x (parts whose float64 Tensor Cores match their float32 "
            f"rate, A100/H100) to {FP64_RATIO_UNKNOWN[1]:g}x (Ada, GA10x) float64's rate."
        )
    how = "TF32, allowed here" if tf32 else "plain float32: TF32 is off for matmuls"
    return (
        f"On the {rate.peaks.name} float64 matmuls run at {rate.tflops:g} TFLOP/s "
        f"({rate.source}), float32 ones at {fp32:g} ({how}): {fp32 / rate.tflops:.1f}x."
    )


def _gpu_impact(view: StepView, use: Float64Use) -> Impact:
    total, compute, w = view.total, view.split["compute"], view.w
    rate = fp64_rate(use.device_name)
    tf32 = bool(view.ev.tf32_matmul)
    fp32 = None
    if rate is not None:
        fp32 = rate.peaks.tf32 if tf32 and rate.peaks.tf32 else rate.peaks.fp32
    lo_r, hi_r = (fp32 / rate.tflops,) * 2 if rate is not None and fp32 else FP64_RATIO_UNKNOWN
    text = _rate_text(rate, fp32, tf32, use.device_name)
    if w is not None and w.gpu:
        m64 = min(w.matmul_fp64_ms, compute)
        other = max(0.0, compute - m64) * _share(use)
        saved_lo = m64 * (1.0 - 1.0 / max(lo_r, 1.0))
        saved_hi = m64 * (1.0 - 1.0 / max(hi_r, 1.0)) + other * (1.0 - 1.0 / FP64_BYTES_RATIO)
        text += (
            f" The step's float64 matmul/conv kernels take {rnd(m64, 2)} ms of its "
            f"{rnd(total, 2)} ms; its other float64 kernels ({rnd(other, 2)} ms) read half the "
            f"bytes in float32, at most {FP64_BYTES_RATIO:g}x faster."
        )
    else:
        work = compute * _share(use)
        saved_lo, saved_hi = 0.0, work * (1.0 - 1.0 / max(hi_r, 1.0))
        text += (
            f" No kernel trace says how much of the GPU's {rnd(compute, 2)} ms a step is float64 "
            "matmuls: from none of it to all."
        )
    if rate is not None and rate.peaks.bf16:
        text += (
            f" Beyond float32, bf16 autocast runs the matmuls on Tensor Cores at up to "
            f"{rate.peaks.bf16 / rate.tflops:.0f}x the float64 rate ({rate.peaks.bf16:g} TFLOP/s)."
        )
    return range_impact(_gain(total, saved_lo), _gain(total, saved_hi), text)


def _line_evidence(ln: Float64Line) -> Evidence:
    return Evidence(
        _LINE_LABELS.get(ln.target, "float64 at"),
        ln.what,
        source=SourceLine(file=ln.file, line=ln.line, code=ln.code, count=ln.count),
    )


def _work_evidence(view: StepView) -> list[Evidence]:
    """The time the float64 work takes: the trace's matmul/conv kernels on a GPU, the host's
    compute on a CPU."""
    w = view.w
    if view.gpu_run and w is not None and w.gpu:
        return [Evidence("float64 matmul/conv kernels", rnd(w.matmul_fp64_ms, 3), "ms/step")]
    if not view.gpu_run:
        return [Evidence("host compute in the model", rnd(view.split["compute"], 3), "ms/step")]
    return []


def _fix_parts(use: Float64Use, x: str) -> str:
    model = next((ln for ln in use.lines if ln.target != "data"), None)
    data = next((ln for ln in use.lines if ln.target == "data"), None)
    verb = "makes it float64" if model is None or model.seen else "asks for float64"
    parts = [
        f"the model float32 where {model.file}:{model.line} {verb} ({model.what})"
        if model is not None
        else "the model float32 (model.float())"
    ]
    if "float64" in use.input_dtypes:
        parts.append(
            f"its inputs where {data.file}:{data.line} makes them ({data.what}(...).float(), "
            "or a.astype(np.float32) where the array is made)"
            if data is not None
            else f"its inputs ({x}.float(), or a.astype(np.float32) where the array is made)"
        )
    return " and ".join(parts)


def _title(use: Float64Use, gpu_run: bool) -> str:
    inputs = "float64" in use.input_dtypes
    if use.params_float64:
        what = "The model and its inputs are" if inputs else "The model's parameters are"
    else:
        what = "The model's inputs are"
    why = "no Tensor Cores, a fraction of float32's rate" if gpu_run else "about half float32's "
    return f"{what} float64: {why}" + ("" if gpu_run else "rate on a CPU")


def float64_math(view: StepView) -> list[Finding]:
    """``load.float64``: the model's parameters (or, for a model without any, its inputs) are
    float64."""
    use = view.ev.float64
    inputs = use is not None and "float64" in use.input_dtypes
    if use is None or not (use.params_float64 or (use.params == 0 and inputs)):
        return []
    impact = _gpu_impact(view, use) if view.gpu_run else _cpu_impact(view, use)
    low = impact.speedup_range[0] if impact.speedup_range else 1.0
    # The site the snippet names: the model's line first, else the data's.
    first = sorted(use.lines, key=lambda ln: ln.target == "data")[:1]
    site = f"{first[0].file}:{first[0].line}" if first else "the line that makes it float64"
    x = forward_names(view.ev.forward_source).get("x", "x")
    return [
        Finding(
            id="load.float64",
            severity="critical" if low >= FLOAT64_CRITICAL_SPEEDUP else "warn",
            title=_title(use, view.gpu_run),
            evidence=[
                Evidence("dtype", "float64"),
                Evidence("float64 parameters", use.params_float64),
                Evidence("parameters", use.params),
                Evidence("float64 modules", ", ".join(use.parts) or None),
                Evidence("model inputs", ", ".join(use.input_dtypes) or None),
                *_work_evidence(view),
                *(_line_evidence(ln) for ln in use.lines),
                *([Evidence("line not seen", use.unseen)] if use.unseen else []),
            ],
            impact=impact,
            fix=float32_fix(
                fix(
                    f"Make {_fix_parts(use, x)}; then run the forward under bf16 autocast.",
                    "precision.float32",
                    site=site,
                ),
                use.lines,
                view.ev.forward_source,
            ),
        )
    ]
