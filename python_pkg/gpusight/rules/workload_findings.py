"""The workload findings: the input pipeline, the host's own work and waits, and inference
(one function per finding), with every rule in the order it runs (``RULES``) and
:func:`findings`. Each rule reads the step's evidence and split (``StepView``) and returns what
it found. Pure; never imports torch.

Where the model lives is in ``placement_findings``, how the GPU's work is shaped in
``gpu_findings``; the thresholds are in ``workload_thresholds``, the figures that bound an
impact in ``workload_impacts``, the fixes' patches of the user's lines in
``fixes/workload_patches``.
"""

from __future__ import annotations

from collections.abc import Callable

from ..durations import format_ms
from ..fixes import fix
from ..fixes import workload as _workload_snippets  # noqa: F401  (registers the snippets)
from ..fixes.workload_patches import (
    command_batch_fix,
    knob_batch_fix,
    loader_pin_fix,
    loader_values_fix,
    pin_source_fix,
    sync_fix,
)
from ..report import Evidence, Finding, Impact, Severity
from .float64_math import float64_math
from .framework_hook_fix import framework_callback
from .gpu_findings import (
    FUSED_OPTIMIZERS,
    launch_bound,
    memory_fit,
    optimizer_unfused,
    precision,
    small_batch,
)
from .host_line_rows import on_its_line, step_math_fraction, sync_on_its_line
from .library_syncs import library_sync_fix
from .placement_findings import cpu_model, dataparallel, device_mismatch
from .stalls import stall_phrase, workers_to_keep_up
from .step_view import StepView
from .workload_evidence import LoaderInfo, WorkloadEvidence, mean, median_step
from .workload_impacts import (
    MAX_ESTIMATED_SHARE,
    batch_impact,
    idle_impact,
    pct,
    pinned_copy_impact,
    rnd,
    severity_of,
    site_text,
    source_line,
)
from .workload_thresholds import (
    COPY_CRITICAL_PCT,
    COPY_WARN_PCT,
    FUSED_RECOVERY,
    HOST_WORK_CRITICAL_PCT,
    HOST_WORK_PCT,
    HOST_WORK_WARN_PCT,
    INPUT_WAIT_CRITICAL_PCT,
    INPUT_WAIT_PCT,
    INPUT_WAIT_WARN_PCT,
    OPTIMIZER_MIN_TENSORS,
    OPTIMIZER_SHARE_PCT,
    PAGEABLE_SYNC_COPY_PCT,
    SMALL_COLLATE_MS,
    SYNC_CRITICAL_PCT,
    SYNC_STALL_PCT,
    SYNC_WARN_PCT,
    SYNCS_PER_STEP,
    TENSOR_CORE_RECOVERY,
    UNBATCHED_BUSY_PCT,
    UNBATCHED_MAX,
)


def input_bound(view: StepView) -> list[Finding]:
    """``load.input_bound``: the step waits for its DataLoader."""
    ev, split, total, share, stall = view.ev, view.split, view.total, view.share, view.stall
    out: list[Finding] = []
    if share["data_wait"] >= INPUT_WAIT_PCT:
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
            # On the GPU, workers gave nothing for such batches (a PyG GCN at one graph a batch
            # read 1.17x here): no gain is claimed.
            impact.speedup, impact.recoverable_pct, impact.speedup_range = 1.0, 0.0, None
        out.append(
            Finding(
                id="load.input_bound",
                severity=severity_of(
                    share["data_wait"], INPUT_WAIT_WARN_PCT, INPUT_WAIT_CRITICAL_PCT
                ),
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
                        + (
                            " kept alive across epochs."
                            if not ld.dataset_set_epoch
                            else ", started anew at each epoch: the dataset's set_epoch would "
                            "not reach workers kept alive."
                        ),
                        "loader.workers",
                        batch_size=ld.batch_size or 64,
                        workers=suggested,
                    ),
                    ev.loader_source,
                    {
                        "num_workers": suggested,
                        **({"pin_memory": True} if ev.cuda_available else {}),
                        **({} if ld.dataset_set_epoch else {"persistent_workers": True}),
                    },
                ),
            )
        )
    return out


def cpu_preprocessing(view: StepView) -> list[Finding]:
    """``load.cpu_preprocessing``: host work outside the model takes the step. The loss's and
    the gradients' clipping's lines are the step's computation, not work a worker or the GPU
    could take over: their share is left out (a VAE's BCE + KL on a CPU-only run)."""
    ev, split, share, gpu_run, w = view.ev, view.split, view.share, view.gpu_run, view.w
    out: list[Finding] = []
    math = step_math_fraction(ev)
    math_pct = math * share["other_cpu"]
    left_pct, left_ms = share["other_cpu"] - math_pct, split["other_cpu"] * (1.0 - math)
    if left_pct >= HOST_WORK_PCT:
        cpu_loop = w.cpu_op_loop_ms if w is not None else 0.0
        ev_list = [
            Evidence("other host time", rnd(left_ms, 2), "ms/step"),
            Evidence("share of step", rnd(left_pct), "%"),
        ]
        if math_pct > 0:
            ev_list.append(Evidence("the loss and gradient clipping, left out", rnd(math_pct), "%"))
        if w is not None:
            ev_list.append(Evidence("CPU tensor ops in the loop body", rnd(cpu_loop, 2), "ms/step"))
            ev_list.extend(
                Evidence(f"CPU op {name}", rnd(ms, 2), "ms/step") for name, ms in w.top_cpu_ops
            )
        finding = Finding(
            id="load.cpu_preprocessing",
            severity=severity_of(left_pct, HOST_WORK_WARN_PCT, HOST_WORK_CRITICAL_PCT),
            title="Host work in the loop body keeps the GPU waiting"
            if gpu_run
            else "Host work outside the model takes a large share of the step",
            evidence=ev_list,
            impact=idle_impact(
                left_pct,
                "Work moved to DataLoader workers or onto the GPU overlaps with the step.",
            ),
            fix=fix(
                "Do per-batch transforms on the GPU after the copy, or inside the Dataset with "
                "DataLoader workers.",
                "loop.augment_on_gpu" if ev.loader is not None else "loop.augment_on_gpu_tensors",
                cpu_ms=rnd(max(cpu_loop, left_ms), 1),
                workers=min(8, max(2, (ev.cpu_count or 4) - 1)),
            ),
        )
        out.append(on_its_line(finding, ev))
    return out


def unbatched(view: StepView) -> list[Finding]:
    """``infer.unbatched``: inference one request (or a few) per forward."""
    ev, total, busy, batch = view.ev, view.total, view.busy, view.batch
    out: list[Finding] = []
    if ev.step_mode == "forward" and batch is not None and batch <= UNBATCHED_MAX:
        out.append(
            Finding(
                id="infer.unbatched",
                severity="warn" if (busy is None or busy < UNBATCHED_BUSY_PCT) else "info",
                title=f"Inference runs {batch} request(s) per forward",
                evidence=[
                    Evidence("batch size", batch),
                    Evidence("GPU busy", busy and rnd(busy), "%"),
                    Evidence("forward step", rnd(total, 3), "ms"),
                ],
                impact=batch_impact(batch, 64, busy, "forward"),
                fix=command_batch_fix(
                    knob_batch_fix(
                        fix("Group requests into batches.", "infer.batch_requests", batch=64),
                        ev.forward_source,
                        64,
                    ),
                    ev,
                    batch,
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
    if ev.syncs and (
        share["sync_stall"] >= SYNC_STALL_PCT or sync_count / n_steps >= SYNCS_PER_STEP or w is None
    ):
        top = sorted(ev.syncs, key=lambda s: (-(s.idle_ms or 0.0), -s.count))
        first = top[0]
        sev: Severity = (
            severity_of(share["sync_stall"], SYNC_WARN_PCT, SYNC_CRITICAL_PCT)
            if gpu_run
            else "info"
        )
        synced = Finding(
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
                    "Keep values on the GPU and read them every few steps (or log asynchronously).",
                    "sync.defer_item",
                    site=site_text(first.file, first.line),
                    code=first.code or first.kind,
                    every=50,
                ),
                first,
                50,
            ),
        )
        synced = sync_on_its_line(synced, ev, first.file, first.line)
        out.append(library_sync_fix(synced, first, ev.forward_source))
    return out


def pageable_copy(view: StepView) -> list[Finding]:
    """``code.pageable_copy``: host-to-device copies from pageable memory."""
    ev, split, share, w, n_steps = view.ev, view.split, view.share, view.w, view.n_steps
    out: list[Finding] = []
    pageable_async = [c for c in ev.copies if c.kind == "pageable_async"]
    pageable_sync = [c for c in ev.copies if c.kind == "pageable_sync"]
    trace_pageable = w.memcpy_h2d_pageable if w is not None else 0
    if (
        pageable_async
        or trace_pageable
        or (pageable_sync and share["copy"] >= PAGEABLE_SYNC_COPY_PCT)
    ):
        sites = sorted(pageable_async or pageable_sync, key=lambda c: -c.host_ms)
        first_c = sites[0] if sites else None
        mb = sum(c.bytes for c in sites) / n_steps / 1e6 if sites else None
        out.append(
            Finding(
                id="code.pageable_copy",
                severity=severity_of(share["copy"], 0.0, COPY_CRITICAL_PCT)
                if share["copy"] >= COPY_WARN_PCT
                else "info",
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
                            "copy.pin_memory"
                            if ev.loader is not None
                            else "copy.pin_memory_tensors",
                            site=site_text(first_c.file, first_c.line) if first_c else "the copy",
                        ),
                        ev,
                    ),
                    sites,
                ),
            )
        )
    return out


RULES: tuple[Callable[[StepView], list[Finding]], ...] = (
    cpu_model,
    device_mismatch,
    dataparallel,
    input_bound,
    cpu_preprocessing,
    framework_callback,
    launch_bound,
    small_batch,
    unbatched,
    grad_enabled,
    precision,
    float64_math,
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


__all__ = [
    "FUSED_OPTIMIZERS",
    "FUSED_RECOVERY",
    "OPTIMIZER_MIN_TENSORS",
    "OPTIMIZER_SHARE_PCT",
    "RULES",
    "SMALL_COLLATE_MS",
    "TENSOR_CORE_RECOVERY",
    "StepView",
    "cpu_model",
    "cpu_preprocessing",
    "dataparallel",
    "device_mismatch",
    "findings",
    "float64_math",
    "grad_enabled",
    "host_sync",
    "input_bound",
    "launch_bound",
    "memory_fit",
    "optimizer_unfused",
    "pageable_copy",
    "precision",
    "small_batch",
    "unbatched",
]
