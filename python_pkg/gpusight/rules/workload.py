"""Watched-run evidence -> step-time breakdown, verdict and findings. Pure; never imports torch.

The watch (``gpusight.watch``) fills a :class:`WorkloadEvidence` with plain numbers: step times
and per-step host measurements over the clean (unprofiled) steps, plus a summary of a short
profiler window. ``analyse`` turns it into a breakdown in which each millisecond of a step is
counted once, a verdict naming the bottleneck category, and findings sorted by the share of
step time their fix could recover.

A step's time is the whole window's time over its steps (throughput): a median describes the
typical step but would drop the stalls of a bursty loader, which are where the time goes.

How a step is split (ms per step, summing to the mean step time):

* With a GPU profiler window: kernel time per step is physical (profiling inflates host time,
  not kernel time), so compute, communication and copy come from the window as measured; the
  DataLoader wait is the hooks' measurement over clean steps times the share of it that the
  window found exposed (GPU idle meanwhile; all of it when the window saw too little waiting to
  tell, as when its few steps fell between a bursty loader's stalls); what remains of the step
  is divided among sync stalls, launch overhead and other host time in the window's proportions.
* With a GPU but no kernel trace (CUPTI lost the kernels, or was not there): compute is NVML's
  utilisation, data wait and copies are the hooks', and the rest is divided between launch
  overhead and other host time as the host's time inside and outside forward/backward/optimizer
  divides (``no_trace_weights``).
* Without a GPU (CPU-only run): compute is the host time inside forward/backward/optimizer,
  data wait and copies are what the hooks measured, the rest is other host time.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..durations import format_ms
from ..fixes.workload_patches import loader_values_fix
from ..report import Finding, Fix, Scalar, Verdict
from ..report_schema import breakdown_keys
from . import between_steps
from .severity import settle
from .stalls import Stall, stall_phrase
from .workload_evidence import (
    CodeSource,
    CopySite,
    GpuWindow,
    LoaderInfo,
    LoaderSource,
    ModuleOnCpu,
    OptimizerInfo,
    Placement,
    SyncSite,
    WorkloadEvidence,
    mean_at,
    median_step,
    ran_on_gpu,
    stall_of,
    steady_from,
    steady_start,
    steady_steps,
    step_time,
)
from .workload_findings import findings
from .workload_impacts import pct, rnd

CATEGORY_BOTTLENECK = {
    "data_wait": "input_pipeline",
    "copy": "memory_transfer",
    "sync_stall": "host_sync",
    "launch_overhead": "launch_overhead",
    "other_cpu": "host_cpu",
    "communication": "communication",
}
REPORTED_KEYS = breakdown_keys()
"""The report's breakdown: the step's own categories, then what ran between the steps."""
BREAKDOWN_KEYS = tuple(k for k in REPORTED_KEYS if k != "between_steps")
"""The categories inside a training step."""
# Above this GPU-busy (compute) share the GPU itself sets the pace.
COMPUTE_BOUND_PCT = 80.0
# A category must hold at least this share of the step to be named the bottleneck.
NAMED_PCT = 5.0
# A DataParallel wrapper is the verdict unless a cause its scatter/gather cannot be (the
# loader, host syncs, copies, collectives) holds at least this share of the step: on one GPU it
# costs little, and imagenet_dataparallel (h200-run19) read device_placement with its own
# loader critical.
DP_YIELDS_PCT = 25.0
_NOT_DP = ("data_wait", "sync_stall", "copy", "communication")
_PLACEMENT_IDS = ("code.cpu_model", "code.device_mismatch", "code.dataparallel")


@dataclass
class WorkloadResult:
    step_time_ms: float
    breakdown_ms: dict[str, float]
    gpu_busy_pct: float | None
    verdict: Verdict
    findings: list[Finding]
    stall: Stall | None = None


# The window's own data wait tells how much of the loader's wait left the GPU idle only when it
# saw a fair share of the run's waiting: a few profiled steps between two stalls saw none.
WINDOW_WAIT_SHARE = 0.25


def breakdown(ev: WorkloadEvidence) -> dict[str, float]:
    """Milliseconds per step by category; the values add up to the mean step time.

    Host components are the means over the steady steps, so a stall every k steps counts in
    full, once.
    """
    total = step_time(ev)
    out = dict.fromkeys(BREAKDOWN_KEYS, 0.0)
    if total <= 0:
        return out
    idx = steady_steps(ev)
    data = mean_at(ev.data_wait_ms, idx)
    copy = mean_at(ev.host_copy_ms, idx)
    w = ev.window
    if w is not None and w.gpu:
        representative = w.data_wait_host_ms >= WINDOW_WAIT_SHARE * data
        exposed = (
            min(1.0, w.split_ms.get("data_wait", 0.0) / w.data_wait_host_ms)
            if w.data_wait_host_ms > 0 and representative
            else 1.0
        )
        fixed = {
            "compute": w.split_ms.get("compute", 0.0),
            "communication": w.split_ms.get("communication", 0.0),
            "copy": w.split_ms.get("copy", 0.0),
            "data_wait": data * exposed,
        }
        rest_keys: tuple[str, ...] = ("sync_stall", "launch_overhead", "other_cpu")
        rest_w = {k: w.split_ms.get(k, 0.0) for k in rest_keys}
    elif ev.gpu_used and ev.nvml_util_pct is not None:
        # No kernel trace: NVML's utilisation (the share of time any kernel ran) is the
        # compute share; the idle rest is split by the host's own clocks.
        fixed = {"compute": total * ev.nvml_util_pct / 100.0, "data_wait": data, "copy": copy}
        rest_w = no_trace_weights(ev, total)
        rest_keys = tuple(rest_w)
    else:
        compute = mean_at(ev.framework_ms, idx)
        fixed = {"compute": compute, "data_wait": data, "copy": copy}
        rest_keys = ("other_cpu",)
        rest_w = {"other_cpu": 1.0}
    used = sum(fixed.values())
    if used > total:
        scale = total / used
        fixed = {k: v * scale for k, v in fixed.items()}
        used = total
    out.update(fixed)
    rest = total - used
    weight = sum(rest_w.values())
    for k in rest_keys:
        out[k] += rest * (rest_w[k] / weight if weight > 0 else (1.0 if k == "other_cpu" else 0.0))
    return out


def no_trace_weights(ev: WorkloadEvidence, total: float) -> dict[str, float]:
    """How the GPU's idle time divides when no kernel trace says: ``launch_overhead`` and
    ``other_cpu`` in proportion to the host's time inside the model's forward, backward and
    optimizer calls and outside them (the loader's wait and host copies left out).

    A host that spends the step launching kernels inside the model's calls (gradient
    accumulation over many small micro-batches) leaves the GPU idle there, not in host work
    outside the model. No sync stall is claimed: without a trace nothing measures it.
    """
    idx = steady_steps(ev)
    inside = mean_at(ev.framework_ms, idx)
    outside = total - inside - mean_at(ev.data_wait_ms, idx) - mean_at(ev.host_copy_ms, idx)
    return {"launch_overhead": max(0.0, inside), "other_cpu": max(0.0, outside)}


def _summary(
    category: str, split: dict[str, float], total: float, busy: float | None, ev: WorkloadEvidence
) -> str:
    b = f"GPU busy {busy:.0f}%" if busy is not None else "no GPU in use"

    def part(key: str) -> str:
        return (
            f"{format_ms(split[key])} of each {format_ms(total)} step "
            f"({pct(split[key], total):.0f}%)"
        )

    calls = "the model's calls" if ev.step_mode == "forward" else "forward/backward/optimizer"
    stall = stall_of(ev)
    periodic = (
        f" ({stall_phrase(stall, 'stall')} ~{stall.stall_ms:.0f} ms)"
        if stall is not None and stall.period_steps and stall.cause != "host"
        else ""
    )
    texts = {
        "input_pipeline": (
            f"Input pipeline: the step waits for the DataLoader{periodic} {part('data_wait')}; {b}."
        ),
        "memory_transfer": f"Host-to-device copies take {part('copy')}; {b}.",
        "host_sync": f"Host syncs leave the GPU idle {part('sync_stall')}; {b}.",
        "launch_overhead": f"Kernel launch overhead: the GPU idles inside forward/backward "
        f"{part('launch_overhead')}; {b}.",
        "host_cpu": f"Host work outside the model takes {part('other_cpu')}; {b}.",
        "communication": f"Collectives take {part('communication')}; {b}.",
        "precision": f"The GPU is busy but float32 matmuls run without Tensor Cores; {b}.",
        "compute": (
            f"The GPU sets the pace: {b} over a {format_ms(total)} step."
            if ran_on_gpu(ev)
            else f"Host compute in {calls} takes {part('compute')}; {b}."
        ),
        "device_placement": f"Device placement comes first; {b}.",
        "none": "No steps were measured.",
    }
    return texts.get(category, f"{category}; {b}.")


def verdict(ev: WorkloadEvidence, split: dict[str, float], found: list[Finding]) -> Verdict:
    total = step_time(ev)
    busy = gpu_busy_pct(ev, split)
    if total <= 0:
        return Verdict(
            bottleneck="none", gpu_busy_pct=busy, summary=_summary("none", split, total, busy, ev)
        )
    what = _placement_first(found, split, total)
    if what is not None:
        return Verdict(
            bottleneck="device_placement",
            gpu_busy_pct=busy,
            summary=f"{what.title}; "
            + (f"GPU busy {busy:.0f}%." if busy is not None else "no GPU in use."),
        )
    share = {k: pct(v, total) for k, v in split.items()}
    candidates = {CATEGORY_BOTTLENECK[k]: share[k] for k in CATEGORY_BOTTLENECK}
    amp = next((f for f in found if f.id == "load.amp_unused"), None)
    if amp is not None and amp.impact.recoverable_pct:
        candidates["precision"] = amp.impact.recoverable_pct
    best, best_share = max(candidates.items(), key=lambda kv: kv[1])
    if share["compute"] >= COMPUTE_BOUND_PCT or kernels_account_for_step(ev, total):
        # The device sets the pace; name what it spends the step on. Copies and collectives are
        # device work too: a step that is mostly a pageable H2D copy is a transfer problem.
        device_side = {
            "compute": share["compute"],
            "memory_transfer": share["copy"],
            "communication": share["communication"],
        }
        top = max(device_side, key=lambda k: device_side[k])
        if top != "compute" and device_side[top] > share["compute"]:
            category = top
        else:
            category = "precision" if candidates.get("precision", 0.0) >= 15.0 else "compute"
    elif best_share >= NAMED_PCT:
        category = best
    else:
        category = "compute"
    summary = _summary(category, split, total, busy, ev)
    return Verdict(bottleneck=category, gpu_busy_pct=busy, summary=summary)


def _placement_first(found: list[Finding], split: dict[str, float], total: float) -> Finding | None:
    """The placement finding the verdict names ahead of the step's split: a model or batch on
    the wrong device always (a part of the model on the CPU whose measured time is a small
    share of the step, an ``info``, is not the verdict); a DataParallel wrapper unless a cause
    it cannot be takes more of the step (``DP_YIELDS_PCT``)."""
    placed = [f for f in found if f.id in _PLACEMENT_IDS and f.severity != "info"]
    blocker = next((f for f in placed if f.id != "code.dataparallel"), None)
    if blocker is not None or not placed:
        return blocker
    other = max(pct(split.get(k, 0.0), total) for k in _NOT_DP)
    return None if other >= DP_YIELDS_PCT else placed[0]


def kernels_account_for_step(ev: WorkloadEvidence, total: float) -> bool:
    """The GPU work each step launched takes (nearly) the whole steady step: the GPU sets the
    pace, whatever idle time a host-side view of the window suggested."""
    w = ev.window
    return (
        w is not None
        and w.issued_gpu_ms is not None
        and total > 0
        and w.issued_gpu_ms >= COMPUTE_BOUND_PCT / 100.0 * total
    )


def gpu_busy_pct(ev: WorkloadEvidence, split: dict[str, float]) -> float | None:
    total = step_time(ev)
    if (ev.window is None or not ev.window.gpu) and ev.gpu_used and ev.nvml_util_pct is not None:
        return rnd(ev.nvml_util_pct, 2)
    if ran_on_gpu(ev) and total > 0:
        return rnd(min(100.0, pct(split["compute"], total)), 2)
    return 0.0 if ev.cuda_available and ev.window is not None else None


def analyse(ev: WorkloadEvidence) -> WorkloadResult:
    split = breakdown(ev)
    found = findings(ev, split)
    result = WorkloadResult(
        step_time_ms=step_time(ev),
        breakdown_ms=split,
        gpu_busy_pct=gpu_busy_pct(ev, split),
        verdict=verdict(ev, split, found),
        findings=found,
        stall=stall_of(ev),
    )
    if ev.phases:
        _add_phases(ev, result)
    settle(result.findings)  # the severity follows the gain (severity.py)
    return result


def _add_phases(ev: WorkloadEvidence, result: WorkloadResult) -> None:
    """The phases between the steps join the training step's split as a category of their own,
    with their findings; they are the verdict where they take more than any cause inside the
    step (compute aside: the GPU's own work is no time to give back)."""
    n = len(steady_steps(ev))
    between = between_steps.between_steps_ms(ev.phases, n)
    if between <= 0:
        return
    whole = result.step_time_ms + between
    result.step_time_ms = whole
    result.breakdown_ms["between_steps"] = between
    found = between_steps.findings(ev.phases, whole, n)
    if any(p.kind == between_steps.EPOCH_START and p.feeds_steps for p in ev.phases):
        # The loader whose workers restart is the one that fed the steps: its call is patched.
        for f in found:
            if f.id == between_steps.FINDING_IDS[between_steps.EPOCH_START]:
                f.fix = loader_values_fix(f.fix, ev.loader_source, {"persistent_workers": True})
    result.findings.extend(found)
    inside = max(
        (v for k, v in result.breakdown_ms.items() if k not in ("compute", "between_steps")),
        default=0.0,
    )
    share = pct(between, whole)
    if result.verdict.bottleneck not in ("device_placement", "none") and (
        share >= between_steps.NAMED_PCT and between > inside
    ):
        busy = result.verdict.gpu_busy_pct
        b = f"GPU busy {busy:.0f}% in the training steps" if busy is not None else "no GPU in use"
        result.verdict = Verdict(
            bottleneck="between_steps",
            gpu_busy_pct=busy,
            summary=between_steps.summary(ev.phases, share, b),
        )


def scalar(value: object) -> Scalar:
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)


__all__ = [
    "BREAKDOWN_KEYS",
    "REPORTED_KEYS",
    "CodeSource",
    "CopySite",
    "Fix",
    "GpuWindow",
    "LoaderInfo",
    "LoaderSource",
    "ModuleOnCpu",
    "OptimizerInfo",
    "Placement",
    "SyncSite",
    "WorkloadEvidence",
    "WorkloadResult",
    "analyse",
    "breakdown",
    "findings",
    "median_step",
    "no_trace_weights",
    "steady_from",
    "steady_start",
    "steady_steps",
    "step_time",
    "verdict",
]
