"""The workload findings, one function per finding (or per pair that shares its evidence): each
reads the step's evidence and split (``StepView``) and returns what it found. Pure; never imports
torch.

Thresholds are named here or beside the figure they bound (``workload_impacts``); the fixes'
patches of the user's lines are in ``fixes/workload_patches``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..durations import format_ms
from ..fixes import fix
from ..fixes import workload as _workload_snippets  # noqa: F401  (registers the snippets)
from ..fixes.workload_patches import (
    autocast_fix,
    channels_last_fix,
    knob_batch_fix,
    loader_batch_fix,
    loader_pin_fix,
    loader_values_fix,
    optimizer_fused_fix,
    pin_source_fix,
    sync_fix,
    to_device_fix,
)
from ..report import Evidence, Finding, Impact, Severity
from .stalls import Stall, stall_phrase, workers_to_keep_up
from .workload_evidence import (
    GpuWindow,
    LoaderInfo,
    Placement,
    WorkloadEvidence,
    mean,
    median_step,
    ran_on_gpu,
    stall_of,
    step_time,
)
from .workload_impacts import (
    GPU_MATH_SPEEDUP_MIN,
    MAX_ESTIMATED_SHARE,
    MAX_RANGE,
    batch_impact,
    idle_impact,
    pct,
    pinned_copy_impact,
    range_impact,
    rnd,
    severity_of,
    site_text,
    source_line,
)

# A batch built in the main process this fast (ms) is no input-pipeline problem: a worker's
# handoff of the batch (pickled through shared memory) costs a good part of it (the PyG GCN at
# one graph a batch read a false 1.17x warn beside its launch-bound verdict).
SMALL_COLLATE_MS = 1.0
# Tensor Cores run bf16 matmuls several times faster than float32 without them; claim a
# conservative three quarters of that kernel time back.
TENSOR_CORE_RECOVERY = 0.75


@dataclass
class StepView:
    """The evidence with what every rule reads from it, worked out once."""

    ev: WorkloadEvidence
    split: dict[str, float]
    total: float
    """The mean steady step (ms)."""
    share: dict[str, float]
    """Each category's share of ``total`` (%)."""
    gpu_run: bool
    busy: float | None
    """The compute share where the steps ran on a GPU."""
    p: Placement
    w: GpuWindow | None
    stall: Stall | None
    batch: int | None
    """The model's batch, else the loader's."""
    n_steps: int

    @classmethod
    def of(cls, ev: WorkloadEvidence, split: dict[str, float]) -> StepView:
        total = step_time(ev)
        share = {k: pct(v, total) for k, v in split.items()}
        gpu_run = ran_on_gpu(ev)
        p = ev.placement or Placement()
        return cls(
            ev=ev,
            split=split,
            total=total,
            share=share,
            gpu_run=gpu_run,
            busy=share["compute"] if gpu_run else None,
            p=p,
            w=ev.window,
            stall=stall_of(ev),
            batch=step_batch(p, ev.loader),
            n_steps=max(1, len(ev.step_times_ms)),
        )


def step_batch(p: Placement, loader: LoaderInfo | None) -> int | None:
    """The batch in the script's items: the model's leading input size where its inputs are
    batch-first, else the loader's batch (graphs, not their nodes)."""
    ld = loader.batch_size if loader is not None else None
    if ld and (p.batch_size is None or p.batch_first is False):
        return ld
    return p.batch_size or ld


def cpu_model(view: StepView) -> list[Finding]:
    """``code.cpu_model``: the model on the CPU beside a usable GPU."""
    ev, total, p = view.ev, view.total, view.p
    out: list[Finding] = []
    if ev.cuda_available and p.param_devices == ["cpu"]:
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
    """``code.device_mismatch``: parameters or inputs on more than one device."""
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
        out.append(
            Finding(
                id="code.dataparallel",
                severity="warn",
                title="torch.nn.DataParallel wraps the model",
                detail=(
                    "DataParallel replicates the model on every GPU each step and drives them from "
                    "one Python thread; PyTorch recommends DistributedDataParallel, even on one "
                    "node."
                ),
                evidence=[Evidence("DataParallel devices", n)],
                impact=Impact(
                    basis="none",
                    text="On one GPU it only adds scatter/gather; on several it is bound by one "
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


def input_bound(view: StepView) -> list[Finding]:
    """``load.input_bound``: the step waits for its DataLoader."""
    ev, split, total, share, stall = view.ev, view.split, view.total, view.share, view.stall
    out: list[Finding] = []
    if share["data_wait"] >= 5.0:
        ld = ev.loader or LoaderInfo()
        workers = ld.num_workers or 0
        busy_step = max(1e-6, total - split["data_wait"])
        keep_up = workers_to_keep_up(workers, total, busy_step, mean(ev.data_wait_ms), ev.cpu_count)
        suggested = keep_up[0] if keep_up else max(2, workers * 2)
        loader_stall = stall is not None and stall.cause in ("loader_workers", "data_wait")
        text = (
            f"The step waits {rnd(split['data_wait'])} ms for the next batch on average"
            + (
                " and the DataLoader loads in the main process (num_workers=0)"
                if workers == 0
                else ""
            )
            + "."
            + (f" {stall.text[0].upper()}{stall.text[1:]}" if loader_stall and stall else "")
        )
        if keep_up is not None and workers and keep_up[0] <= workers:
            impact = Impact(
                basis="none",
                text=f"{workers} workers already use the {ev.cpu_count} CPU cores: more workers "
                "cannot help here. Make each batch cheaper to build (cache decoded items, move "
                "augmentation to the GPU, a faster decoder) or run on a machine with more cores.",
            )
        elif keep_up is not None and keep_up[1] > 0:
            gain = total / keep_up[1]
            impact = Impact(
                basis="estimated",
                text=f"With {suggested} workers the loader would deliver a batch every "
                f"{rnd(keep_up[1], 1)} ms or faster (the step without its wait: "
                f"{rnd(busy_step, 1)} ms).",
                recoverable_pct=rnd(min(100.0, pct(total - keep_up[1], total))),
                speedup=round(min(gain, 100.0 / (100.0 - MAX_ESTIMATED_SHARE)), 2),
            )
        else:
            impact = idle_impact(
                share["data_wait"], "Workers can prepare batches while the step runs."
            )
        small = workers == 0 and mean(ev.data_wait_ms) < SMALL_COLLATE_MS
        if small:
            impact.text += (
                f" Each batch takes {format_ms(mean(ev.data_wait_ms))} to build in the main "
                "process: handing a batch over from a worker costs a good part of that, so the "
                "gain is smaller than this."
            )
        out.append(
            Finding(
                id="load.input_bound",
                severity="info" if small else severity_of(share["data_wait"], 10.0, 40.0),
                title="The input pipeline starves the step"
                + (
                    f": {stall_phrase(stall, 'wait')} for the DataLoader"
                    if loader_stall and stall and stall.period_steps
                    else ""
                ),
                detail=text,
                evidence=[
                    Evidence("data wait", rnd(split["data_wait"], 2), "ms/step"),
                    Evidence("share of step", rnd(share["data_wait"]), "%"),
                    Evidence("step time (mean)", rnd(total, 2), "ms"),
                    Evidence("typical step (median)", rnd(median_step(ev), 2), "ms"),
                    *(
                        [
                            Evidence("stall period", stall.period_steps, "steps"),
                            Evidence("stall length", rnd(stall.stall_ms, 1), "ms"),
                        ]
                        if loader_stall and stall
                        else []
                    ),
                    Evidence("num_workers", ld.num_workers),
                    Evidence("prefetch_factor", ld.prefetch_factor),
                    Evidence("pin_memory", ld.pin_memory),
                    Evidence("batch size", ld.batch_size),
                    Evidence("CPU cores", ev.cpu_count),
                ],
                impact=impact,
                fix=loader_values_fix(
                    fix(
                        f"Load batches in {suggested} worker processes"
                        + (", pinned," if ev.cuda_available else "")
                        + " kept alive across epochs.",
                        "loader.workers",
                        batch_size=ld.batch_size or 64,
                        workers=suggested,
                    ),
                    ev.loader_source,
                    {
                        "num_workers": suggested,
                        **({"pin_memory": True} if ev.cuda_available else {}),
                        "persistent_workers": True,
                    },
                ),
            )
        )
    return out


def cpu_preprocessing(view: StepView) -> list[Finding]:
    """``load.cpu_preprocessing``: host work outside the model takes the step."""
    ev, split, share, gpu_run, w = view.ev, view.split, view.share, view.gpu_run, view.w
    out: list[Finding] = []
    if share["other_cpu"] >= 10.0:
        cpu_loop = w.cpu_op_loop_ms if w is not None else 0.0
        ev_list = [
            Evidence("other host time", rnd(split["other_cpu"], 2), "ms/step"),
            Evidence("share of step", rnd(share["other_cpu"]), "%"),
        ]
        if w is not None:
            ev_list.append(Evidence("CPU tensor ops in the loop body", rnd(cpu_loop, 2), "ms/step"))
            ev_list.extend(
                Evidence(f"CPU op {name}", rnd(ms, 2), "ms/step") for name, ms in w.top_cpu_ops
            )
        out.append(
            Finding(
                id="load.cpu_preprocessing",
                severity=severity_of(share["other_cpu"], 20.0, 50.0),
                title="Host work in the loop body keeps the GPU waiting"
                if gpu_run
                else "Host work outside the model takes a large share of the step",
                evidence=ev_list,
                impact=idle_impact(
                    share["other_cpu"],
                    "Work moved to DataLoader workers or onto the GPU overlaps with the step.",
                ),
                fix=fix(
                    "Do per-batch transforms on the GPU after the copy, or inside the Dataset with "
                    "DataLoader workers.",
                    "loop.augment_on_gpu",
                    cpu_ms=rnd(max(cpu_loop, split["other_cpu"]), 1),
                    workers=min(8, max(2, (ev.cpu_count or 4) - 1)),
                ),
            )
        )
    return out


def launch_bound(view: StepView) -> list[Finding]:
    """``load.launch_bound``: the GPU idles between kernels inside the framework calls."""
    split, share, gpu_run, busy, w = view.split, view.share, view.gpu_run, view.busy, view.w
    out: list[Finding] = []
    if gpu_run and w is not None and share["launch_overhead"] >= 15.0:
        out.append(
            Finding(
                id="load.launch_bound",
                severity=severity_of(share["launch_overhead"], 15.0, 50.0),
                title="Kernel launches, not the GPU, set the pace",
                evidence=[
                    Evidence(
                        "GPU idle inside forward/backward/optimizer",
                        rnd(split["launch_overhead"], 2),
                        "ms/step",
                    ),
                    Evidence("share of step", rnd(share["launch_overhead"]), "%"),
                    Evidence("kernel launches", rnd(w.launches_per_step), "per step"),
                    Evidence(
                        "median kernel", w.median_kernel_us and rnd(w.median_kernel_us, 1), "µs"
                    ),
                    Evidence("GPU busy", busy and rnd(busy), "%"),
                ],
                impact=idle_impact(
                    share["launch_overhead"] * 0.8,
                    "CUDA graphs replay the step's launches at once; fusion removes many.",
                ),
                fix=fix(
                    "Compile the model with CUDA graphs (or grow the batch).",
                    "launch.compile",
                    launches=int(w.launches_per_step),
                ),
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
        and batch <= 64
        and busy is not None
        and busy < 50.0
        and share["launch_overhead"] >= 15.0
    ):
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
                impact=batch_impact(batch, max(256, batch * 8), busy, "step"),
                fix=knob_batch_fix(
                    loader_batch_fix(
                        fix(
                            "Grow the batch until the GPU is busy (and scale the learning rate).",
                            "batch.larger",
                            batch_size=batch,
                            suggested=max(256, batch * 8),
                        ),
                        ev,
                        batch,
                        max(256, batch * 8),
                    ),
                    ev.forward_source,
                    max(256, batch * 8),
                ),
            )
        )
    return out


def unbatched(view: StepView) -> list[Finding]:
    """``infer.unbatched``: inference one request (or a few) per forward."""
    ev, total, busy, batch = view.ev, view.total, view.busy, view.batch
    out: list[Finding] = []
    if ev.step_mode == "forward" and batch is not None and batch <= 4:
        out.append(
            Finding(
                id="infer.unbatched",
                severity="warn" if (busy is None or busy < 50.0) else "info",
                title=f"Inference runs {batch} request(s) per forward",
                evidence=[
                    Evidence("batch size", batch),
                    Evidence("GPU busy", busy and rnd(busy), "%"),
                    Evidence("forward step", rnd(total, 3), "ms"),
                ],
                impact=batch_impact(batch, 64, busy, "forward"),
                fix=knob_batch_fix(
                    fix("Group requests into batches.", "infer.batch_requests", batch=64),
                    ev.forward_source,
                    64,
                ),
            )
        )
    return out


def grad_enabled(view: StepView) -> list[Finding]:
    """``infer.grad_enabled``: inference that records autograd history."""
    ev, p = view.ev, view.p
    out: list[Finding] = []
    if ev.step_mode == "forward" and p.grad_enabled:
        out.append(
            Finding(
                id="infer.grad_enabled",
                severity="info",
                title="Inference records autograd history",
                evidence=[Evidence("grad enabled during forward", True)],
                impact=Impact(basis="none", text="Saves memory and some host time per op."),
                fix=fix("Run inference under torch.inference_mode().", "infer.inference_mode"),
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
        if fp32 >= 0.25 * split["compute"] and fp32 > 0.05:
            rec = pct(min(fp32, split["compute"]) * TENSOR_CORE_RECOVERY, total)
            out.append(
                Finding(
                    id="load.amp_unused",
                    severity="critical" if pct(fp32, total) >= 50.0 else "warn",
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
        not_nhwc = p.input_channels_last is False or p.model_channels_last is False
        if (
            p.has_conv
            and w.conv_lowp_ms > 0
            and (w.layout_transform_ms >= 0.03 * split["compute"] or not_nhwc)
            and (w.conv_lowp_ms + w.layout_transform_ms) >= 0.2 * split["compute"]
        ):
            rec = pct(max(w.layout_transform_ms, 0.15 * w.conv_lowp_ms), total)
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


def host_sync(view: StepView) -> list[Finding]:
    """``code.host_sync``: the host waits for the GPU inside the loop."""
    ev, split, share, gpu_run, w, n_steps = (
        view.ev,
        view.split,
        view.share,
        view.gpu_run,
        view.w,
        view.n_steps,
    )
    out: list[Finding] = []
    sync_count = sum(s.count for s in ev.syncs)
    if ev.syncs and (share["sync_stall"] >= 1.0 or sync_count / n_steps >= 1.0 or w is None):
        top = sorted(ev.syncs, key=lambda s: (-(s.idle_ms or 0.0), -s.count))
        first = top[0]
        sev: Severity = severity_of(share["sync_stall"], 5.0, 25.0) if gpu_run else "info"
        out.append(
            Finding(
                id="code.host_sync",
                severity=sev,
                title="The host waits for the GPU inside the loop"
                + (f" ({first.kind} at {site_text(first.file, first.line)})" if first.line else ""),
                evidence=[
                    Evidence("GPU idle after syncs", rnd(split["sync_stall"], 2), "ms/step"),
                    Evidence("share of step", rnd(share["sync_stall"]), "%"),
                    Evidence("syncs per step", rnd(sync_count / n_steps, 2)),
                    *(
                        Evidence(
                            f"{s.kind}",
                            s.count,
                            "calls",
                            source_line(s.file, s.line, s.code, s.count),
                        )
                        for s in top[:5]
                    ),
                ],
                impact=idle_impact(
                    share["sync_stall"],
                    "Without the wait the host queues the next step while the GPU computes.",
                ),
                fix=sync_fix(
                    fix(
                        "Keep values on the GPU and read them every few steps (or log "
                        "asynchronously).",
                        "sync.defer_item",
                        site=site_text(first.file, first.line),
                        code=first.code or first.kind,
                        every=50,
                    ),
                    first,
                    50,
                ),
            )
        )
    return out


def pageable_copy(view: StepView) -> list[Finding]:
    """``code.pageable_copy``: host-to-device copies from pageable memory."""
    ev, split, share, w, n_steps = view.ev, view.split, view.share, view.w, view.n_steps
    out: list[Finding] = []
    pageable_async = [c for c in ev.copies if c.kind == "pageable_async"]
    pageable_sync = [c for c in ev.copies if c.kind == "pageable_sync"]
    trace_pageable = w.memcpy_h2d_pageable if w is not None else 0
    if pageable_async or trace_pageable or (pageable_sync and share["copy"] >= 10.0):
        sites = sorted(pageable_async or pageable_sync, key=lambda c: -c.host_ms)
        first_c = sites[0] if sites else None
        mb = sum(c.bytes for c in sites) / n_steps / 1e6 if sites else None
        out.append(
            Finding(
                id="code.pageable_copy",
                severity=severity_of(share["copy"], 0.0, 25.0) if share["copy"] >= 5 else "info",
                title="Host-to-device copies from pageable memory block the host"
                if pageable_async
                else "Host-to-device copies come from pageable memory",
                detail="non_blocking=True only overlaps a copy whose source is pinned; from "
                "pageable "
                "memory the call returns when the copy is done."
                if pageable_async or trace_pageable
                else None,
                evidence=[
                    Evidence("copy time", rnd(split["copy"], 2), "ms/step"),
                    Evidence("share of step", rnd(share["copy"]), "%"),
                    Evidence("copied per step", mb and rnd(mb, 1), "MB"),
                    Evidence("pageable copies in the profiler window", trace_pageable),
                    *(
                        Evidence(
                            "non_blocking copy from pageable memory"
                            if c.kind == "pageable_async"
                            else "blocking copy from pageable memory",
                            rnd(c.host_ms / c.count, 3) if c.count else None,
                            "ms/call",
                            source_line(c.file, c.line, c.code, c.count),
                        )
                        for c in sites[:5]
                    ),
                ],
                impact=pinned_copy_impact(split, mb, ev.h2d_link_gbps),
                fix=pin_source_fix(
                    loader_pin_fix(
                        fix(
                            "Pin the source memory (DataLoader(pin_memory=True) or .pin_memory()) "
                            "and copy with non_blocking=True.",
                            "copy.pin_memory",
                            site=site_text(first_c.file, first_c.line) if first_c else "the copy",
                        ),
                        ev,
                    ),
                    sites,
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
        if frac >= 0.9:
            out.append(
                Finding(
                    id="load.oom_risk",
                    severity="critical" if frac >= 0.97 else "warn",
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
        elif frac < 0.3 and busy is not None and busy < 70.0 and batch:
            factor = max(2, min(8, int(0.6 / max(frac, 1e-3))))
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
                    fix=fix(
                        "Grow the batch while the GPU is under-used.",
                        "memory.larger_batch",
                        peak_gib=rnd(peak / gib),
                        capacity_gib=rnd(cap / gib),
                        factor=factor,
                        suggested=batch * factor,
                    ),
                )
            )
    return out


# An optimizer's host time per step this large a share of the step, over at least this many
# parameter tensors, is launch work a fused update does in a few kernels.
OPTIMIZER_SHARE_PCT = 10.0
OPTIMIZER_MIN_TENSORS = 64
FUSED_OPTIMIZERS = ("Adam", "AdamW", "SGD")
"""The torch.optim classes whose CUDA update takes ``fused=True`` (torch >= 2.4 for SGD)."""
# Of the optimizer's host time, what a fused update gives back: a loop over the tensors launches
# a few kernels per tensor (most of it), foreach a few per group of tensors (less).
FUSED_RECOVERY = {"loop": (0.5, 0.9), "foreach": (0.2, 0.6)}


def optimizer_unfused(view: StepView) -> list[Finding]:
    """``load.optimizer_unfused``: an optimizer whose step launches kernels per tensor (or per
    group of tensors) where one fused update would do, taking a large share of the step."""
    o, opt_ms, total = view.ev.optimizer, view.ev.optimizer_ms or 0.0, view.total
    if o is None or not (view.gpu_run and o.cuda) or o.fused or o.name not in FUSED_OPTIMIZERS:
        return []
    share = pct(opt_ms, total)
    if o.tensors < OPTIMIZER_MIN_TENSORS or share < OPTIMIZER_SHARE_PCT:
        return []
    how = "loop" if o.foreach is False else "foreach"
    lo_frac, hi_frac = FUSED_RECOVERY[how]
    lo = total / max(1e-9, total - lo_frac * opt_ms)
    hi = total / max(1e-9, total - hi_frac * opt_ms)
    per = "one tensor at a time" if how == "loop" else "in groups of tensors (foreach)"
    site = site_text(o.source.path, o.source.line) if o.source else "the optimizer's line"
    return [
        Finding(
            id="load.optimizer_unfused",
            severity=severity_of(share, OPTIMIZER_SHARE_PCT, 30.0),
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


RULES: tuple[Callable[[StepView], list[Finding]], ...] = (
    cpu_model,
    device_mismatch,
    dataparallel,
    input_bound,
    cpu_preprocessing,
    launch_bound,
    small_batch,
    unbatched,
    grad_enabled,
    precision,
    host_sync,
    pageable_copy,
    memory_fit,
    optimizer_unfused,
)
"""In the order their findings are listed before sorting (``report.sort_findings``)."""


def findings(ev: WorkloadEvidence, split: dict[str, float]) -> list[Finding]:
    """Every rule's findings for the evidence and its split; none for a run without steps."""
    view = StepView.of(ev, split)
    if view.total <= 0:
        return []
    return [f for rule in RULES for f in rule(view)]
