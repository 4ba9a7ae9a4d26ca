"""How the GPU's work is shaped, one function per finding (or per pair that shares its
evidence): launch-bound steps, a small batch, float32 matmuls and NCHW convolutions, the peak
memory against the capacity, an optimizer that updates tensor by tensor. Pure; never imports
torch.
"""

from __future__ import annotations

from ..fixes import fix
from ..fixes import workload as _workload_snippets  # noqa: F401  (registers the snippets)
from ..fixes.workload_patches import (
    autocast_fix,
    channels_last_fix,
    command_batch_fix,
    knob_batch_fix,
    loader_batch_fix,
    optimizer_fused_fix,
)
from ..report import Evidence, Finding, Impact
from .host_line_rows import forward_on_its_line
from .step_view import StepView
from .workload_evidence import OptimizerInfo
from .workload_impacts import (
    batch_impact,
    idle_impact,
    pct,
    range_impact,
    rnd,
    severity_of,
    site_text,
)
from .workload_thresholds import (
    CHANNELS_LAST_RECOVERY,
    FP32_MATMUL_CRITICAL_PCT,
    FP32_MATMUL_MIN_MS,
    FP32_MATMUL_SHARE,
    FUSED_RECOVERY,
    HEADROOM_BUSY_PCT,
    HEADROOM_SHARE,
    HEADROOM_TARGET_SHARE,
    LAUNCH_IDLE_CRITICAL_PCT,
    LAUNCH_IDLE_PCT,
    LAUNCH_IDLE_WARN_PCT,
    LAUNCH_RECOVERY,
    MANY_SHAPES,
    NCHW_CONV_SHARE,
    OOM_CRITICAL_SHARE,
    OOM_RISK_SHARE,
    OPTIMIZER_CPU_SHARE,
    OPTIMIZER_CRITICAL_PCT,
    OPTIMIZER_LAUNCH_SHARE,
    OPTIMIZER_MIN_TENSORS,
    OPTIMIZER_SHARE_PCT,
    SMALL_BATCH_BUSY_PCT,
    SMALL_BATCH_LAUNCH_PCT,
    SMALL_BATCH_MAX,
    TENSOR_CORE_RECOVERY,
    TRANSPOSE_SHARE,
)

FUSED_OPTIMIZERS = ("Adam", "AdamW", "SGD")
"""The torch.optim classes whose CUDA update takes ``fused=True`` (torch >= 2.4 for SGD)."""


_PHASE_LABELS = {"forward": "forward", "backward": "backward", "optimizer": "optimizer.step()"}


def phase_evidence(by_phase: dict[str, float]) -> list[Evidence]:
    """Where the launch overhead fell: the forward, the backward, the optimizer's step."""
    return [
        Evidence(f"of it in {label}", rnd(by_phase[phase], 2), "ms/step")
        for phase, label in _PHASE_LABELS.items()
        if by_phase.get(phase)
    ]


def launch_fix_text(by_phase: dict[str, float]) -> str:
    """The launch-bound fix, led by the optimizer's own where its step holds most of the idle."""
    total = sum(by_phase.values())
    if total > 0 and by_phase.get("optimizer", 0.0) >= OPTIMIZER_LAUNCH_SHARE * total:
        return (
            "Most of the idle is inside optimizer.step(): build the optimizer with fused=True "
            "(or foreach=True); then compile the model with CUDA graphs (or grow the batch)."
        )
    return "Compile the model with CUDA graphs (or grow the batch)."


def launch_bound(view: StepView) -> list[Finding]:
    """``load.launch_bound``: the GPU idles between kernels inside the framework calls."""
    split, share, gpu_run, busy, w = view.split, view.share, view.gpu_run, view.busy, view.w
    out: list[Finding] = []
    if gpu_run and w is not None and share["launch_overhead"] >= LAUNCH_IDLE_PCT:
        out.append(
            forward_on_its_line(
                Finding(
                    id="load.launch_bound",
                    severity=severity_of(
                        share["launch_overhead"], LAUNCH_IDLE_WARN_PCT, LAUNCH_IDLE_CRITICAL_PCT
                    ),
                    title="Kernel launches, not the GPU, set the pace",
                    evidence=[
                        Evidence(
                            "GPU idle inside forward/backward/optimizer",
                            rnd(split["launch_overhead"], 2),
                            "ms/step",
                        ),
                        *phase_evidence(w.launch_by_phase_ms),
                        Evidence("share of step", rnd(share["launch_overhead"]), "%"),
                        Evidence("kernel launches", rnd(w.launches_per_step), "per step"),
                        Evidence(
                            "median kernel", w.median_kernel_us and rnd(w.median_kernel_us, 1), "µs"
                        ),
                        Evidence("GPU busy", busy and rnd(busy), "%"),
                    ],
                    impact=idle_impact(
                        share["launch_overhead"] * LAUNCH_RECOVERY,
                        "CUDA graphs replay the step's launches at once; fusion removes many.",
                    ),
                    fix=fix(
                        launch_fix_text(w.launch_by_phase_ms),
                        "launch.compile",
                        launches=int(w.launches_per_step),
                    ),
                ),
                view.ev,
            )
        )
    return out


def small_batch(view: StepView) -> list[Finding]:
    """``load.small_batch``: a batch too small to fill the GPU."""
    ev, share, gpu_run, busy, batch = view.ev, view.share, view.gpu_run, view.busy, view.batch
    out: list[Finding] = []
    if (
        gpu_run
        and batch is not None
        and ev.step_mode != "forward"
        and batch <= SMALL_BATCH_MAX
        and busy is not None
        and busy < SMALL_BATCH_BUSY_PCT
        and share["launch_overhead"] >= SMALL_BATCH_LAUNCH_PCT
        # Where host work, not launches, keeps the GPU waiting, that work is the fix: a
        # larger batch would only hide it (a gc.collect() every step read as "batch 64 is
        # too small" on an H200).
        and share["launch_overhead"] > share["other_cpu"]
    ):
        suggested = max(256, batch * 8)
        out.append(
            Finding(
                id="load.small_batch",
                severity="warn",
                title=f"Batch size {batch} is too small to keep the GPU busy",
                evidence=[
                    Evidence("batch size", batch),
                    Evidence("GPU busy", rnd(busy), "%"),
                    Evidence("launch overhead", rnd(share["launch_overhead"]), "% of step"),
                ],
                impact=batch_impact(batch, suggested, busy, "step"),
                fix=command_batch_fix(
                    knob_batch_fix(
                        loader_batch_fix(
                            fix(
                                "Grow the batch until the GPU is busy (and scale the learning "
                                "rate).",
                                "batch.larger" if ev.loader is not None else "batch.larger_tensors",
                                batch_size=batch,
                                suggested=suggested,
                            ),
                            ev,
                            batch,
                            suggested,
                        ),
                        ev.forward_source,
                        suggested,
                    ),
                    ev,
                    batch,
                    suggested,
                ),
            )
        )
    return out


def precision(view: StepView) -> list[Finding]:
    """``load.amp_unused`` and ``load.channels_last``: float32 matmuls without Tensor Cores,
    half-precision convolutions in NCHW."""
    ev, split, total, gpu_run, p, w = view.ev, view.split, view.total, view.gpu_run, view.p, view.w
    out: list[Finding] = []
    if gpu_run and w is not None and split["compute"] > 0:
        fp32 = w.matmul_fp32_ms
        if fp32 >= FP32_MATMUL_SHARE * split["compute"] and fp32 > FP32_MATMUL_MIN_MS:
            rec = pct(min(fp32, split["compute"]) * TENSOR_CORE_RECOVERY, total)
            out.append(
                Finding(
                    id="load.amp_unused",
                    severity="critical" if pct(fp32, total) >= FP32_MATMUL_CRITICAL_PCT else "warn",
                    title="Matmuls run in float32 without Tensor Cores",
                    evidence=[
                        Evidence("float32 matmul/conv kernels", rnd(fp32, 2), "ms/step"),
                        Evidence("share of GPU time", rnd(pct(fp32, split["compute"])), "%"),
                        Evidence("TF32 allowed for matmul", ev.tf32_matmul),
                        Evidence("autocast on", p.autocast),
                    ],
                    impact=idle_impact(
                        rec, "bf16 on Tensor Cores runs these matmuls several times faster."
                    ),
                    fix=autocast_fix(
                        fix(
                            "Train under bf16 autocast; allow TF32 for what stays float32.",
                            "precision.autocast",
                            dtype="bfloat16",
                        ),
                        ev.forward_source,
                    ),
                )
            )
            _padded(out[-1], ev.batch_shapes)
        not_nhwc = p.input_channels_last is False or p.model_channels_last is False
        if (
            p.has_conv
            and w.conv_lowp_ms > 0
            and (w.layout_transform_ms >= TRANSPOSE_SHARE * split["compute"] or not_nhwc)
            and (w.conv_lowp_ms + w.layout_transform_ms) >= NCHW_CONV_SHARE * split["compute"]
        ):
            rec = pct(max(w.layout_transform_ms, CHANNELS_LAST_RECOVERY * w.conv_lowp_ms), total)
            out.append(
                Finding(
                    id="load.channels_last",
                    severity="warn",
                    title="Half-precision convolutions run in NCHW layout",
                    evidence=[
                        Evidence("conv kernels (fp16/bf16)", rnd(w.conv_lowp_ms, 2), "ms/step"),
                        Evidence(
                            "NCHW<->NHWC transpose kernels",
                            rnd(w.layout_transform_ms, 2),
                            "ms/step",
                        ),
                        Evidence("input channels_last", p.input_channels_last),
                        Evidence("model channels_last", p.model_channels_last),
                    ],
                    impact=idle_impact(
                        rec, "Tensor Core convolutions read NHWC without transposes."
                    ),
                    fix=channels_last_fix(
                        fix(
                            "Use channels_last for the model and the inputs.",
                            "memory.channels_last",
                        ),
                        ev.forward_source,
                        p.input_channels_last is False,
                    ),
                )
            )
    return out


def memory_fit(view: StepView) -> list[Finding]:
    """``load.oom_risk`` and ``load.memory_headroom``: the peak against the capacity."""
    ev, busy, batch = view.ev, view.busy, view.batch
    out: list[Finding] = []
    cap = ev.memory_capacity_bytes
    peak = ev.peak_reserved_bytes or ev.peak_memory_bytes
    if cap and peak:
        frac = peak / cap
        gib = 1024**3
        if frac >= OOM_RISK_SHARE:
            out.append(
                Finding(
                    id="load.oom_risk",
                    severity="critical" if frac >= OOM_CRITICAL_SHARE else "warn",
                    title="The run uses nearly all GPU memory",
                    evidence=[
                        Evidence("peak reserved", rnd(peak / gib, 2), "GiB"),
                        Evidence("capacity", rnd(cap / gib, 2), "GiB"),
                        Evidence("share", rnd(100 * frac), "%"),
                    ],
                    impact=Impact(
                        basis="none",
                        text="A longer sequence or bigger batch will run out of memory.",
                    ),
                    fix=fix(
                        "Lower the peak: autocast, activation checkpointing, expandable segments.",
                        "memory.reduce",
                        peak_gib=rnd(peak / gib),
                        capacity_gib=rnd(cap / gib),
                    ),
                )
            )
        elif frac < HEADROOM_SHARE and busy is not None and busy < HEADROOM_BUSY_PCT and batch:
            factor = max(2, min(8, int(HEADROOM_TARGET_SHARE / max(frac, 1e-3))))
            out.append(
                Finding(
                    id="load.memory_headroom",
                    severity="info",
                    title=f"GPU memory is {rnd(100 * frac)}% used: room for a larger batch",
                    evidence=[
                        Evidence("peak", rnd(peak / gib, 2), "GiB"),
                        Evidence("capacity", rnd(cap / gib, 2), "GiB"),
                        Evidence("batch size", batch),
                    ],
                    impact=Impact(basis="none", text="More work per step for the same launches."),
                    fix=command_batch_fix(
                        fix(
                            "Grow the batch while the GPU is under-used.",
                            "memory.larger_batch"
                            if view.ev.loader is not None
                            else "memory.larger_batch_tensors",
                            peak_gib=rnd(peak / gib),
                            capacity_gib=rnd(cap / gib),
                            factor=factor,
                            suggested=batch * factor,
                        ),
                        view.ev,
                        batch,
                        batch * factor,
                    ),
                )
            )
    return out


def _padded(f: Finding, shapes: int) -> None:
    """The autocast finding, where the batches came in many shapes (sequence lengths), with
    them padded to a few: in bf16, cuDNN's attention builds a plan for each new length, a cost
    that a run of many lengths pays over hundreds of steps."""
    if shapes < MANY_SHAPES:
        return
    f.evidence.append(Evidence("batch shapes seen", shapes))
    f.fix.text += (
        f" The batches came in {shapes} shapes: pad them to a multiple of 64 "
        "(DataCollatorWithPadding(tokenizer, pad_to_multiple_of=64), or the tokenizer's "
        "pad_to_multiple_of=64), as bf16 attention builds a cuDNN plan for each new length."
    )


def optimizer_unfused(view: StepView) -> list[Finding]:
    """``load.optimizer_unfused``: an optimizer whose step launches kernels per tensor (or per
    group of tensors) where one fused update would do, taking a large share of the step."""
    o, opt_ms, total = view.ev.optimizer, view.ev.optimizer_ms or 0.0, view.total
    if o is None or not (view.gpu_run and o.cuda) or o.fused or o.name not in FUSED_OPTIMIZERS:
        return []
    share = pct(opt_ms, total)
    if o.tensors < OPTIMIZER_MIN_TENSORS or share < OPTIMIZER_SHARE_PCT:
        return []
    if o.params and o.cpu_params / o.params >= OPTIMIZER_CPU_SHARE:
        return [_cpu_params_explain(o, opt_ms, share)]
    how = "loop" if o.foreach is False else "foreach"
    lo_frac, hi_frac = FUSED_RECOVERY[how]
    lo = total / max(1e-9, total - lo_frac * opt_ms)
    hi = total / max(1e-9, total - hi_frac * opt_ms)
    per = "one tensor at a time" if how == "loop" else "in groups of tensors (foreach)"
    site = site_text(o.source.path, o.source.line) if o.source else "the optimizer's line"
    return [
        Finding(
            id="load.optimizer_unfused",
            severity=severity_of(share, OPTIMIZER_SHARE_PCT, OPTIMIZER_CRITICAL_PCT),
            title=f"{o.name} updates its {o.tensors} parameter tensors {per}",
            evidence=[
                Evidence("optimizer", o.name),
                Evidence("parameter tensors", o.tensors),
                Evidence("foreach", o.foreach),
                Evidence("fused", o.fused),
                Evidence("host time in optimizer.step()", rnd(opt_ms, 2), "ms/step"),
                Evidence("share of step", rnd(share), "%"),
            ],
            impact=range_impact(
                lo,
                hi,
                f"optimizer.step() keeps the host {rnd(opt_ms, 1)} ms of each {rnd(total, 1)} ms "
                "step launching its update; fused=True runs it as a few kernels. "
                "gpusight run --what-if measures it.",
            ),
            fix=optimizer_fused_fix(
                fix(
                    f"Build the optimizer with fused=True: {o.name}(..., fused=True).",
                    "optim.fused",
                    site=site,
                    name=o.name,
                    tensors=o.tensors,
                ),
                o.source,
                o.foreach,
            ),
        )
    ]


def _cpu_params_explain(o: OptimizerInfo, opt_ms: float, share: float) -> Finding:
    """``load.optimizer_unfused`` deferring to the parameters left on the CPU: their update is
    CPU math, which explains the optimizer's time and which no fused kernel shortens; moving them
    (``code.device_mismatch``) does. Information only, with no gain of its own."""
    site = site_text(o.source.path, o.source.line) if o.source else "the optimizer's line"
    cpu = f"{o.cpu_params / 1e6:.1f} M" if o.cpu_params >= 1_000_000 else str(o.cpu_params)
    return Finding(
        id="load.optimizer_unfused",
        severity="info",
        title=f"{o.name}'s step time comes from its {cpu} parameters on the CPU, not from "
        "its launches",
        evidence=[
            Evidence("optimizer", o.name),
            Evidence("parameter tensors", o.tensors),
            Evidence("parameters on the CPU", o.cpu_params),
            Evidence("share of its parameters on the CPU", rnd(pct(o.cpu_params, o.params)), "%"),
            Evidence("host time in optimizer.step()", rnd(opt_ms, 2), "ms/step"),
            Evidence("share of step", rnd(share), "%"),
        ],
        impact=Impact(
            basis="none",
            text=f"{cpu} of its parameters are on the CPU while the rest are on the GPU: their "
            f"update runs on the CPU, which explains the {rnd(opt_ms, 1)} ms in optimizer.step(); "
            "fused=True cannot change that. Moving those modules to the GPU "
            "(code.device_mismatch) does.",
        ),
        fix=fix(
            f"Move the modules on the CPU to the GPU first (code.device_mismatch); then "
            f"fused=True may help: {o.name}(..., fused=True).",
            "optim.fused",
            site=site,
            name=o.name,
            tensors=o.tensors,
        ),
    )
