"""A profiler window, read back: where each step's time went, counted once. Pure, no torch.

Input is the Chrome trace that ``torch.profiler`` exports (the format HolisticTraceAnalysis
and the kineto TensorBoard plugin read) plus what gpusight's own hooks recorded on the host
during the same steps (data waits, host-side copies, forward/backward/optimizer ranges, sync
warnings), converted to the trace's clock with one alignment marker.

Each step is split with a priority, so that a millisecond is counted once (after kineto's
tb_plugin): GPU kernels (compute) > collectives > GPU copies > host blocked in a sync while
the GPU idles > host blocked in a copy > host waiting for the DataLoader > the GPU idle gap that
a blocking call left behind (the queue drained while the host waited, so everything until the
next kernel is the sync's cost; after HolisticTraceAnalysis' idle-time split) > CPU-only aten
ops > time inside forward/backward/optimizer (framework and launch overhead) > other host time.
"""

from __future__ import annotations

import statistics
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from . import intervals as iv
from .kernel_names import dtype_from_name, dtype_of, kernel_kind, op_family, tensor_cores
from .window_stats import WindowStats

# The step's categories in the split's priority order (the docstring's); their set is the
# schema's Breakdown less between_steps (test_breakdown_keys holds it).
CATEGORIES = (
    "compute",
    "communication",
    "copy",
    "sync_stall",
    "data_wait",
    "launch_overhead",
    "other_cpu",
)
# The framework's calls, in the order their launch overhead is counted where they nest.
PHASES = ("optimizer", "backward", "forward")
# A blocking call "left" a GPU gap behind when the GPU went idle while the host was inside it
# (give or take this much, in microseconds).
_GAP_TOLERANCE_US = 50.0
# A sync warning reaches Python after its op returned; match it to a sync ending this shortly
# before.
_SYNC_MATCH_US = 5000.0
_SHORT_KERNEL_US = 10.0


@dataclass
class HostRecord:
    """What the hooks saw during the analysed steps, in ``perf_counter_ns`` time."""

    steps: list[tuple[int, int]]
    data_wait: list[tuple[int, int]] = field(default_factory=list)
    host_copies: list[tuple[int, int]] = field(default_factory=list)
    framework: list[tuple[int, int]] = field(default_factory=list)
    framework_phases: list[str] = field(default_factory=list)
    """The phase of each ``framework`` interval (``forward``, ``backward``, ``optimizer``);
    empty where not known."""
    syncs: list[tuple[int, str]] = field(default_factory=list)
    """(time the warning reached Python, site key)."""


@dataclass
class Alignment:
    """Instants known on both clocks: ``perf_counter_ns`` and the trace's microseconds.

    One instant gives the offset; a second one (the window's end) also corrects the rate, in
    case the profiler's clock (an approximate, TSC-based one in recent torch) runs a little
    faster or slower than ``perf_counter`` over the window.
    """

    perf_ns: int
    trace_us: float
    perf_ns_end: int | None = None
    trace_us_end: float | None = None

    @property
    def rate(self) -> float:
        """Trace microseconds per perf_counter microsecond (1.0 unless two instants say else)."""
        if self.perf_ns_end is None or self.trace_us_end is None:
            return 1.0
        span = (self.perf_ns_end - self.perf_ns) / 1000.0
        if span < 1000.0:  # under a millisecond apart: too short to measure a rate
            return 1.0
        rate = (self.trace_us_end - self.trace_us) / span
        return rate if 0.99 < rate < 1.01 else 1.0

    def to_trace(self, t_ns: int) -> float:
        return self.trace_us + (t_ns - self.perf_ns) / 1000.0 * self.rate


@dataclass
class _Ev:
    name: str
    ts: float
    end: float
    tid: Any
    args: dict[str, Any]


def _events(trace: dict[str, Any]) -> dict[str, list[_Ev]]:
    by_cat: dict[str, list[_Ev]] = defaultdict(list)
    for e in trace.get("traceEvents", ()):
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        try:
            ts = float(e["ts"])
            dur = float(e.get("dur", 0.0))
        except (KeyError, TypeError, ValueError):
            continue
        cat = str(e.get("cat", "")).lower()
        raw = e.get("args")
        args: dict[str, Any] = raw if isinstance(raw, dict) else {}
        by_cat[cat].append(_Ev(str(e.get("name", "")), ts, ts + max(dur, 0.0), e.get("tid"), args))
    return by_cat


def find_marker(trace: dict[str, Any], name: str) -> float | None:
    """Start time (trace µs) of the first host annotation called ``name``."""
    for e in trace.get("traceEvents", ()):
        if (
            isinstance(e, dict)
            and e.get("ph") == "X"
            and e.get("name") == name
            and str(e.get("cat", "")).lower() == "user_annotation"
        ):
            try:
                return float(e["ts"])
            except (KeyError, TypeError, ValueError):
                return None
    return None


def _is_launch(name: str) -> bool:
    n = name.lower()
    return ("launch" in n and "kernel" in n) or n in ("cudagraphlaunch", "cugraphlaunch")


def _is_sync(name: str) -> bool:
    n = name.lower()
    return "synchronize" in n or n in ("cudamemcpy", "cumemcpydtoh_v2", "cumemcpydtoh")


def _enclosing(ops: list[_Ev], points: list[tuple[float, int]]) -> dict[int, list[_Ev]]:
    """For each (time, key) on one thread, the ops that enclose it, outermost first."""
    out: dict[int, list[_Ev]] = {}
    ops_sorted = sorted(ops, key=lambda o: (o.ts, -o.end))
    pts = sorted(points)
    stack: list[_Ev] = []
    i = 0
    for t, key in pts:
        while i < len(ops_sorted) and ops_sorted[i].ts <= t:
            op = ops_sorted[i]
            while stack and stack[-1].end <= op.ts:
                stack.pop()
            stack.append(op)
            i += 1
        while stack and stack[-1].end < t:
            stack.pop()
        out[key] = [o for o in stack if o.ts <= t <= o.end]
    return out


def _top_level(ops: list[_Ev]) -> list[_Ev]:
    top: list[_Ev] = []
    for op in sorted(ops, key=lambda o: (o.ts, -o.end)):
        if top and op.ts < top[-1].end:
            continue
        top.append(op)
    return top


@dataclass
class _Work:
    """The device's work in the window: what ran on the analysed device, and the host's calls."""

    device: int | None
    gpu: bool
    kernels: list[_Ev]
    copies: list[_Ev]
    runtime: list[_Ev]
    cpu_ops: list[_Ev]
    issued: list[_Ev]
    issued_set: iv.Intervals
    gpu_start: float
    gpu_end: float
    behind_us: float
    paced: bool


@dataclass
class _Sets:
    """The window's intervals on the trace clock: GPU activity by kind, and the host's."""

    compute: iv.Intervals
    nccl: iv.Intervals
    copy: iv.Intervals
    active: iv.Intervals
    data: iv.Intervals
    host_copy: iv.Intervals
    framework: iv.Intervals
    phases: dict[str, iv.Intervals]
    """The framework time by phase, in the order the launch overhead is given to them."""
    sync: iv.Intervals
    block_copy: iv.Intervals
    cpu_only: iv.Intervals
    cpu_loop: iv.Intervals


def analyse(
    trace: dict[str, Any],
    align: Alignment,
    host: HostRecord,
    main_tid: int | None,
    fp32_tensor_cores: bool = False,
    conv_tf32: bool = True,
) -> WindowStats | None:
    """Split the analysed steps of one profiler window. None when there is no step to split.

    ``fp32_tensor_cores`` / ``conv_tf32``: whether torch allowed TF32 for float32 matmuls /
    convolutions. For a float32 op these decide Tensor Core use (library kernel names do not
    say it reliably: Hopper's cuBLAS names most GEMMs ``nvjet_*``), unless the name is
    explicit (``sgemm``/``simt`` or ``tf32``).
    """
    steps = [(align.to_trace(s), align.to_trace(e)) for s, e in host.steps if e > s]
    if not steps:
        return None
    lo, hi = steps[0][0], steps[-1][1]
    n = len(steps)
    ev = _events(trace)
    work = _work(ev, lo, hi, n)
    kernels, gpu = work.kernels, work.gpu

    # Runtime calls: launches, syncs, and the cudaMemcpyAsync calls that blocked the host.
    by_corr: dict[Any, _Ev] = {}
    for r in work.runtime:
        corr = r.args.get("correlation")
        if corr is not None:
            by_corr[corr] = r
    stats = WindowStats(
        steps=n,
        step_ms=(hi - lo) / n / 1000.0,
        split_ms={},
        data_wait_host_ms=0.0,
        host_copy_ms=0.0,
        gpu=gpu,
        device=work.device,
    )
    blocking, sync_calls = _blocking(work, by_corr, stats)
    launches, launch_stack, cpu_only_tops = _launch_stacks(work, main_tid)
    sets = _sets(work, host, align, blocking, cpu_only_tops)
    durations, matmul_dtypes = _kernel_families(
        stats, kernels, by_corr, launches, launch_stack, fp32_tensor_cores, conv_tf32
    )

    # Gaps in GPU activity over the whole window, and the blocking call (if any) that left each.
    window_gaps = iv.gaps(sets.active, lo, hi) if gpu else []
    _idle_split(stats, window_gaps, kernels, by_corr)
    left_by = _left_by(blocking, [g[0] for g in window_gaps])
    by_phase: dict[str, float] = {}
    totals, sync_idle = _split_steps(
        steps, sets, window_gaps, left_by, _sync_sites(host, align), by_phase
    )

    stats.split_ms = {k: v / n / 1000.0 for k, v in totals.items()}
    stats.launch_by_phase_ms = {k: v / n / 1000.0 for k, v in by_phase.items()}
    if work.issued:
        stats.issued_gpu_ms = iv.total(work.issued_set) / n / 1000.0
        stats.gpu_behind_ms = work.behind_us / 1000.0
    stats.device_paced = work.paced
    if work.paced:
        _paced_split(stats, sets, work, n)
    stats.data_wait_host_ms = iv.total(iv.clip(sets.data, lo, hi)) / n / 1000.0
    stats.host_copy_ms = iv.total(iv.clip(sets.host_copy, lo, hi)) / n / 1000.0
    stats.cpu_op_ms = iv.total(iv.clip(sets.cpu_only, lo, hi)) / n / 1000.0
    stats.cpu_op_loop_ms = iv.total(iv.clip(sets.cpu_loop, lo, hi)) / n / 1000.0
    loop_ops: dict[str, float] = defaultdict(float)
    for o in cpu_only_tops:
        inside = iv.total(iv.intersect([(o.ts, o.end)], sets.cpu_loop))
        if inside > 0:
            loop_ops[o.name] += inside / n / 1000.0
    stats.top_cpu_ops = sorted(loop_ops.items(), key=lambda kv: -kv[1])[:3]
    stats.sync_idle_ms = dict(sync_idle)
    stats.alignment_error_us = _alignment_error(
        ev.get("user_annotation", []), host, align, main_tid
    )
    if gpu:
        _per_step_kernel_figures(
            stats, work, sets, durations, matmul_dtypes, len(launches), sync_calls, lo, hi, n
        )
    return stats


def _work(ev: dict[str, list[_Ev]], lo: float, hi: float, n: int) -> _Work:
    """The analysed device (the one that did the most work; a DataParallel run on several GPUs
    reports its first), its kernels and copies in the window, and the host's calls."""
    kernels_all = ev.get("kernel", [])
    per_dev: dict[int, float] = defaultdict(float)
    for k in kernels_all:
        per_dev[_device(k)] += k.end - k.ts
    device = max(per_dev, key=lambda d: per_dev[d]) if per_dev else None
    gpu = bool(kernels_all) or bool(ev.get("gpu_memcpy")) or bool(ev.get("cuda_runtime"))
    kernels_dev = [k for k in kernels_all if _device(k) == device]
    copies_dev = [
        c
        for cat in ("gpu_memcpy", "memcpy", "gpu_memset", "memset")
        for c in ev.get(cat, [])
        if device is None or _device(c) == device
    ]
    runtime = [
        r
        for cat in ("cuda_runtime", "cuda_driver", "runtime")
        for r in ev.get(cat, [])
        if r.end > lo and r.ts < hi
    ]
    # The work the window's steps launched (runtime call inside the steps), wherever it ran.
    # With the host ahead of the GPU (the launch queue still filling, e.g. after a sync), a
    # step's kernels run long after the step ended on the host: clipping kernels to the host's
    # step intervals would count only the share that happened to run meanwhile.
    issued_corrs = {
        r.args.get("correlation") for r in runtime if lo <= r.ts < hi and "correlation" in r.args
    }
    issued = [e for e in [*kernels_dev, *copies_dev] if e.args.get("correlation") in issued_corrs]
    issued_set = iv.union((e.ts, e.end) for e in issued)
    gpu_end = max((e.end for e in issued), default=hi)
    gpu_start = min((e.ts for e in issued), default=lo)
    behind_us = max(0.0, gpu_end - hi)
    paced = device_paced(
        iv.total(issued_set) / n / 1000.0, (hi - lo) / n / 1000.0, behind_us / 1000.0
    )
    if paced:
        kernels = [k for k in kernels_dev if k.args.get("correlation") in issued_corrs]
        copies = [c for c in copies_dev if c.args.get("correlation") in issued_corrs]
    else:
        kernels = [k for k in kernels_dev if k.end > lo and k.ts < hi]
        copies = [c for c in copies_dev if c.end > lo and c.ts < hi]
    cpu_ops = [
        o for cat in ("cpu_op", "operator") for o in ev.get(cat, []) if o.end > lo and o.ts < hi
    ]
    return _Work(
        device=device,
        gpu=gpu,
        kernels=kernels,
        copies=copies,
        runtime=runtime,
        cpu_ops=cpu_ops,
        issued=issued,
        issued_set=issued_set,
        gpu_start=gpu_start,
        gpu_end=gpu_end,
        behind_us=behind_us,
        paced=paced,
    )


def _blocking(
    work: _Work, by_corr: dict[Any, _Ev], stats: WindowStats
) -> tuple[list[tuple[float, float, str]], int]:
    """The calls that blocked the host, ``(start, end, "sync"|"copy")`` sorted, and the sync
    calls counted; the copies' counts into ``stats``."""
    blocking: list[tuple[float, float, str]] = []
    sync_calls = 0
    for r in work.runtime:
        if _is_sync(r.name):
            blocking.append((r.ts, r.end, "sync"))
            sync_calls += 1
    for c in work.copies:
        name = c.name.lower()
        call = by_corr.get(c.args.get("correlation"))
        if "htod" in name and "pageable" in name:
            stats.memcpy_h2d_pageable += 1
            stats.memcpy_h2d_pageable_bytes += int(c.args.get("bytes", 0) or 0)
            stats.memcpy_h2d_pageable_ms += (c.end - c.ts) / 1000.0
            if call is not None:
                blocking.append((call.ts, call.end, "copy"))
        elif "htod" in name:
            stats.memcpy_h2d_pinned += 1
        elif "dtoh" in name:
            stats.memcpy_d2h += 1
            if call is not None and "pageable" in name:
                blocking.append((call.ts, call.end, "sync"))
        if "memcpy" in name:
            stats.memcpy_ms += (c.end - c.ts) / 1000.0
    blocking.sort()
    return blocking, sync_calls


def _launch_stacks(
    work: _Work, main_tid: int | None
) -> tuple[list[_Ev], dict[int, list[_Ev]], list[_Ev]]:
    """The kernel launches, the host ops around each (by launch index), and the top-level ops on
    the main thread that launched no GPU work."""
    main_ops = [o for o in work.cpu_ops if main_tid is None or o.tid == main_tid]
    top_main = _top_level(main_ops)
    launch_pts: dict[Any, list[tuple[float, int]]] = defaultdict(list)
    launches = [r for r in work.runtime if _is_launch(r.name)]
    for i, r in enumerate(launches):
        launch_pts[r.tid].append((r.ts, i))
    ops_by_tid: dict[Any, list[_Ev]] = defaultdict(list)
    for o in work.cpu_ops:
        ops_by_tid[o.tid].append(o)
    launch_stack: dict[int, list[_Ev]] = {}
    for tid, pts in launch_pts.items():
        launch_stack.update(_enclosing(ops_by_tid.get(tid, []), pts))
    launching_tops: set[int] = set()
    top_ids = {id(o) for o in top_main}
    for stack in launch_stack.values():
        if stack and id(stack[0]) in top_ids:
            launching_tops.add(id(stack[0]))
    cpu_only_tops = [o for o in top_main if id(o) not in launching_tops] if work.gpu else top_main
    return launches, launch_stack, cpu_only_tops


def _sets(
    work: _Work,
    host: HostRecord,
    align: Alignment,
    blocking: list[tuple[float, float, str]],
    cpu_only_tops: list[_Ev],
) -> _Sets:
    compute_set = iv.union((k.ts, k.end) for k in work.kernels if kernel_kind(k.name) != "nccl")
    nccl_set = iv.union((k.ts, k.end) for k in work.kernels if kernel_kind(k.name) == "nccl")
    copy_set = iv.union((c.ts, c.end) for c in work.copies)
    active = iv.union([*compute_set, *nccl_set, *copy_set])

    # Host ranges from the hooks, on the trace clock.
    def conv(items: Iterable[tuple[int, int]]) -> iv.Intervals:
        return iv.union((align.to_trace(s), align.to_trace(e)) for s, e in items)

    data_set = conv(host.data_wait)
    host_copy_set = conv(host.host_copies)
    framework_set = conv(host.framework)
    phases: dict[str, iv.Intervals] = {}
    if len(host.framework_phases) == len(host.framework):
        for phase in PHASES:
            got = [r for r, p in zip(host.framework, host.framework_phases, strict=True)
                   if p == phase]  # fmt: skip
            if got:
                phases[phase] = conv(got)
    sync_set = iv.union((s, e) for s, e, kind in blocking if kind == "sync")
    block_copy_set = iv.union(
        [*((s, e) for s, e, kind in blocking if kind == "copy"), *host_copy_set]
    )
    cpu_only_set = iv.union((o.ts, o.end) for o in cpu_only_tops)
    cpu_loop = iv.subtract(iv.subtract(cpu_only_set, framework_set), data_set)
    return _Sets(
        compute=compute_set,
        nccl=nccl_set,
        copy=copy_set,
        active=active,
        data=data_set,
        host_copy=host_copy_set,
        framework=framework_set,
        phases=phases,
        sync=sync_set,
        block_copy=block_copy_set,
        cpu_only=cpu_only_set,
        cpu_loop=cpu_loop,
    )


def _kernel_families(
    stats: WindowStats,
    kernels: list[_Ev],
    by_corr: dict[Any, _Ev],
    launches: list[_Ev],
    launch_stack: dict[int, list[_Ev]],
    fp32_tensor_cores: bool,
    conv_tf32: bool,
) -> tuple[list[float], dict[str, float]]:
    """Each kernel's time by family (matmul, conv, layout, NCCL) and precision, through the op
    that launched it (the runtime call's correlation id) into ``stats``; the kernels' durations
    and the matmul time by dtype."""
    launch_index = {id(r): i for i, r in enumerate(launches)}
    durations: list[float] = []
    matmul_dtypes: dict[str, float] = defaultdict(float)
    for k in kernels:
        d = k.end - k.ts
        durations.append(d)
        kind = kernel_kind(k.name)
        launch = by_corr.get(k.args.get("correlation"))
        stack = launch_stack.get(launch_index.get(id(launch), -1), []) if launch is not None else []
        # Only the innermost op: an autocast cast inside aten::linear is not matmul work.
        fam_op = stack[-1] if stack and op_family(stack[-1].name) else None
        family = op_family(fam_op.name) if fam_op is not None else None
        if kind == "layout":
            stats.layout_transform_ms += d / 1000.0
            continue
        if kind == "nccl":
            stats.nccl_ms += d / 1000.0
            continue
        family = family or (kind if kind in ("matmul", "conv", "attention") else None)
        if family is None:
            continue
        dtype = (dtype_of(fam_op.args.get("Input type")) if fam_op is not None else None) or (
            dtype_from_name(k.name)
        )
        named = tensor_cores(k.name)
        lname = k.name.lower()
        if dtype in ("bf16", "fp16", "fp8", "tf32"):
            tc = True
        elif dtype == "fp32":
            if "tf32" in lname:
                tc = True
            elif named is False:
                tc = False
            else:
                tc = conv_tf32 if family == "conv" else fp32_tensor_cores
        else:
            tc = bool(named)
        if dtype == "fp32" and tc:
            dtype = "tf32"
        ms = d / 1000.0
        matmul_dtypes[dtype or "unknown"] += ms
        if family == "conv":
            stats.conv_ms += ms
            if dtype in ("bf16", "fp16"):
                stats.conv_lowp_ms += ms
        else:
            stats.matmul_ms += ms
        if tc:
            stats.matmul_tensor_core_ms += ms
        elif dtype in ("fp32", None, "unknown"):
            stats.matmul_fp32_ms += ms
    return durations, matmul_dtypes


def _idle_split(
    stats: WindowStats,
    window_gaps: iv.Intervals,
    kernels: list[_Ev],
    by_corr: dict[Any, _Ev],
) -> None:
    """HolisticTraceAnalysis' idle split: who made the GPU wait at the end of each gap?"""
    launch_of_start: dict[float, float] = {}
    for k in kernels:
        call = by_corr.get(k.args.get("correlation"))
        if call is not None:
            launch_of_start.setdefault(k.ts, call.ts)
    for g0, g1 in window_gaps:
        dur = (g1 - g0) / 1000.0
        launched = launch_of_start.get(g1)
        if launched is None:
            stats.idle_other_ms += dur
        elif launched >= g0:
            stats.idle_host_wait_ms += dur
        else:
            stats.idle_kernel_wait_ms += dur


def _left_by(
    blocking: list[tuple[float, float, str]], gap_starts: list[float]
) -> dict[int, tuple[str, float]]:
    """Gap index -> (kind, end of the blocking call) that left the GPU idle in it."""
    left_by: dict[int, tuple[str, float]] = {}
    for s, e, block_kind in blocking:
        j = bisect_right(gap_starts, e + _GAP_TOLERANCE_US) - 1
        while j >= 0 and gap_starts[j] >= s - _GAP_TOLERANCE_US:
            left_by.setdefault(j, (block_kind, e))
            j -= 1
    return left_by


def _sync_sites(host: HostRecord, align: Alignment) -> Callable[[float], str]:
    """What finds the site of the sync warning that followed a blocking call's end."""
    sync_times = sorted((align.to_trace(t), key) for t, key in host.syncs)
    sync_ts = [t for t, _ in sync_times]

    def site_of(call_end: float) -> str:
        j = bisect_right(sync_ts, call_end - _GAP_TOLERANCE_US)
        if j < len(sync_times) and sync_times[j][0] - call_end <= _SYNC_MATCH_US:
            return sync_times[j][1]
        return "unattributed"

    return site_of


def _by_phase(part: iv.Intervals, sets: _Sets, into: dict[str, float]) -> None:
    """The launch overhead ``part`` given to the phases whose framework time holds it (a
    forward re-run inside backward, as activation checkpointing does, counts as backward)."""
    for phase, held in sets.phases.items():
        mine = iv.intersect(part, held)
        if mine:
            into[phase] = into.get(phase, 0.0) + iv.total(mine)
            part = iv.subtract(part, mine)


def _split_steps(
    steps: list[tuple[float, float]],
    sets: _Sets,
    window_gaps: iv.Intervals,
    left_by: dict[int, tuple[str, float]],
    site_of: Callable[[float], str],
    launch_by_phase: dict[str, float],
) -> tuple[dict[str, float], dict[str, float]]:
    """Each step's time by category, counted once in priority order (the module's docstring),
    summed over the steps (trace µs), the launch overhead also by phase into
    ``launch_by_phase``; and the GPU idle (ms) that each sync site left."""
    totals: dict[str, float] = dict.fromkeys(CATEGORIES, 0.0)
    sync_idle: dict[str, float] = defaultdict(float)
    for s, e in steps:
        span = [(s, e)]
        busy_k = iv.clip(sets.compute, s, e)
        totals["compute"] += iv.total(busy_k)
        busy_c = iv.subtract(iv.clip(sets.nccl, s, e), busy_k)
        totals["communication"] += iv.total(busy_c)
        busy_m = iv.subtract(iv.subtract(iv.clip(sets.copy, s, e), busy_k), busy_c)
        totals["copy"] += iv.total(busy_m)
        idle = iv.subtract(span, iv.clip(sets.active, s, e))
        for name, host_set in (
            ("sync_stall", sets.sync),
            ("copy", sets.block_copy),
            ("data_wait", sets.data),
        ):
            part = iv.intersect(idle, iv.clip(host_set, s, e))
            totals[name] += iv.total(part)
            idle = iv.subtract(idle, part)
        for j, (block_kind, call_end) in left_by.items():
            g = window_gaps[j]
            if g[1] <= s or g[0] >= e:
                continue
            part = iv.intersect(idle, [(max(g[0], s), min(g[1], e))])
            ms_part = iv.total(part)
            if not ms_part:
                continue
            totals["sync_stall" if block_kind == "sync" else "copy"] += ms_part
            if block_kind == "sync":
                sync_idle[site_of(call_end)] += ms_part / 1000.0
            idle = iv.subtract(idle, part)
        part = iv.intersect(idle, iv.clip(sets.cpu_only, s, e))
        totals["other_cpu"] += iv.total(part)
        idle = iv.subtract(idle, part)
        part = iv.intersect(idle, iv.clip(sets.framework, s, e))
        totals["launch_overhead"] += iv.total(part)
        _by_phase(part, sets, launch_by_phase)
        idle = iv.subtract(idle, part)
        totals["other_cpu"] += iv.total(idle)
    return totals, sync_idle


def _paced_split(stats: WindowStats, sets: _Sets, work: _Work, n: int) -> None:
    """The GPU set the pace: a step costs what its launched work occupies the GPU for. The split
    is the GPU's own: busy time by kind, and the gaps between that work (the GPU waited for
    launches) as launch overhead. Host-side causes cannot have idled a GPU that had a queue of
    work."""
    gpu_span = max(work.gpu_end - work.gpu_start, 1e-9)
    gpu_compute = iv.total(sets.compute)
    gpu_comm = iv.total(iv.subtract(sets.nccl, sets.compute))
    gpu_copy = iv.total(iv.subtract(iv.subtract(sets.copy, sets.compute), sets.nccl))
    gpu_gaps = max(0.0, gpu_span - iv.total(sets.active))
    stats.launch_by_phase_ms = {}  # the host ran ahead: its calls do not line up with the gaps
    stats.split_ms = dict.fromkeys(CATEGORIES, 0.0)
    stats.split_ms.update(
        {
            "compute": gpu_compute / n / 1000.0,
            "communication": gpu_comm / n / 1000.0,
            "copy": gpu_copy / n / 1000.0,
            "launch_overhead": gpu_gaps / n / 1000.0,
        }
    )
    stats.step_ms = gpu_span / n / 1000.0


def _per_step_kernel_figures(
    stats: WindowStats,
    work: _Work,
    sets: _Sets,
    durations: list[float],
    matmul_dtypes: dict[str, float],
    launches: int,
    sync_calls: int,
    lo: float,
    hi: float,
    n: int,
) -> None:
    """The kernel facts of a window with GPU rows, per step."""
    stats.kernel_ms = sum(durations) / n / 1000.0
    stats.kernels_per_step = len(work.kernels) / n
    stats.launches_per_step = launches / n
    if durations:
        stats.median_kernel_us = statistics.median(durations)
        stats.short_kernel_pct = (
            100.0 * sum(d < _SHORT_KERNEL_US for d in durations) / len(durations)
        )
    if work.paced:
        stats.busy_pct = 100.0 * iv.total(sets.compute) / max(work.gpu_end - work.gpu_start, 1e-9)
    else:
        stats.busy_pct = 100.0 * iv.total(iv.clip(sets.compute, lo, hi)) / (hi - lo)
    stats.matmul_dtypes = {k: v / n for k, v in matmul_dtypes.items()}
    for attr in (
        "matmul_ms",
        "matmul_fp32_ms",
        "matmul_tensor_core_ms",
        "conv_ms",
        "conv_lowp_ms",
        "layout_transform_ms",
        "nccl_ms",
        "memcpy_ms",
        "memcpy_h2d_pageable_ms",
        "idle_host_wait_ms",
        "idle_kernel_wait_ms",
        "idle_other_ms",
    ):
        setattr(stats, attr, getattr(stats, attr) / n)
    stats.sync_calls_per_step = sync_calls / n
    stats.sync_blocked_ms = iv.total(iv.clip(sets.sync, lo, hi)) / n / 1000.0


def device_paced(issued_gpu_ms: float, host_step_ms: float, behind_ms: float) -> bool:
    """Did the GPU, not the host, set the pace of the window's steps?

    True when the work the steps launched needs more GPU time per step than the host took per
    step (by a tenth) and the GPU was still running it well after the last step ended on the
    host (over a quarter step): the host ran ahead, filling the launch queue, and the steps the
    host saw are shorter than the steady state, in which the host blocks on the full queue
    and a step takes the GPU's time.
    """
    if host_step_ms <= 0 or issued_gpu_ms <= 0:
        return False
    return issued_gpu_ms > 1.1 * host_step_ms and behind_ms > 0.25 * host_step_ms


def _alignment_error(
    annotations: list[_Ev], host: HostRecord, align: Alignment, main_tid: int | None
) -> float | None:
    """How far the hooks' DataLoader waits land from the loader's own ranges in the trace."""
    starts = sorted(
        a.ts
        for a in annotations
        if a.name.startswith("enumerate(DataLoader)") and (main_tid is None or a.tid == main_tid)
    )
    if not starts or not host.data_wait:
        return None
    errors = []
    for s, _ in host.data_wait:
        t = align.to_trace(s)
        j = bisect_right(starts, t)
        near = [starts[k] for k in (j - 1, j) if 0 <= k < len(starts)]
        errors.append(min(abs(t - x) for x in near))
    return statistics.median(errors)


def _device(e: _Ev) -> int:
    dev = e.args.get("device")
    if isinstance(dev, int):
        return dev
    return 0
