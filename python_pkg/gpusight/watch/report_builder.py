"""What the watch gathered -> ``WorkloadEvidence`` -> rules -> a schema-valid ``Report``."""

from __future__ import annotations

import os
import statistics
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

from ..machine_facts import build_machine
from ..report import Report, Verdict
from ..rules.cpu_only_build import lead_with_cpu_only_build
from ..rules.debug_switches import debug_switches
from ..rules.env_versions import pcie_gbps
from ..rules.raised_run import outcome_note as raised_note
from ..rules.raised_run import report_raised
from ..rules.startup_run import unsized
from ..rules.workload import (
    CopySite,
    GpuWindow,
    LoaderInfo,
    SyncSite,
    WorkloadEvidence,
    analyse,
    median_step,
    steady_from,
    steady_steps,
)
from .batch_hint import batch_command, hinted_batch
from .calibration import UNSEEN_FACTOR_FORWARD, unseen_factor
from .code_sources import _sync_source, forward_source, loader_source, model_calls, optimizer_info
from .collected import busiest_loader
from .float64_evidence import float64_use
from .framework_hooks import framework_hook_evidence, hooks_run
from .host_lines_report import host_line_evidence, host_lines_run
from .machine import machine_facts, tf32_matmul
from .phase_report import phase_evidence, phase_free_run, phase_rows, settle, unmeasured_note
from .placement_report import placement
from .recorder import StepRecord, StepRecorder
from .shape_costs import shape_cost_note
from .speed_of_light import BUSY_VERDICTS, measure_ceilings, speed_of_light, summary_line
from .trace_analysis import HostRecord
from .trace_analysis import analyse as analyse_trace
from .window_cost import window_cost
from .window_stats import WindowStats

if TYPE_CHECKING:
    from .sampler_process import WatchSampler
    from .watched_run import WatchedRun


NOTED_OVERHEAD_PCT = 1.0
"""From this share of the step on, a note says what watching cost (it is in the step time)."""
NO_TRACE_SPLIT_NOTE = (
    "the trace holds no kernels, so the GPU's idle time is split between launch overhead and "
    "other host work as the host's own clocks divide the step (inside forward/backward/optimizer "
    "or outside them); no sync stall is measured"
)
"""Said where the breakdown's idle time comes from the host's clocks (``no_trace_weights``)."""


def _ms(ns: float) -> float:
    return ns / 1e6


def _link_gbps(sampler: WatchSampler | None) -> float | None:
    """The slowest PCIe link of the sampled GPUs at its best (GB/s one way), if NVML said."""
    links = [pcie_gbps(gen, width) for gen, width in (sampler.links if sampler else {}).values()]
    known = [g for g in links if g]
    return min(known) if known else None


def _window_stats(w: WatchedRun, notes: list[str]) -> WindowStats | None:
    rec = w.recorder
    window = w.window
    if rec is None or window is None:
        return None
    profiled = rec.analysed()
    analysed = phase_free_run(profiled)
    if len(analysed) < len(profiled):
        notes.append(
            f"a phase between the steps (an evaluation, a checkpoint, an epoch start) fell inside "
            f"the profiler window: its kernel figures "
            f"come from the {len(analysed)} profiled step(s) without one"
        )
    got = window.trace()
    if got is None:
        if window.error:
            notes.append(window.error)
        return None
    if not analysed:
        notes.append("the run ended before the profiled steps completed: no kernel statistics")
        return None
    trace, align = got
    host = HostRecord(
        steps=[(r.start_ns, r.end_ns) for r in analysed],
        data_wait=rec.window.data_wait,
        host_copies=rec.window.host_copies,
        framework=rec.window.framework,
        framework_phases=rec.window.framework_phases,
        syncs=rec.window.syncs,
    )
    tf32 = tf32_matmul(w.flags())
    return analyse_trace(trace, align, host, main_tid=w.native_tid, fp32_tensor_cores=tf32)


def _gpu_window(s: WindowStats) -> GpuWindow:
    return GpuWindow(
        steps=s.steps,
        gpu=s.gpu,
        split_ms=dict(s.split_ms),
        data_wait_host_ms=s.data_wait_host_ms,
        busy_pct=s.busy_pct,
        kernels_per_step=s.kernels_per_step,
        launches_per_step=s.launches_per_step,
        median_kernel_us=s.median_kernel_us,
        matmul_ms=s.matmul_ms,
        matmul_fp32_ms=s.matmul_fp32_ms,
        matmul_tensor_core_ms=s.matmul_tensor_core_ms,
        conv_ms=s.conv_ms,
        conv_lowp_ms=s.conv_lowp_ms,
        layout_transform_ms=s.layout_transform_ms,
        memcpy_h2d_pageable=s.memcpy_h2d_pageable,
        memcpy_h2d_pageable_bytes=s.memcpy_h2d_pageable_bytes,
        cpu_op_loop_ms=s.cpu_op_loop_ms,
        top_cpu_ops=list(s.top_cpu_ops),
        issued_gpu_ms=s.issued_gpu_ms,
        device_paced=s.device_paced,
        launch_by_phase_ms=dict(s.launch_by_phase_ms),
        matmul_fp64_ms=s.matmul_dtypes.get("fp64", 0.0),
    )


def batches_per_step(batches: int, steps: int) -> int | None:
    """Loader batches a step takes (gradient accumulation takes several), when a loader feeds
    the steps: about one batch a step or more; None when it does not (a loader read once, an
    evaluation loader beside batches made in the loop)."""
    if steps <= 0 or batches < 0.8 * steps:
        return None
    return max(1, round(batches / steps))


def items_per_step(w: WatchedRun, model_batch: int | None) -> int | None:
    """The items a step processes as the script counts them: the loader's batch (graphs,
    sequences, images) times its batches a step where a loader feeds the steps, else the
    leading size of the model's first input."""
    ld = busiest_loader(w.collected.loaders.values())
    rec = w.recorder
    if ld is not None and ld.batch_size and rec is not None:
        per = batches_per_step(ld.calls, rec.completed)
        if per is not None:
            return int(ld.batch_size) * per
    if model_batch:
        return model_batch
    return ld.batch_size if ld is not None else None


def _loader_feeds(w: WatchedRun) -> bool:
    ld = busiest_loader(w.collected.loaders.values())
    rec = w.recorder
    return bool(
        ld is not None
        and ld.batch_size
        and rec is not None
        and batches_per_step(ld.calls, rec.completed) is not None
    )


def _memory(w: WatchedRun) -> tuple[int | None, int | None, int | None]:
    torch = w.torch
    if not w.cuda_available or not torch.cuda.is_initialized():
        return None, None, None
    try:
        dev = torch.cuda.current_device()
        return (
            int(torch.cuda.max_memory_allocated(dev)),
            int(torch.cuda.max_memory_reserved(dev)),
            int(torch.cuda.get_device_properties(dev).total_memory),
        )
    except Exception:
        return None, None, None


def _sampled_ms(values: list[tuple[int, bool]]) -> list[float]:
    """ms per step from ``(ns, recorded)`` pairs: a step that did not record the figure (a step
    sampled out, ``detail.py``) gets the mean of those that did."""
    kept = [ns for ns, recorded in values if recorded]
    mean = sum(kept) / len(kept) if kept else 0.0
    return [_ms(ns if recorded else mean) for ns, recorded in values]


def _optimizer_ms(steps: list[StepRecord]) -> float | None:
    timed = [r.optimizer_ns for r in steps if r.full and r.optimizer_ns]
    return _ms(statistics.fmean(timed)) if timed else None


def _framework_per_step(steps: list[StepRecord]) -> list[float]:
    """Framework ms per step; a light step (no module hooks or framework clocks) gets the mean
    of those that timed it."""
    return _sampled_ms([(r.framework_ns, r.full) for r in steps])


def _copy_per_step(steps: list[StepRecord]) -> list[float]:
    """Host copy ms per step; a step that did not record its copies gets the mean of those that
    did."""
    return _sampled_ms([(r.copy_ns, r.detail) for r in steps])


def _per_run(window_ms: float | None, stats: WindowStats | None, steps: int) -> float | None:
    """GPU idle measured over the window's steps, scaled to the reported (measured) steps."""
    if window_ms is None or stats is None or not stats.steps:
        return None
    return window_ms / stats.steps * steps


def _nvml_util(clean: list[Any], timeline: list[dict[str, Any]], t0_ns: int) -> float | None:
    """Mean NVML utilisation over the clean steps (all GPUs sampled)."""
    if not clean or not timeline:
        return None
    lo = (clean[0].start_ns - t0_ns) / 1e9
    hi = (clean[-1].end_ns - t0_ns) / 1e9
    utils = [
        float(s["util_pct"])
        for s in timeline
        if s.get("util_pct") is not None and lo <= float(s["t"] or 0) <= hi
    ]
    return statistics.fmean(utils) if utils else None


def _spread(xs: list[float]) -> list[float] | None:
    if len(xs) < 2:
        return None
    qs = statistics.quantiles(xs, n=10, method="inclusive")
    return [round(qs[0], 3), round(qs[-1], 3)]


def _reported_steps(
    w: WatchedRun, rec: StepRecorder, notes: list[str]
) -> tuple[list[StepRecord], str]:
    """The steps the report covers and the phase they come from, with what to say about them
    (evaluations at every step given back to their steps first: ``phase_report.settle``)."""
    per_step = settle(w, rec)
    if per_step:
        notes.append(per_step)
    clean, phase = rec.clean()
    if (
        phase == "measure"
        and rec.steps is not None
        and not (rec.min_window_ns or rec.max_window_ns or rec.phase_seen)
    ):
        clean = clean[: rec.steps]
    if rec.kind is None:
        notes.append(
            "no optimizer step, backward call or model forward was seen: the whole block is "
            "reported as one step"
            + (
                ". torch.compile has compiled code in this process, and a model called inside "
                "compiled code is not seen: the watch keeps its hooks out of compiled graphs, "
                "which they would break (a function under torch.compile that calls the model, "
                "or model.compile() in place). Call the result of torch.compile(model) from "
                "your loop instead, or watch a training loop, whose optimizer step ends each step"
                if w.compiled_graphs
                else ""
            )
        )
    elif phase != "measure" and clean and w.raised is None:  # a raise says it (raised_run.py)
        notes.append(
            f"the run ended before any clean step: {len(clean)} {phase.replace('_', ' ')} step(s) "
            "are reported instead (profiler and start-up costs included)"
        )
    times = [r.duration_ns - r.phase_ns for r in clean]  # as ``run.step_times_ms``
    shaped = {i for i, r in enumerate(clean) if r.new_shape}
    notes.extend(s for s in (_recompiled(clean, times), shape_cost_note(times, shaped)) if s)
    return clean, phase


def _recompiled(clean: list[StepRecord], times: list[int]) -> str | None:
    """Say where torch.compile compiled anew in a measured step (``StepRecord.compiled``): its
    time is in the mean step, though a shape is compiled once, not every step."""
    marked = [i for i, r in enumerate(clean) if r.compiled]
    rest = [t for t, r in zip(times, clean, strict=True) if not r.compiled]
    if not marked or not rest:
        return None
    spent = sum(times[i] for i in marked) / 1e6
    shown = ", ".join(str(i + 1) for i in marked[:4]) + (", ..." if len(marked) > 4 else "")
    mean = sum(times) / len(times) / 1e6
    return (
        f"torch.compile compiled anew in {len(marked)} measured step(s) ({shown}; a new input "
        f"shape, such as an epoch's short last batch): {spent:.0f} ms in all, paid once per "
        f"shape, not every step. The mean step is {mean:.2f} ms with them, "
        f"{statistics.fmean(rest) / 1e6:.2f} ms without"
    )


def _sync_sites(
    w: WatchedRun,
    stats: WindowStats | None,
    steps: int,
    measured: bool,
    texts: dict[str, str | None],
) -> list[SyncSite]:
    """The sync sites, counted over the measured steps where those are reported (scaled from
    the steps that recorded them: ``detail.py``), with the GPU idle each left in the window."""
    scale = w.detail.scale if measured else (lambda n: n)
    sync_idle = stats.sync_idle_ms if stats is not None else {}
    return [
        SyncSite(
            kind=a.kind,
            count=scale(a.measured) if measured else a.count,
            file=a.site.file if a.site else None,
            line=a.site.line if a.site else None,
            code=a.site.code if a.site else None,
            idle_ms=_per_run(sync_idle.get(key), stats, steps),
            source=_sync_source(a.site, texts),
        )
        for key, a in sorted(w.collected.syncs.items(), key=lambda kv: -kv[1].count)
        if (a.measured if measured else a.count)
    ]


def _copy_sites(w: WatchedRun, measured: bool, texts: dict[str, str | None]) -> list[CopySite]:
    """The host-to-device copy sites, counted as the sync sites are."""
    scale = w.detail.scale if measured else (lambda n: n)
    return [
        CopySite(
            kind=a.kind,
            count=scale(a.measured) if measured else a.count,
            bytes=scale(a.measured_bytes) if measured else a.bytes,
            host_ms=_ms(scale(a.measured_host_ns) if measured else a.host_ns),
            file=a.site.file if a.site else None,
            line=a.site.line if a.site else None,
            code=a.site.code if a.site else None,
            source=_sync_source(a.site, texts),
        )
        for a in w.collected.copies.values()
        if not measured or a.measured
    ]


def _loader_info(ld: Any) -> LoaderInfo | None:
    if ld is None:
        return None
    return LoaderInfo(
        ld.num_workers,
        ld.pin_memory,
        ld.batch_size,
        ld.persistent_workers,
        ld.prefetch_factor,
        ld.dataset_set_epoch,
    )


def _sampling(w: WatchedRun, measured: bool, kernels: dict[str, Any]) -> list[str]:
    """What the watch sampled rather than recorded on every step (``detail.py``): its figures
    into ``kernels``, and the notes that say so."""
    out: list[str] = []
    plan = w.detail
    if plan.decided:
        kernels["detail_every"] = plan.every
        kernels["detail_steps"] = plan.detailed
        kernels["detail_cost_pct"] = round(100.0 * (plan.share or 0.0), 3)
    if plan.hook_share is not None:
        kernels["module_hooks_every"] = plan.full_every
        kernels["module_hooks_steps"] = plan.full
        kernels["module_hooks_cost_pct"] = round(100.0 * plan.hook_share, 3)
    if measured and plan.full < plan.measured:
        calls = (
            "the model's calls were"
            if w.recorder is not None and w.recorder.kind == "forward"
            else "the model's forward, backward and optimizer calls were"
        )
        out.append(
            f"{calls} timed on {plan.full} of the {plan.measured} measured steps (the first "
            f"few, then 1 in {plan.full_every} at random): timing them on every step would cost "
            f"{100 * (plan.hook_share or 0):.1f} % of a step this short; the other steps' "
            "framework time is the mean of the timed ones"
        )
    if measured and plan.every > 1:
        out.append(
            f"host-to-device copies and host syncs were recorded on {plan.detailed} of the "
            f"{plan.measured} measured steps (the first few, then 1 in {plan.every} at random): "
            f"recording them on every step would cost {100 * (plan.share or 0):.1f} % of a step "
            "this short; their counts are scaled to all steps"
        )
    return out


def _busy_check(
    rec: StepRecorder, stats: WindowStats | None, nvml: float | None, result: Any
) -> str | None:
    """``busy_cross_check`` of the result's GPU busy against the trace's and NVML's."""
    window_step = (
        statistics.fmean(_ms(r.duration_ns) for r in rec.analysed()) if stats is not None else None
    )
    return busy_cross_check(
        result.gpu_busy_pct,
        stats.busy_pct if stats else None,
        nvml,
        window_step_ms=window_step,
        step_ms=result.step_time_ms,
        median_kernel_us=stats.median_kernel_us if stats else None,
    )


def _overhead(
    w: WatchedRun,
    rec: StepRecorder,
    clean: list[StepRecord],
    kernels: dict[str, Any],
    notes: list[str],
) -> float | None:
    """What watching cost the reported steps (%): its clocks' share times the factor for what
    they cannot see, its figures into ``kernels``, a note from ``NOTED_OVERHEAD_PCT`` on."""
    total_ns = sum(r.duration_ns for r in clean)
    seen = 100.0 * sum(r.overhead_ns for r in clean) / total_ns if total_ns else None
    factor = unseen_factor(rec.kind, w.detail.full_every)
    overhead = seen * factor if seen is not None else None
    if seen is not None:
        kernels["overhead_seen_pct"] = round(seen, 3)
        kernels["overhead_unseen_factor"] = factor
    if overhead is not None and seen is not None and overhead >= NOTED_OVERHEAD_PCT:
        notes.append(_overhead_note(overhead, seen, factor))
    # The per-event costs that overhead_pct adds to the hooks' own time (watch/calibration.py).
    for name, ns in w.calibration.as_dict().items():
        kernels[f"overhead_calibration_{name}"] = ns
    return overhead


def _overhead_note(overhead: float, seen: float, factor: float) -> str:
    return (
        f"watching cost about {overhead:.1f} % of each measured step, included in the step "
        f"time: its own clocks saw {seen:.1f} %, and on steps this short it costs about "
        f"{factor:g}x what they see (calibrated against the script's own clock"
        + (", for steps a model call ends" if factor == UNSEEN_FACTOR_FORWARD else "")
        + ")"
    )


def _claim_nothing(result: Any) -> None:
    """No step was seen: nothing to attribute, and no finding may claim a share of it."""
    result.verdict = Verdict(
        bottleneck="none",
        gpu_busy_pct=None,
        summary="No training or inference step was seen (no optimizer.step(), backward() "
        "or model forward): nothing to attribute.",
    )
    result.findings = []
    result.stall = None


def _settle_claims(result: Any, kind: str | None, phase: str, steps: int, raised: Any) -> None:
    """No step seen: nothing claimed; start-up steps only: nothing sized (``startup_run``)."""
    if kind is None:
        _claim_nothing(result)
    elif phase != "measure" and raised is None:
        unsized(result.findings, result.verdict, steps)


def _line_evidence(ev: WorkloadEvidence, w: WatchedRun, clean: list[StepRecord]) -> None:
    """The lines timed, the framework's named hooks, and the lines that call the models, for
    the host-work findings."""
    ev.host_lines = host_line_evidence(w.lines.result, ((s.file, s.line) for s in ev.syncs))
    ev.framework_hooks = framework_hook_evidence(w.framework_hooks, clean)
    ev.model_calls, ev.main_model_calls = model_calls(w)


def build_report(w: WatchedRun) -> Report:
    rec = w.recorder
    assert rec is not None
    torch = w.torch
    notes = [*w.notes, *w.optimizer_notes()]
    clean, phase = _reported_steps(w, rec, notes)
    t_read = perf_counter_ns()
    stats = _window_stats(w, notes)
    read_ms = _ms(perf_counter_ns() - t_read) if w.window is not None else None
    cuda = w.cuda_available
    if not cuda:
        notes.append(
            "CUDA is not available: GPU measurements (kernels, GPU busy, syncs, pageable copies, "
            "NVML timeline) were skipped; the step is split on the host"
        )
    elif not torch.cuda.is_initialized():
        notes.append("the run never started CUDA: nothing ran on the GPU")

    sampler = w.sampler
    if sampler is not None and cuda and sampler.reason:
        notes.append(sampler.reason)
    timeline = sampler.samples if sampler is not None else []
    if sampler is not None and not cuda and not sampler.available:
        timeline = [s for s in timeline if s.get("cpu_pct") is not None]

    peak, reserved, capacity = _memory(w)
    nvml_util = _nvml_util(clean, timeline, w.t0_ns)
    gpu_used = bool(cuda and torch.cuda.is_initialized() and (peak or 0) > 0)
    if gpu_used and stats is not None and stats.gpu and not stats.kernels_per_step:
        # A trace with GPU rows but not one kernel while the run used the GPU: CUPTI lost the
        # kernels, it did not see an idle GPU. Say so and fall back on NVML.
        notes.append(
            "the profiler window recorded no kernels although the run used the GPU: its figures "
            "are dropped and GPU busy comes from NVML's utilisation"
        )
        stats = None
    if gpu_used and (stats is None or not stats.gpu):
        notes.append(
            "the profiler window recorded no GPU activity (CUPTI unavailable?): GPU busy is "
            "NVML's utilisation"
        )
        if nvml_util is not None:
            notes.append(NO_TRACE_SPLIT_NOTE)
    flags = w.flags()
    loaders = sorted(w.collected.loaders.values(), key=lambda s: -s.calls)
    ld = loaders[0] if loaders else None
    measured = phase == "measure"

    texts: dict[str, str | None] = {}  # each user file read once for the sync and copy sites
    ev = WorkloadEvidence(
        step_mode=rec.kind or "block",
        step_times_ms=[_ms(r.duration_ns - r.phase_ns) for r in clean],
        data_wait_ms=[_ms(r.data_ns) for r in clean],
        host_copy_ms=_copy_per_step(clean),
        framework_ms=_framework_per_step(clean),
        cuda_available=cuda,
        cuda_devices=int(torch.cuda.device_count()) if cuda else 0,
        window=_gpu_window(stats) if stats is not None else None,
        syncs=_sync_sites(w, stats, len(clean), measured, texts),
        copies=_copy_sites(w, measured, texts),
        loader=_loader_info(ld),
        epoch_starts=[i for i, r in enumerate(clean) if r.epoch],
        loader_source=loader_source(w, ld),
        forward_source=forward_source(w),
        placement=placement(w),
        tf32_matmul=tf32_matmul(flags),
        peak_memory_bytes=peak,
        peak_reserved_bytes=reserved,
        memory_capacity_bytes=capacity,
        cpu_count=os.cpu_count(),
        gpu_used=gpu_used,
        nvml_util_pct=nvml_util,
        h2d_link_gbps=_link_gbps(sampler),
        phases=phase_evidence(w, rec, clean),
        optimizer=optimizer_info(w),
        optimizer_ms=_optimizer_ms(clean),
    )
    ev.float64 = float64_use(w, ev.forward_source)
    ev.batch_command, ev.batch_shapes = batch_command(w), w.batch_shapes
    _line_evidence(ev, w, clean)
    result = analyse(ev)
    _settle_claims(result, rec.kind, phase, len(clean), w.raised)

    kernels: dict[str, Any] = {"step_mode": ev.step_mode, "steps_from": phase}
    if stats is not None:
        kernels.update(stats.kernels_dict())
    if nvml_util is not None:
        kernels["nvml_util_pct_mean"] = round(nvml_util, 1)
    steady = steady_from(ev)
    kernels["steady_from_step"] = steady + 1
    cost = window_cost(w, clean[steady:], read_ms)
    if cost:
        kernels.update(cost)
    check = _busy_check(rec, stats, nvml_util, result)
    if check:
        notes.append(check)
        kernels["busy_trusted"] = "trace"
    if sampler is not None and w.end_ns > w.t0_ns:
        kernels["sampler_busy_pct"] = round(
            100.0 * sampler.busy_s / ((w.end_ns - w.t0_ns) / 1e9), 3
        )
    if reserved is not None:
        kernels["peak_reserved_bytes"] = reserved
    notes.extend(_sampling(w, measured, kernels))
    overhead = _overhead(w, rec, clean, kernels, notes)
    step_ms = [round(_ms(r.duration_ns), 3) for r in clean]
    run: dict[str, Any] = {
        "steps": len(clean),
        "warmup_steps": sum(r.phase == "warmup" for r in rec.records),
        "step_time_ms": round(result.step_time_ms, 3),
        "step_time_median_ms": round(median_step(ev), 3),
        "step_times_ms": step_ms,
        "step_starts_s": [round((r.start_ns - w.t0_ns) / 1e9, 6) for r in clean],
        "breakdown_ms": {k: round(v, 3) for k, v in result.breakdown_ms.items()},
        "gpu_busy_pct": result.gpu_busy_pct,
        "overhead_pct": round(overhead, 3) if overhead is not None else None,
        "timeline": timeline,
        "peak_memory_bytes": peak,
        "memory_capacity_bytes": capacity,
        "kernels": kernels,
        "syncs": _sync_rows(ev.syncs),
    }
    _add_run_extras(run, w, ev, result, step_ms)
    sol = _speed_of_light(w, ev.step_times_ms)
    if sol is not None:
        run["speed_of_light"] = sol
        line = summary_line(sol)
        if line and result.verdict.bottleneck in BUSY_VERDICTS:
            result.verdict.summary = f"{result.verdict.summary.rstrip()} {line}"
    if ev.phases:
        run["phases"] = phase_rows(ev.phases, len(steady_steps(ev)))
        unmeasured = unmeasured_note(ev.phases, len(clean))
        if unmeasured:
            notes.append(unmeasured)
    if w.raised is not None:
        run["error"] = w.raised.as_dict(len(clean) if measured else 0)
    outcome = _outcome_note(w, rec, len(clean), run.get("error"))
    if outcome:
        notes.append(outcome)
    report = Report(
        kind="watch",
        machine=machine_facts(torch),
        run=run,
        verdict=result.verdict,
        findings=result.findings,
        notes=notes,
        title=w.label,
    )
    return _finish(report, run, rec, w)


def _finish(report: Report, run: dict[str, Any], rec: Any, w: WatchedRun) -> Report:
    """The verdict's last word: a run that raised before its first measured step is that
    exception (nothing was measured); a run with no step claims nothing; else the debugging
    switches the steps ran with are found, and a CPU-only build leads."""
    if "error" in run and run["error"]["measured_steps"] == 0:
        return report_raised(report, run)
    if rec.kind is None:
        return report
    report.findings.extend(debug_switches(w.flags(), os.environ, bool(w.cuda_available)))
    return lead_with_cpu_only_build(report)


def _speed_of_light(w: WatchedRun, own_ms: list[float]) -> dict[str, Any] | None:
    """FLOPs per step against this GPU's ceilings, over the training steps' own time (the
    phases between them left out) and the GPU's work still queued after the last one."""
    counted = w.flops.result
    if counted is None:
        return None
    step_ms = None
    if own_ms:
        step_ms = (sum(own_ms) + (w.end_drain_ms or 0.0)) / len(own_ms)
    torch = w.torch
    name = None
    if w.cuda_available and torch.cuda.is_initialized():
        name = str(torch.cuda.get_device_name(torch.cuda.current_device()))
    measured = measure_ceilings(torch, counted) if name else {}
    return speed_of_light(counted, step_ms, name, measured)


def _sync_rows(syncs: list[Any]) -> list[dict[str, Any]]:
    """The report's sync sites: kind, count, GPU idle after them, the source line."""
    rows = []
    for s in syncs:
        row: dict[str, Any] = {
            "kind": s.kind,
            "count": s.count,
            "total_ms": round(s.idle_ms, 3) if s.idle_ms is not None else None,
        }
        if s.file is not None and s.line is not None:
            row["source"] = {"file": s.file, "line": s.line, **({"code": s.code} if s.code else {})}
        rows.append(row)
    return rows


def _add_run_extras(
    run: dict[str, Any], w: WatchedRun, ev: Any, result: Any, step_ms: list[float]
) -> None:
    """The run's optional fields: the GPU's drain, the spread, a stall, items, epochs, label,
    the host's time by line."""
    lines = host_lines_run(w.lines.result, ev.host_lines)
    if lines is not None:
        run["host_lines"] = lines
    if (hooks := hooks_run(ev.framework_hooks)) is not None:
        run["framework_hooks"] = hooks
    if w.end_drain_ms is not None and step_ms:
        run["end_drain_ms"] = round(w.end_drain_ms, 3)
    spread = _spread(step_ms)
    if spread:
        run["step_time_spread_ms"] = spread
    if result.stall is not None:
        run["stall"] = result.stall.as_dict()
    items = items_per_step(w, ev.placement.batch_size if ev.placement else None)
    hinted = hinted_batch(w, ev.batch_command)
    if hinted is not None and not _loader_feeds(w):
        items = hinted
    if items:
        run["items_per_step"] = items
    if ev.epoch_starts:
        run["epoch_starts"] = ev.epoch_starts
    if w.label:
        run["label"] = w.label


def _outcome_note(
    w: WatchedRun, rec: Any, measured: int, error: dict[str, Any] | None = None
) -> str | None:
    """How the watched code ended, where that bounds what the report covers."""
    if w.outcome == "stopped":
        asked = rec.steps
        if asked is None or asked == measured:
            return f"stopped after the {measured} measured steps asked for"
        if measured < asked:
            return (
                f"stopped after {measured} measured steps ({asked} asked for: the window's "
                "time was up)"
            )
        names = {"evaluation": "an evaluation", "checkpoint": "a checkpoint"}
        kinds = sorted({names.get(e.kind, "an epoch start") for e in w.phases.tracker.events})
        why = " or ".join(kinds) if rec.phase_seen and kinds else "a long enough window"
        return f"stopped after {measured} measured steps ({asked} asked for, more to cover {why})"
    if rec.capped:
        return (
            f"measured the first {rec.measured:,} steps after the warm-up and let the rest of the "
            "run go unwatched (each measured step keeps a record); --steps N measures another "
            "number and then stops the script"
        )
    if w.outcome == "interrupted":
        return f"interrupted after {rec.completed} steps; the report covers what ran"
    if w.outcome.startswith("exited"):
        return f"the script {w.outcome}; the report covers what ran"
    if error is not None:
        return raised_note(error)
    if w.outcome.startswith("raised"):
        return f"the watched code {w.outcome}; the report covers what ran"
    return None


def busy_cross_check(
    reported: float | None,
    window: float | None,
    nvml: float | None,
    *,
    window_step_ms: float | None = None,
    step_ms: float | None = None,
    median_kernel_us: float | None = None,
) -> str | None:
    """When the reported GPU busy and NVML's utilisation over the same steps disagree by over
    40 points: why, and which figure to trust (the trace's, with the reason).

    The reported figure is the profiler window's kernel time per step over the mean step of
    the whole run, so a window of untypical steps no longer skews it. What is left:
    * NVML counts a sample period busy if any kernel ran in it: many short kernels with gaps
      between them read near 100 % while the GPU mostly idles. The trace's kernel time is exact.
    * NVML also counts other processes' kernels, and averages over its own sample period.
    """
    if reported is None or nvml is None or abs(reported - nvml) <= 40.0:
        return None
    w = f" (profiler window {window:.0f}%)" if window is not None else ""
    parts = [f"GPU busy {reported:.0f}%{w} disagrees with NVML's utilisation {nvml:.0f}%"]
    if (
        window_step_ms
        and step_ms
        and max(window_step_ms, step_ms) > 1.5 * min(window_step_ms, step_ms)
    ):
        parts.append(
            f"the profiled steps took {window_step_ms:.1f} ms against the run's mean "
            f"{step_ms:.1f} ms, so the figure reported is the window's kernel time over the "
            "run's mean step"
        )
    if nvml > reported and median_kernel_us is not None and median_kernel_us < 50.0:
        parts.append(
            f"NVML counts a sample period busy when any kernel ran in it, and this run's "
            f"kernels are short (median {median_kernel_us:.0f} µs) with gaps between them: "
            "the trace's kernel time is exact, so trust the reported figure"
        )
        return "; ".join(parts) + "."
    if nvml > reported:
        parts.append(
            "NVML also counts other processes' kernels and kernels launched outside the steps; "
            "the trace times this run's own kernels, so trust the reported figure"
        )
        return "; ".join(parts) + "."
    parts.append(
        "NVML saw less than the trace over the same steps: NVML averages over its own sample "
        "period and a short run has few samples, so the reported figure stands, but is rough"
    )
    return "; ".join(parts) + "."


def failed_report(w: WatchedRun, exc: BaseException) -> Report:
    machine: dict[str, Any]
    try:
        machine = machine_facts(w.torch)
    except Exception:
        machine = build_machine(None)  # the host alone: torch's facts are what failed
    return Report(
        kind="watch",
        machine=machine,
        verdict=Verdict(bottleneck="none", gpu_busy_pct=None, summary="The diagnosis failed."),
        notes=[*w.notes, f"gpusight could not build the report: {type(exc).__name__}: {exc}"],
        title=w.label,
    )
