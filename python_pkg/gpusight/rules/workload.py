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
* Without a GPU (CPU-only run): compute is the host time inside forward/backward/optimizer,
  data wait and copies are what the hooks measured, the rest is other host time.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from ..durations import format_ms
from ..fixes import fix
from ..fixes import workload as _workload_snippets  # noqa: F401  (registers the snippets)
from ..fixes.batch_knob import batch_knob_text
from ..fixes.cell_patch import CellSource, with_cell_fix, with_statement_cell_fix
from ..fixes.patch import loader_patch, unified_diff
from ..fixes.patch_files import with_patch
from ..fixes.placement import to_device_text
from ..fixes.statement_patches import autocast_text, log_every_text
from ..fixes.where_made import channels_last_text, pin_source_text
from ..report import Evidence, Finding, Fix, Impact, Scalar, Severity, SourceLine, Verdict
from . import between_steps
from .between_steps import PhaseSeen
from .stalls import Stall, find_stalls, stall_phrase, workers_to_keep_up

CATEGORY_BOTTLENECK = {
    "data_wait": "input_pipeline",
    "copy": "memory_transfer",
    "sync_stall": "host_sync",
    "launch_overhead": "launch_overhead",
    "other_cpu": "host_cpu",
    "communication": "communication",
}
BREAKDOWN_KEYS = (
    "compute",
    "data_wait",
    "copy",
    "sync_stall",
    "launch_overhead",
    "other_cpu",
    "communication",
)
REPORTED_KEYS = (*BREAKDOWN_KEYS, "between_steps")
"""The report's breakdown: the step's own categories, then what ran between the steps."""
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
# A batch built in the main process this fast (ms) is no input-pipeline problem: a worker's
# handoff of the batch (pickled through shared memory) costs a good part of it (the PyG GCN at
# one graph a batch read a false 1.17x warn beside its launch-bound verdict).
SMALL_COLLATE_MS = 1.0
# Tensor Cores run bf16 matmuls several times faster than float32 without them; claim a
# conservative three quarters of that kernel time back.
TENSOR_CORE_RECOVERY = 0.75


@dataclass
class SyncSite:
    kind: str
    count: int
    file: str | None = None
    line: int | None = None
    code: str | None = None
    idle_ms: float | None = None
    """GPU idle time this site's syncs left behind: measured in the profiler window, scaled to
    the measured steps (ms in total; ``run.syncs[].total_ms``)."""
    source: CodeSource | None = None
    """The user's file around the line, where it is a file of theirs: a fix patches it."""


@dataclass
class CopySite:
    kind: str
    """``pageable_async`` (non_blocking from pageable: hidden sync), ``pageable_sync``,
    ``pinned_sync`` (could be non_blocking) or ``pinned_async``."""
    count: int
    bytes: int
    host_ms: float
    file: str | None = None
    line: int | None = None
    code: str | None = None
    source: CodeSource | None = None
    """The user's file around the line, where it is a file of theirs: a fix pins the copy's
    source where it is made."""


@dataclass
class LoaderInfo:
    num_workers: int | None = None
    pin_memory: bool | None = None
    batch_size: int | None = None
    persistent_workers: bool | None = None
    prefetch_factor: int | None = None


@dataclass
class CodeSource:
    """A line of the user's file that a fix changes, with the file's text to patch."""

    path: str
    """The file as the patch names it (relative to where the run started)."""
    text: str
    """The file's text when the run saw it."""
    line: int
    """A line of the call or statement (the ``DataLoader(...)`` call, the model's call, ...)."""
    cell: CellSource | None = None
    """The notebook cell that holds the call, as the kernel ran it (in a notebook)."""


LoaderSource = CodeSource


@dataclass
class Placement:
    module: str | None = None
    param_devices: list[str] = field(default_factory=list)
    input_devices: list[str] = field(default_factory=list)
    dataparallel: bool = False
    dataparallel_devices: int | None = None
    has_conv: bool = False
    input_channels_last: bool | None = None
    model_channels_last: bool | None = None
    autocast: bool = False
    autocast_dtype: str | None = None
    batch_size: int | None = None
    grad_enabled: bool | None = None


@dataclass
class GpuWindow:
    """What the profiler window measured, per step (ms) unless said otherwise."""

    steps: int
    gpu: bool
    split_ms: dict[str, float]
    data_wait_host_ms: float = 0.0
    busy_pct: float | None = None
    kernels_per_step: float = 0.0
    launches_per_step: float = 0.0
    median_kernel_us: float | None = None
    matmul_ms: float = 0.0
    matmul_fp32_ms: float = 0.0
    matmul_tensor_core_ms: float = 0.0
    conv_ms: float = 0.0
    conv_lowp_ms: float = 0.0
    layout_transform_ms: float = 0.0
    memcpy_h2d_pageable: int = 0
    memcpy_h2d_pageable_bytes: int = 0
    cpu_op_loop_ms: float = 0.0
    top_cpu_ops: list[tuple[str, float]] = field(default_factory=list)
    issued_gpu_ms: float | None = None
    """GPU time of the work each step launched, wherever it ran (None: not known)."""
    device_paced: bool = False
    """The window saw the host run ahead of the GPU; its split is the GPU's own."""


@dataclass
class WorkloadEvidence:
    step_mode: str
    """How steps were found: ``optimizer``, ``backward``, ``forward`` or ``block`` (none found)."""
    step_times_ms: list[float]
    data_wait_ms: list[float] = field(default_factory=list)
    host_copy_ms: list[float] = field(default_factory=list)
    framework_ms: list[float] = field(default_factory=list)
    """Host time inside forward, backward and optimizer.step, per step."""
    cuda_available: bool = False
    cuda_devices: int = 0
    window: GpuWindow | None = None
    syncs: list[SyncSite] = field(default_factory=list)
    copies: list[CopySite] = field(default_factory=list)
    loader: LoaderInfo | None = None
    placement: Placement | None = None
    tf32_matmul: bool | None = None
    peak_memory_bytes: int | None = None
    peak_reserved_bytes: int | None = None
    memory_capacity_bytes: int | None = None
    cpu_count: int | None = None
    gpu_used: bool = False
    """The run put work on a GPU (CUDA started, memory allocated)."""
    nvml_util_pct: float | None = None
    """NVML's mean utilisation over the measured steps: GPU busy when no trace says better."""
    epoch_starts: list[int] = field(default_factory=list)
    """Indices of the steps in which a new DataLoader iterator (an epoch) began."""
    loader_source: LoaderSource | None = None
    """Where the user's code built the DataLoader: a fix to it is a patch of that call."""
    forward_source: CodeSource | None = None
    """Where the user's code calls the model (the main module's top-level forward): autocast
    wraps that statement."""
    h2d_link_gbps: float | None = None
    """One direction of the GPU's PCIe link at its best, after encoding (NVML; GB/s)."""
    phases: list[PhaseSeen] = field(default_factory=list)
    """Evaluation and checkpoint saving between the training steps; ``step_times_ms`` and
    the other per-step figures leave their time out (``between_steps.py``)."""


@dataclass
class WorkloadResult:
    step_time_ms: float
    breakdown_ms: dict[str, float]
    gpu_busy_pct: float | None
    verdict: Verdict
    findings: list[Finding]
    stall: Stall | None = None


def _mean(xs: list[float]) -> float:
    return statistics.fmean(xs) if xs else 0.0


# A leading step this many times shorter than the later steps' median is a transient (the
# last queue-filling step is often partly filled: 46 ms among 63 ms steps).
TRANSIENT_RATIO = 1.2
# The leading steps, by their median, are at least this many times shorter than the later ones
# where the host ran ahead of the GPU (12.6 ms against 63 on the H200's fp32_transformer).
QUEUE_RATIO = 2.0


def steady_start(times: list[float], on_gpu: bool = True) -> int:
    """Index of the first steady step: leading steps much shorter than the later ones dropped.

    After a device sync (CUDA start-up, the profiler window's end) the launch queue is empty
    and the host runs ahead of a busy GPU: its steps look short until the queue fills, then
    every step takes the GPU's time. Those leading steps say how fast the host enqueues, not
    how long a step takes. At most the first half of the steps is dropped; the reference is
    the median of the second half. Only where the steps ran on a GPU (``on_gpu``), and only
    where the steps dropped are, by their median, under half the reference: a step that slows
    down over the run (a CPU's pace, a model whose numbers drift into slow ranges) is no queue
    filling, and its early steps are the user's too.
    """
    n = len(times)
    if n < 4 or not on_gpu:
        return 0
    ref = statistics.median(times[n // 2 :])
    k = 0
    while k < n // 2 and times[k] * TRANSIENT_RATIO < ref:
        k += 1
    if k and statistics.median(times[:k]) * QUEUE_RATIO > ref:
        return 0
    return k


def steady_from(ev: WorkloadEvidence) -> int:
    """``steady_start`` of the evidence's steps."""
    return steady_start(ev.step_times_ms, ran_on_gpu(ev))


def step_time(ev: WorkloadEvidence) -> float:
    """The mean steady step: the window's time over its steps, every stall included."""
    times = ev.step_times_ms[steady_from(ev) :]
    return statistics.fmean(times) if times else 0.0


def median_step(ev: WorkloadEvidence) -> float:
    """The typical steady step (the median): what a step takes when nothing stalls it."""
    times = ev.step_times_ms[steady_from(ev) :]
    return statistics.median(times) if times else 0.0


def stall_of(ev: WorkloadEvidence) -> Stall | None:
    start = steady_from(ev)
    times = ev.step_times_ms[start:]
    waits = ev.data_wait_ms[start:] if len(ev.data_wait_ms) == len(ev.step_times_ms) else None
    ld = ev.loader or LoaderInfo()
    found = find_stalls(
        times,
        waits,
        [i - start for i in ev.epoch_starts if i >= start],
        ld.num_workers,
        ld.prefetch_factor,
    )
    if found is not None and start:
        found.steps = [i + start for i in found.steps]
    return found


def ran_on_gpu(ev: WorkloadEvidence) -> bool:
    return (ev.window is not None and ev.window.gpu) or (
        ev.gpu_used and ev.nvml_util_pct is not None
    )


def steady_steps(ev: WorkloadEvidence) -> list[int]:
    """Indices of the steady steps: every step after the leading transients, stalls included."""
    return list(range(steady_from(ev), len(ev.step_times_ms)))


def _mean_at(xs: list[float], idx: list[int]) -> float:
    picked = [xs[i] for i in idx if i < len(xs)]
    return statistics.fmean(picked) if picked else 0.0


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
    data = _mean_at(ev.data_wait_ms, idx)
    copy = _mean_at(ev.host_copy_ms, idx)
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
        # compute share; the idle rest is not split by cause beyond what the hooks measured.
        fixed = {"compute": total * ev.nvml_util_pct / 100.0, "data_wait": data, "copy": copy}
        rest_keys = ("other_cpu",)
        rest_w = {"other_cpu": 1.0}
    else:
        compute = _mean_at(ev.framework_ms, idx)
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


def _pct(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole > 0 else 0.0


def _r(x: float, n: int = 1) -> float:
    return round(x, n)


def _severity(share: float, warn: float, critical: float) -> Severity:
    return "critical" if share >= critical else "warn" if share >= warn else "info"


def _source(
    file: str | None, line: int | None, code: str | None, count: int | None
) -> SourceLine | None:
    if file is None or line is None:
        return None
    return SourceLine(file=file, line=line, code=code, count=count)


def _site_text(file: str | None, line: int | None) -> str:
    if file is None or line is None:
        return "(line unknown)"
    return f"{file} line {line}" if file == "cell" else f"{file}:{line}"


# An estimate from the idle share of today's step never claims more than this share back: near
# 100 % the formula 1 / (1 - share) runs off to infinity on rounding alone.
MAX_ESTIMATED_SHARE = 95.0


def _impact(share: float, text: str) -> Impact:
    share = max(0.0, min(100.0, share))
    capped = min(share, MAX_ESTIMATED_SHARE)
    speedup = 100.0 / (100.0 - capped)
    if share > MAX_ESTIMATED_SHARE:
        text = f"{text} ({speedup:.0f}x or more: an estimate from the idle share stops there.)"
    return Impact(
        basis="estimated",
        text=text,
        recoverable_pct=_r(share),
        speedup=round(speedup, 2),
    )


# Of a PCIe link's bandwidth after encoding, what pinned host-to-device copies reach (H200,
# Gen5 x16: 55 of 63 GB/s, benchmarks/results/h200-bench-run7).
PINNED_LINK_SHARE = 0.85


def _pinned_copy_impact(split: dict[str, float], mb: float | None, link: float | None) -> Impact:
    """Copies from pinned memory, ``non_blocking``: the host no longer waits for them (nor, for
    a non_blocking copy from pageable memory, for the GPU's queue before them), so the step
    becomes the longer of the host's other work and the GPU's kernels plus the copy. The copy's
    time is a range: today's (at most) to none; the estimate is the copy at the share of the
    link's speed that pinned copies reach, or, the link unknown, at twice today's speed."""
    step = sum(split.values())
    host = split["launch_overhead"] + split["other_cpu"] + split["data_wait"]
    gpu = split["compute"] + split["communication"]
    if step <= 0 or split["copy"] <= 0:
        return _impact(0.0, "Pinned copies run asynchronously, overlapping compute.")
    floor = max(host, gpu, 1e-6)
    lo = min(MAX_RANGE, step / max(host, gpu + split["copy"], 1e-6))
    hi = max(lo, min(MAX_RANGE, step / floor))
    text = (
        "Pinned and non_blocking, a copy no longer holds the host: the step becomes the longer "
        f"of the host's other work ({host:.1f} ms) and the GPU's kernels plus the copy."
    )
    if link and mb:
        copy_ms = min(split["copy"], mb / (link * PINNED_LINK_SHARE))  # MB / (GB/s) = ms
        basis = (
            f" The copy's {mb:.0f} MB at {PINNED_LINK_SHARE:.0%} of the PCIe link's "
            f"{link:.0f} GB/s takes {copy_ms:.1f} ms"
        )
    else:
        # Pinned copies skip the host's staging copy: twice today's speed at least (6.4x on
        # the H200: 55 against 8.6 GB/s).
        copy_ms = split["copy"] / 2
        basis = " The link's speed is unknown here; with the copy twice as fast as today"
    point = min(hi, step / max(host, gpu + copy_ms, 1e-6))
    text += f"{basis}: about {point:.1f}x"
    text += f" (from {lo:.1f}x, the copy as long as today, to {hi:.1f}x, the copy free)."
    return Impact(
        basis="estimated",
        text=text,
        speedup=round(point, 2),
        recoverable_pct=_r(100.0 * (1.0 - 1.0 / point)),
        speedup_range=(round(lo, 2), round(hi, 2)),
    )


# A model's math runs at least this many times faster on a GPU than on the host's cores.
GPU_MATH_SPEEDUP_MIN = 5.0
# A range's high end stops here.
MAX_RANGE = 100.0


def _range_impact(lo: float, hi: float, text: str) -> Impact:
    """An estimate for a change of the work per step: the idle share of today's step does not
    bound it, so it is a range; ``speedup`` is the low end (what sorting sees)."""
    lo = max(1.0, min(lo, MAX_RANGE))
    hi = max(lo, min(hi, MAX_RANGE))
    return Impact(
        basis="estimated",
        text=f"{text} Estimated {lo:.1f}x to {hi:.0f}x.",
        speedup=round(lo, 2),
        recoverable_pct=_r(100.0 * (1.0 - 1.0 / lo)),
        speedup_range=(round(lo, 2), round(hi, 2)),
    )


def _batch_impact(batch: int, suggested: int, busy: float | None, what: str) -> Impact:
    """Items per second at ``suggested`` instead of ``batch``: at least the GPU's idle share
    filled (its kernel time grows in proportion), at most the whole factor (the step's time
    stays the same: small kernels that did not fill the GPU)."""
    k = suggested / max(1, batch)
    lo = min(k, 100.0 / max(busy or 0.0, 1.0)) if busy is not None else 1.0
    return _range_impact(
        lo,
        k,
        f"At batch {suggested} instead of {batch} each {what} does {k:.0f}x the work for the same "
        "launches and host work: from the GPU's idle share filled (kernel time growing in "
        f"proportion) to the {what} taking no longer (kernels too small to fill the GPU today). "
        "gpusight run --what-if measures it.",
    )


def _statement_fix(
    f: Fix, src: CodeSource | None, change: Callable[[str, int, str | None], str | None]
) -> Fix:
    """The fix with one statement of the user's changed (``change(code, line, torch_alias)``:
    the code with it changed, or None): in the notebook cell that ran it, else in their file."""
    if src is None:
        return f
    cell = src.cell
    if cell is not None:
        if with_statement_cell_fix(f, cell, change(cell.compiled, cell.line, cell.torch_alias)):
            return f
    new = change(src.text, src.line, None)
    with_patch(f, None if new is None else unified_diff(src.text, new, src.path),
               {src.path: src.text})  # fmt: skip
    return f


def _autocast_fix(f: Fix, src: CodeSource | None) -> Fix:
    """The fix with the user's forward statement run under bf16 autocast, where it is known."""
    return _statement_fix(
        f, src, lambda code, line, alias: autocast_text(code, line, torch_alias=alias)
    )


def _sync_fix(f: Fix, site: SyncSite, every: int) -> Fix:
    """The fix with the user's logging line read every ``every`` steps, where that is a safe
    change of it (a print/log call in a counted loop); otherwise the snippet alone."""
    return _statement_fix(
        f, site.source, lambda code, line, _alias: log_every_text(code, line, every)
    )


def channels_last_fix(f: Fix, src: CodeSource | None, inputs: bool) -> Fix:
    """The fix with the user's model made channels_last where it is made, and (``inputs``: the
    watch saw the model's input in NCHW, so it is 4-d) its input on the line that calls it."""
    return _statement_fix(
        f, src, lambda code, line, alias: channels_last_text(code, line, alias, inputs)
    )


def to_device_fix(f: Fix, src: CodeSource | None, device: str = "cuda") -> Fix:
    """The fix with the user's model moved to ``device`` where it is made, and the batch it is
    called on moved in its loop, where both are known (fixes/placement.py)."""
    return _statement_fix(f, src, lambda code, line, _alias: to_device_text(code, line, device))


def _pin_source_fix(f: Fix, sites: list[CopySite]) -> Fix:
    """The fix with the host tensors that the loop copies pinned where they are made, where it
    is not the DataLoader's change (the copies read a tensor the script holds itself): all the
    finding's copy lines in the first one's file."""
    first = next((c.source for c in sites if c.source is not None), None)
    if f.patch is not None or first is None:
        return f
    same = [c.source for c in sites if c.source is not None and c.source.text == first.text]
    lines = [s.line for s in same if s.path == first.path]
    return _statement_fix(f, first, lambda code, _line, alias: pin_source_text(code, lines, alias))


def _with_patch(f: Fix, src: LoaderSource | None, values: dict[str, object]) -> Fix:
    """The fix with the user's DataLoader call changed, where the call is known: in a notebook,
    the cell changed, and code that rebuilds the loader with the user's own call."""
    if src is None:
        return f
    if src.cell is None or not with_cell_fix(f, src.cell, values):
        with_patch(f, loader_patch(src.text, src.line, src.path, values), {src.path: src.text})
    return f


def _loader_batch_patch(f: Fix, ev: WorkloadEvidence, batch: int, suggested: int) -> Fix:
    """A larger batch as a change to the user's DataLoader call, where that loader made the
    batch the model saw (its ``batch_size`` is that batch: not a batch sampler's)."""
    if ev.loader is None or ev.loader.batch_size != batch:
        return f
    return _with_patch(f, ev.loader_source, {"batch_size": suggested})


def knob_batch_fix(f: Fix, src: CodeSource | None, suggested: int) -> Fix:
    """A larger batch as a change to the knob that sets the width of a batch the script cuts
    by hand or makes with a torch factory (fixes/batch_knob.py), where no DataLoader's change
    made the patch."""
    if f.patch is not None:
        return f
    return _statement_fix(
        f, src, lambda code, line, alias: batch_knob_text(code, line, suggested, alias)
    )


def _loader_pin_patch(f: Fix, ev: WorkloadEvidence) -> Fix:
    """Pinned batches as a change to the user's DataLoader call, where the script has one that
    does not pin (its batches are what a loop copies to the GPU; a tensor the script holds
    itself is pinned where it is made, which the generic snippet says)."""
    if ev.loader is None or ev.loader.pin_memory or not ev.cuda_available:
        return f
    return _with_patch(f, ev.loader_source, {"pin_memory": True})


def findings(ev: WorkloadEvidence, split: dict[str, float]) -> list[Finding]:
    total = step_time(ev)
    out: list[Finding] = []
    if total <= 0:
        return out
    share = {k: _pct(v, total) for k, v in split.items()}
    gpu_run = ran_on_gpu(ev)
    busy = share["compute"] if gpu_run else None
    p = ev.placement or Placement()
    w = ev.window

    # --- placement -----------------------------------------------------------------------------
    if ev.cuda_available and p.param_devices == ["cpu"]:
        host = _mean(ev.framework_ms)
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
                    Evidence("host time in forward/backward/optimizer", _r(host, 2), "ms/step"),
                ],
                impact=_range_impact(
                    lo,
                    hi,
                    f"The forward/backward/optimizer time ({_r(host, 1)} ms of the "
                    f"{_r(total, 1)} ms step) would move to the GPU: from its math running 5x "
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
                impact=_impact(share["copy"], "Copies between devices every step.")
                if share["copy"] > 0
                else Impact(basis="none", text="Each step moves tensors between devices."),
                fix=fix(
                    "Keep the whole model and its inputs on one device.",
                    "placement.one_device",
                    devices=", ".join(devices),
                ),
            )
        )
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

    # --- input pipeline and host work ------------------------------------------------------------
    stall = stall_of(ev)
    if share["data_wait"] >= 5.0:
        ld = ev.loader or LoaderInfo()
        workers = ld.num_workers or 0
        busy_step = max(1e-6, total - split["data_wait"])
        keep_up = workers_to_keep_up(
            workers, total, busy_step, _mean(ev.data_wait_ms), ev.cpu_count
        )
        suggested = keep_up[0] if keep_up else max(2, workers * 2)
        loader_stall = stall is not None and stall.cause in ("loader_workers", "data_wait")
        text = (
            f"The step waits {_r(split['data_wait'])} ms for the next batch on average"
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
                f"{_r(keep_up[1], 1)} ms or faster (the step without its wait: "
                f"{_r(busy_step, 1)} ms).",
                recoverable_pct=_r(min(100.0, _pct(total - keep_up[1], total))),
                speedup=round(min(gain, 100.0 / (100.0 - MAX_ESTIMATED_SHARE)), 2),
            )
        else:
            impact = _impact(share["data_wait"], "Workers can prepare batches while the step runs.")
        small = workers == 0 and _mean(ev.data_wait_ms) < SMALL_COLLATE_MS
        if small:
            impact.text += (
                f" Each batch takes {format_ms(_mean(ev.data_wait_ms))} to build in the main "
                "process: handing a batch over from a worker costs a good part of that, so the "
                "gain is smaller than this."
            )
        out.append(
            Finding(
                id="load.input_bound",
                severity="info" if small else _severity(share["data_wait"], 10.0, 40.0),
                title="The input pipeline starves the step"
                + (
                    f": {stall_phrase(stall, 'wait')} for the DataLoader"
                    if loader_stall and stall and stall.period_steps
                    else ""
                ),
                detail=text,
                evidence=[
                    Evidence("data wait", _r(split["data_wait"], 2), "ms/step"),
                    Evidence("share of step", _r(share["data_wait"]), "%"),
                    Evidence("step time (mean)", _r(total, 2), "ms"),
                    Evidence("typical step (median)", _r(median_step(ev), 2), "ms"),
                    *(
                        [
                            Evidence("stall period", stall.period_steps, "steps"),
                            Evidence("stall length", _r(stall.stall_ms, 1), "ms"),
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
                fix=_with_patch(
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
    if share["other_cpu"] >= 10.0:
        cpu_loop = w.cpu_op_loop_ms if w is not None else 0.0
        ev_list = [
            Evidence("other host time", _r(split["other_cpu"], 2), "ms/step"),
            Evidence("share of step", _r(share["other_cpu"]), "%"),
        ]
        if w is not None:
            ev_list.append(Evidence("CPU tensor ops in the loop body", _r(cpu_loop, 2), "ms/step"))
            ev_list.extend(
                Evidence(f"CPU op {name}", _r(ms, 2), "ms/step") for name, ms in w.top_cpu_ops
            )
        out.append(
            Finding(
                id="load.cpu_preprocessing",
                severity=_severity(share["other_cpu"], 20.0, 50.0),
                title="Host work in the loop body keeps the GPU waiting"
                if gpu_run
                else "Host work outside the model takes a large share of the step",
                evidence=ev_list,
                impact=_impact(
                    share["other_cpu"],
                    "Work moved to DataLoader workers or onto the GPU overlaps with the step.",
                ),
                fix=fix(
                    "Do per-batch transforms on the GPU after the copy, or inside the Dataset with "
                    "DataLoader workers.",
                    "loop.augment_on_gpu",
                    cpu_ms=_r(max(cpu_loop, split["other_cpu"]), 1),
                    workers=min(8, max(2, (ev.cpu_count or 4) - 1)),
                ),
            )
        )

    # --- launch overhead, batch size -------------------------------------------------------------
    batch = p.batch_size or (ev.loader.batch_size if ev.loader else None)
    if gpu_run and w is not None and share["launch_overhead"] >= 15.0:
        out.append(
            Finding(
                id="load.launch_bound",
                severity=_severity(share["launch_overhead"], 15.0, 50.0),
                title="Kernel launches, not the GPU, set the pace",
                evidence=[
                    Evidence(
                        "GPU idle inside forward/backward/optimizer",
                        _r(split["launch_overhead"], 2),
                        "ms/step",
                    ),
                    Evidence("share of step", _r(share["launch_overhead"]), "%"),
                    Evidence("kernel launches", _r(w.launches_per_step), "per step"),
                    Evidence(
                        "median kernel", w.median_kernel_us and _r(w.median_kernel_us, 1), "µs"
                    ),
                    Evidence("GPU busy", busy and _r(busy), "%"),
                ],
                impact=_impact(
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
                    Evidence("GPU busy", _r(busy), "%"),
                    Evidence("launch overhead", _r(share["launch_overhead"]), "% of step"),
                ],
                impact=_batch_impact(batch, max(256, batch * 8), busy, "step"),
                fix=knob_batch_fix(
                    _loader_batch_patch(
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
    if ev.step_mode == "forward" and batch is not None and batch <= 4:
        out.append(
            Finding(
                id="infer.unbatched",
                severity="warn" if (busy is None or busy < 50.0) else "info",
                title=f"Inference runs {batch} request(s) per forward",
                evidence=[
                    Evidence("batch size", batch),
                    Evidence("GPU busy", busy and _r(busy), "%"),
                    Evidence("forward step", _r(total, 3), "ms"),
                ],
                impact=_batch_impact(batch, 64, busy, "forward"),
                fix=knob_batch_fix(
                    fix("Group requests into batches.", "infer.batch_requests", batch=64),
                    ev.forward_source,
                    64,
                ),
            )
        )
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

    # --- precision and layout --------------------------------------------------------------------
    if gpu_run and w is not None and split["compute"] > 0:
        fp32 = w.matmul_fp32_ms
        if fp32 >= 0.25 * split["compute"] and fp32 > 0.05:
            rec = _pct(min(fp32, split["compute"]) * TENSOR_CORE_RECOVERY, total)
            out.append(
                Finding(
                    id="load.amp_unused",
                    severity="critical" if _pct(fp32, total) >= 50.0 else "warn",
                    title="Matmuls run in float32 without Tensor Cores",
                    evidence=[
                        Evidence("float32 matmul/conv kernels", _r(fp32, 2), "ms/step"),
                        Evidence("share of GPU time", _r(_pct(fp32, split["compute"])), "%"),
                        Evidence("TF32 allowed for matmul", ev.tf32_matmul),
                        Evidence("autocast on", p.autocast),
                    ],
                    impact=_impact(
                        rec, "bf16 on Tensor Cores runs these matmuls several times faster."
                    ),
                    fix=_autocast_fix(
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
            rec = _pct(max(w.layout_transform_ms, 0.15 * w.conv_lowp_ms), total)
            out.append(
                Finding(
                    id="load.channels_last",
                    severity="warn",
                    title="Half-precision convolutions run in NCHW layout",
                    evidence=[
                        Evidence("conv kernels (fp16/bf16)", _r(w.conv_lowp_ms, 2), "ms/step"),
                        Evidence(
                            "NCHW<->NHWC transpose kernels", _r(w.layout_transform_ms, 2), "ms/step"
                        ),
                        Evidence("input channels_last", p.input_channels_last),
                        Evidence("model channels_last", p.model_channels_last),
                    ],
                    impact=_impact(rec, "Tensor Core convolutions read NHWC without transposes."),
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

    # --- syncs and copies ------------------------------------------------------------------------
    n_steps = max(1, len(ev.step_times_ms))
    sync_count = sum(s.count for s in ev.syncs)
    if ev.syncs and (share["sync_stall"] >= 1.0 or sync_count / n_steps >= 1.0 or w is None):
        top = sorted(ev.syncs, key=lambda s: (-(s.idle_ms or 0.0), -s.count))
        first = top[0]
        sev: Severity = _severity(share["sync_stall"], 5.0, 25.0) if gpu_run else "info"
        out.append(
            Finding(
                id="code.host_sync",
                severity=sev,
                title="The host waits for the GPU inside the loop"
                + (
                    f" ({first.kind} at {_site_text(first.file, first.line)})" if first.line else ""
                ),
                evidence=[
                    Evidence("GPU idle after syncs", _r(split["sync_stall"], 2), "ms/step"),
                    Evidence("share of step", _r(share["sync_stall"]), "%"),
                    Evidence("syncs per step", _r(sync_count / n_steps, 2)),
                    *(
                        Evidence(
                            f"{s.kind}",
                            s.count,
                            "calls",
                            _source(s.file, s.line, s.code, s.count),
                        )
                        for s in top[:5]
                    ),
                ],
                impact=_impact(
                    share["sync_stall"],
                    "Without the wait the host queues the next step while the GPU computes.",
                ),
                fix=_sync_fix(
                    fix(
                        "Keep values on the GPU and read them every few steps (or log "
                        "asynchronously).",
                        "sync.defer_item",
                        site=_site_text(first.file, first.line),
                        code=first.code or first.kind,
                        every=50,
                    ),
                    first,
                    50,
                ),
            )
        )
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
                severity=_severity(share["copy"], 0.0, 25.0) if share["copy"] >= 5 else "info",
                title="Host-to-device copies from pageable memory block the host"
                if pageable_async
                else "Host-to-device copies come from pageable memory",
                detail="non_blocking=True only overlaps a copy whose source is pinned; from "
                "pageable "
                "memory the call returns when the copy is done."
                if pageable_async or trace_pageable
                else None,
                evidence=[
                    Evidence("copy time", _r(split["copy"], 2), "ms/step"),
                    Evidence("share of step", _r(share["copy"]), "%"),
                    Evidence("copied per step", mb and _r(mb, 1), "MB"),
                    Evidence("pageable copies in the profiler window", trace_pageable),
                    *(
                        Evidence(
                            "non_blocking copy from pageable memory"
                            if c.kind == "pageable_async"
                            else "blocking copy from pageable memory",
                            _r(c.host_ms / c.count, 3) if c.count else None,
                            "ms/call",
                            _source(c.file, c.line, c.code, c.count),
                        )
                        for c in sites[:5]
                    ),
                ],
                impact=_pinned_copy_impact(split, mb, ev.h2d_link_gbps),
                fix=_pin_source_fix(
                    _loader_pin_patch(
                        fix(
                            "Pin the source memory (DataLoader(pin_memory=True) or .pin_memory()) "
                            "and copy with non_blocking=True.",
                            "copy.pin_memory",
                            site=_site_text(first_c.file, first_c.line) if first_c else "the copy",
                        ),
                        ev,
                    ),
                    sites,
                ),
            )
        )

    # --- memory ----------------------------------------------------------------------------------
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
                        Evidence("peak reserved", _r(peak / gib, 2), "GiB"),
                        Evidence("capacity", _r(cap / gib, 2), "GiB"),
                        Evidence("share", _r(100 * frac), "%"),
                    ],
                    impact=Impact(
                        basis="none",
                        text="A longer sequence or bigger batch will run out of memory.",
                    ),
                    fix=fix(
                        "Lower the peak: autocast, activation checkpointing, expandable segments.",
                        "memory.reduce",
                        peak_gib=_r(peak / gib),
                        capacity_gib=_r(cap / gib),
                    ),
                )
            )
        elif frac < 0.3 and busy is not None and busy < 70.0 and batch:
            factor = max(2, min(8, int(0.6 / max(frac, 1e-3))))
            out.append(
                Finding(
                    id="load.memory_headroom",
                    severity="info",
                    title=f"GPU memory is {_r(100 * frac)}% used: room for a larger batch",
                    evidence=[
                        Evidence("peak", _r(peak / gib, 2), "GiB"),
                        Evidence("capacity", _r(cap / gib, 2), "GiB"),
                        Evidence("batch size", batch),
                    ],
                    impact=Impact(basis="none", text="More work per step for the same launches."),
                    fix=fix(
                        "Grow the batch while the GPU is under-used.",
                        "memory.larger_batch",
                        peak_gib=_r(peak / gib),
                        capacity_gib=_r(cap / gib),
                        factor=factor,
                        suggested=batch * factor,
                    ),
                )
            )
    return out


def _summary(
    category: str, split: dict[str, float], total: float, busy: float | None, ev: WorkloadEvidence
) -> str:
    b = f"GPU busy {busy:.0f}%" if busy is not None else "no GPU in use"

    def part(key: str) -> str:
        return (
            f"{format_ms(split[key])} of each {format_ms(total)} step "
            f"({_pct(split[key], total):.0f}%)"
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
    share = {k: _pct(v, total) for k, v in split.items()}
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
    the wrong device always; a DataParallel wrapper unless a cause it cannot be takes more of
    the step (``DP_YIELDS_PCT``)."""
    placed = [f for f in found if f.id in _PLACEMENT_IDS]
    blocker = next((f for f in placed if f.id != "code.dataparallel"), None)
    if blocker is not None or not placed:
        return blocker
    other = max(_pct(split.get(k, 0.0), total) for k in _NOT_DP)
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
        return _r(ev.nvml_util_pct, 2)
    if ran_on_gpu(ev) and total > 0:
        return _r(min(100.0, _pct(split["compute"], total)), 2)
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
    result.findings.extend(between_steps.findings(ev.phases, whole, n))
    inside = max(
        (v for k, v in result.breakdown_ms.items() if k not in ("compute", "between_steps")),
        default=0.0,
    )
    share = _pct(between, whole)
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
    "CodeSource",
    "CopySite",
    "Fix",
    "GpuWindow",
    "LoaderInfo",
    "Placement",
    "SyncSite",
    "WorkloadEvidence",
    "WorkloadResult",
    "analyse",
    "breakdown",
    "findings",
    "verdict",
]
