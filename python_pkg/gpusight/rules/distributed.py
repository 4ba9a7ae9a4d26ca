"""Several ranks' watched runs -> one distributed report: stragglers, imbalance, communication,
idle GPUs. Pure functions of plain data (the ranks' report dicts); never imports torch.

Each rank of a ``torchrun`` job writes its own watch report (``gpusight run`` under torchrun
tags it with ``run.kernels['dist_rank']`` and friends, see ``watch/ranks.py``). Merging reads
those dicts only, so the same code serves rank 0 at the end of a run and ``gpusight merge``
on files copied from several nodes.

How a rank's step is read. In data-parallel training the ranks move in lockstep: each step
ends with a gradient all-reduce that no rank leaves before every rank has entered it. So step
times are equal across ranks, and a slow rank shows up as *waiting* on the others: their NCCL
kernels run (spinning) until the slow rank arrives. The rank's watch counts NCCL kernel time not
hidden under compute kernels as ``communication`` (``breakdown_ms``); what remains of the step,
``work``, is the rank's own time (compute, input, host). Then

* the straggler is the rank with the most work; the others' wait is ``max(work) - work``;
* the communication a faster network or better overlap could save is the *slowest* rank's
  exposed communication (it waits for nobody), not the average, which counts waiting too;
* overlap is the share of all NCCL kernel time that ran under compute kernels.

Without a GPU profiler trace (CPU, gloo) collectives run inside backward on the host and count
as compute; communication is then reported as not measured.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..fixes import fix
from ..fixes import scaling as _scaling_snippets  # noqa: F401  (registers the snippets)
from ..report import (
    Benchmark,
    Evidence,
    Finding,
    Fix,
    Impact,
    Report,
    Scalar,
    Severity,
    SourceLine,
    Verdict,
    sort_findings,
)
from ..report_schema import MAX_WORLD_SIZE

# A rank whose own work per step is this much above the median rank's is a straggler ...
STRAGGLER_PCT = 10.0
# ... and the wait it causes must cost at least this share of the step to be a finding.
IMBALANCE_NAMED_PCT = 5.0
# Exposed communication (on the slowest rank) as a share of the step.
COMM_WARN_PCT = 20.0
COMM_CRITICAL_PCT = 50.0
# NVML utilisation: a GPU under IDLE is idle; one at BUSY or above is doing the run's work.
IDLE_UTIL_PCT = 5.0
BUSY_UTIL_PCT = 20.0
# All-reduce bus bandwidth under this share of the link's ceiling (largest message) is slow:
# nccl-tests reach 70-90 % of the per-GPU NVLink bandwidth on healthy H100/H200 systems.
NCCL_SLOW_SHARE = 0.5

DIST_KEYS = (
    "dist_rank",
    "dist_world_size",
    "dist_local_rank",
    "dist_local_world_size",
    "dist_host",
    "dist_cuda_device",
    "dist_started_at",
    "dist_finished_at",
    "dist_run_id",
    "dist_backend",
)


# --- evidence -----------------------------------------------------------------------------------


@dataclass
class RankEvidence:
    """One rank's run, reduced to what the merge compares (ms per step)."""

    rank: int
    step_times_ms: list[float]
    breakdown_ms: dict[str, float] = field(default_factory=dict)
    nccl_ms: float | None = None
    """All NCCL kernel time per step, overlapped or not; None without a GPU profiler trace."""
    gpu_busy_pct: float | None = None
    host: str | None = None
    local_rank: int | None = None
    device: int | None = None
    """The CUDA device the rank worked on (None: unknown, or CUDA never started)."""
    bottleneck: str | None = None
    dataparallel_devices: int | None = None

    @property
    def step_time_ms(self) -> float:
        return statistics.median(self.step_times_ms) if self.step_times_ms else 0.0

    @property
    def comm_ms(self) -> float:
        """Communication exposed per step: NCCL kernels with no compute kernel beside them."""
        return float(self.breakdown_ms.get("communication", 0.0))

    @property
    def work_ms(self) -> float:
        """The rank's own time per step: everything but exposed communication.

        Without a GPU trace waiting cannot be told from work: then the mean step time, which
        ranks in lockstep share (their medians can differ by where each puts a step's end)."""
        if self.nccl_ms is None:
            return statistics.fmean(self.step_times_ms) if self.step_times_ms else 0.0
        return max(0.0, self.step_time_ms - self.comm_ms)

    @property
    def overlap_pct(self) -> float | None:
        """Share of NCCL kernel time that ran under compute kernels (0-100)."""
        if self.nccl_ms is None or self.nccl_ms <= 0:
            return None
        return max(0.0, min(100.0, 100.0 * (1.0 - self.comm_ms / self.nccl_ms)))


@dataclass
class NodeGpus:
    """The GPUs of one node (the one rank 0 ran on) and how busy each was during the steps."""

    visible: int
    util_pct: dict[int, float] = field(default_factory=dict)
    host: str | None = None


@dataclass
class DistEvidence:
    world_size: int
    ranks: list[RankEvidence]
    node: NodeGpus | None = None
    backend: str | None = None

    @property
    def gpu_trace(self) -> bool:
        return any(r.nccl_ms is not None for r in self.ranks)


@dataclass
class DistResult:
    step_time_ms: float
    breakdown_ms: dict[str, float]
    slowest_rank: int | None
    stragglers: list[int]
    wait_pct: float
    """Share of the step the median rank spends waiting for the slowest (0-100)."""
    comm_share_pct: float | None
    """The slowest rank's exposed communication as a share of its step; None: not measured."""
    overlap_pct: float | None
    idle_gpus: list[int]
    used_gpus: list[int]
    findings: list[Finding]
    verdict: Verdict


# --- small pure helpers ---------------------------------------------------------------------------


def _r(x: float, n: int = 2) -> float:
    return round(x, n)


def _pct(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole > 0 else 0.0


def _impact(share: float, text: str) -> Impact:
    share = max(0.0, min(100.0, share))
    speedup = 100.0 / (100.0 - share) if share < 100.0 else None
    return Impact(
        basis="estimated",
        text=text,
        recoverable_pct=_r(share, 1),
        speedup=round(speedup, 2) if speedup is not None else None,
    )


def slowest(ranks: Sequence[RankEvidence]) -> RankEvidence | None:
    """The rank with the most own work per step (ties: the lowest rank)."""
    if not ranks:
        return None
    return max(ranks, key=lambda r: (r.work_ms, -r.rank))


def _median_of_others(ranks: Sequence[RankEvidence], me: RankEvidence) -> float:
    return statistics.median(r.work_ms for r in ranks if r is not me)


def stragglers(ranks: Sequence[RankEvidence], pct: float = STRAGGLER_PCT) -> list[int]:
    """Ranks whose own work exceeds the median of the other ranks' by more than ``pct`` %."""
    if len(ranks) < 2:
        return []
    out = []
    for r in ranks:
        mid = _median_of_others(ranks, r)
        if mid > 0 and r.work_ms > mid * (1 + pct / 100.0):
            out.append(r.rank)
    return sorted(out)


def typical_work_ms(ranks: Sequence[RankEvidence]) -> float:
    """The other ranks' own work per step, as the slowest rank sees them (their median)."""
    top = slowest(ranks)
    if top is None:
        return 0.0
    if len(ranks) < 2:
        return top.work_ms
    return _median_of_others(ranks, top)


def wait_pct(ranks: Sequence[RankEvidence]) -> float:
    """How much of a step the typical rank waits for the slowest one, in percent."""
    top = slowest(ranks)
    if top is None or len(ranks) < 2:
        return 0.0
    step = max(r.step_time_ms for r in ranks)
    return _pct(max(0.0, top.work_ms - typical_work_ms(ranks)), step)


def mean_breakdown(ranks: Sequence[RankEvidence], total: float) -> dict[str, float]:
    """Each category averaged over the ranks, scaled to add up to ``total``."""
    keys = sorted({k for r in ranks for k in r.breakdown_ms})
    if not keys or not ranks:
        return {}
    mean = {k: statistics.fmean(r.breakdown_ms.get(k, 0.0) for r in ranks) for k in keys}
    s = sum(mean.values())
    scale = total / s if s > 0 else 0.0
    return {k: _r(v * scale, 3) for k, v in mean.items()}


def gpu_usage(node: NodeGpus, ranks: Sequence[RankEvidence]) -> tuple[list[int], list[int]]:
    """(used, idle) GPU indices of the node, from the ranks' devices and NVML utilisation.

    A GPU is idle when NVML saw it under ``IDLE_UTIL_PCT`` while the run kept another GPU
    busy, or, without NVML, when no rank of the node worked on it. A rank that never said
    which device it used counts as using the GPU of its local rank (torchrun's convention).
    """
    on_node = [r for r in ranks if node.host is None or r.host is None or r.host == node.host]
    claimed: set[int] = set()
    for r in on_node:
        if r.dataparallel_devices:
            claimed.update(range(r.dataparallel_devices))
        if r.device is not None:
            claimed.add(r.device)
        elif r.local_rank is not None:
            claimed.add(r.local_rank)
    gpus = range(node.visible)
    utils = {g: u for g, u in node.util_pct.items() if 0 <= g < node.visible}
    busy = {g for g, u in utils.items() if u >= BUSY_UTIL_PCT}
    idle: list[int] = []
    for g in gpus:
        if g in utils:
            if utils[g] < IDLE_UTIL_PCT and (busy or g not in claimed):
                idle.append(g)
        elif claimed and g not in claimed:
            idle.append(g)
    used = sorted((claimed | busy) - set(idle))
    return used, idle


# --- findings ----------------------------------------------------------------------------------


def idle_finding(
    node: NodeGpus, ranks: Sequence[RankEvidence], used: list[int], idle: list[int]
) -> Finding | None:
    if not idle or not used or node.visible < 2:
        return None  # no GPU used at all is code.cpu_model's case, not this one
    share = _pct(len(idle), node.visible)
    sev: Severity = "critical" if share >= 50.0 else "warn"
    ev = [
        Evidence("GPUs visible on this machine", node.visible),
        Evidence("processes (ranks) on this machine", len(ranks)),
        Evidence("GPUs in use", ", ".join(map(str, used)) or None),
        Evidence("idle GPUs", ", ".join(map(str, idle))),
    ]
    for g in sorted(node.util_pct):
        ev.append(
            Evidence(f"GPU {g} utilisation during the steps (NVML)", _r(node.util_pct[g], 1), "%")
        )
    same_device = len({r.device for r in ranks if r.device is not None}) == 1 and len(ranks) > 1
    detail = (
        "Every rank worked on the same GPU: call torch.cuda.set_device(LOCAL_RANK) before "
        "init_process_group and move the model to that device."
        if same_device
        else "Data parallelism scales the step's work with the number of GPUs; these did none."
    )
    return Finding(
        id="dist.idle_gpus",
        severity=sev,
        title=f"{len(idle)} of {node.visible} GPUs on this machine stayed idle",
        detail=detail,
        evidence=ev,
        impact=_impact(
            share,
            f"With every GPU working, up to {node.visible / max(1, len(used)):.1f}x the "
            "samples per second (data parallel, if the batch is split across them).",
        ),
        fix=fix(
            "Run one process per GPU with torchrun and DistributedDataParallel.",
            "dist.use_all_gpus",
            idle=len(idle),
            gpus=node.visible,
        ),
    )


def imbalance_finding(ranks: Sequence[RankEvidence]) -> Finding | None:
    late = stragglers(ranks)
    waited = wait_pct(ranks)
    if not late or waited < IMBALANCE_NAMED_PCT:
        return None
    top = slowest(ranks)
    assert top is not None
    mid = typical_work_ms(ranks)
    extra = top.work_ms - mid
    ev = [
        Evidence("slowest rank", top.rank),
        Evidence("its own work per step", _r(top.work_ms), "ms"),
        Evidence("the other ranks' own work per step (median)", _r(mid), "ms"),
        Evidence("others wait per step", _r(extra), "ms"),
        Evidence("stragglers", ", ".join(map(str, late))),
    ]
    ev += [
        Evidence(f"rank {r.rank}: own work / step", _r(r.work_ms), "ms")
        for r in sorted(ranks, key=lambda r: r.rank)[:16]
    ]
    if top.bottleneck:
        ev.append(Evidence(f"rank {top.rank}'s own bottleneck", top.bottleneck))
    return Finding(
        id="dist.imbalance",
        severity="critical" if waited >= 25.0 else "warn",
        title=f"Rank {top.rank} is a straggler: the others wait {extra:.1f} ms per step for it",
        detail=(
            "Every rank waits for the slowest in the gradient all-reduce, so the job runs at "
            "the pace of its slowest rank."
        ),
        evidence=ev,
        impact=_impact(waited, "Balanced ranks would stop waiting for the slowest."),
        fix=fix(
            "Give every rank the same work per step; fix what slows the straggler first.",
            "dist.balance",
            rank=top.rank,
            extra_ms=_r(extra, 1),
        ),
    )


def comm_finding(ranks: Sequence[RankEvidence]) -> Finding | None:
    top = slowest(ranks)
    if top is None or top.nccl_ms is None or top.step_time_ms <= 0:
        return None
    share = _pct(top.comm_ms, top.step_time_ms)
    if share < COMM_WARN_PCT:
        return None
    overlap = top.overlap_pct
    return Finding(
        id="dist.comm_bound",
        severity="critical" if share >= COMM_CRITICAL_PCT else "warn",
        title=f"Collectives leave the GPU waiting {share:.0f}% of each step",
        detail=(
            "Measured on the slowest rank, which waits for nobody: this is communication "
            "itself, not waiting for another rank."
        ),
        evidence=[
            Evidence("rank", top.rank),
            Evidence("NCCL kernel time per step", _r(top.nccl_ms), "ms"),
            Evidence("of it exposed (no compute beside it)", _r(top.comm_ms), "ms"),
            Evidence("overlapped with compute", None if overlap is None else _r(overlap, 1), "%"),
            Evidence("step time", _r(top.step_time_ms), "ms"),
        ],
        impact=_impact(
            share,
            "Communication overlapped with backward (or done less often) stops costing step time.",
        ),
        fix=fix(
            "Overlap and shrink the all-reduce: larger buckets, bf16 compression, or "
            "gradient accumulation with no_sync().",
            "dist.overlap",
            exposed_ms=_r(top.comm_ms, 1),
            accumulate=4,
        ),
    )


def nccl_slow(benchmarks: Iterable[Benchmark]) -> Finding | None:
    """``dist.nccl_slow`` from the all-reduce benchmark row (``allreduce.busbw``)."""
    row = next((b for b in benchmarks if b.id == "allreduce.busbw"), None)
    if row is None or row.value is None or not row.ceiling:
        return None
    share = row.value / row.ceiling
    if share >= NCCL_SLOW_SHARE:
        return None
    params = row.params or {}
    gpus = params.get("world_size")
    evidence = [
        Evidence("all-reduce bus bandwidth", row.value, "GB/s"),
        Evidence("link ceiling", row.ceiling, "GB/s"),
        Evidence("share of the ceiling", _r(100 * share, 1), "%"),
        Evidence("message size", params.get("bytes"), "bytes"),
        Evidence("GPUs", gpus),
        Evidence("NCCL version", params.get("nccl_version")),
    ]
    if row.ceiling_source:
        evidence.append(Evidence("ceiling from", row.ceiling_source))
    return Finding(
        id="dist.nccl_slow",
        severity="warn",
        title=(
            f"NCCL all-reduce reaches {row.value:.0f} GB/s bus bandwidth, {100 * share:.0f}% of "
            f"what the link allows ({row.ceiling:.0f} GB/s)"
        ),
        evidence=evidence,
        impact=Impact(
            basis="estimated",
            text=f"Gradient all-reduces take up to {row.ceiling / row.value:.1f}x longer than the "
            "link allows.",
        ),
        fix=fix(
            "Check which transport NCCL chose and that every link is up.",
            "dist.nccl_check",
            busbw=round(row.value, 1),
            ceiling=round(row.ceiling, 1),
            gpus=int(gpus) if isinstance(gpus, int) else 2,
        ),
    )


# --- analysis ----------------------------------------------------------------------------------


def analyse(ev: DistEvidence) -> DistResult:
    ranks = sorted(ev.ranks, key=lambda r: r.rank)
    step = max((r.step_time_ms for r in ranks), default=0.0)
    top = slowest(ranks)
    used: list[int] = []
    idle: list[int] = []
    found: list[Finding] = []
    if ev.node is not None:
        used, idle = gpu_usage(ev.node, ranks)
        f = idle_finding(ev.node, ranks, used, idle)
        if f is not None:
            found.append(f)
    for make in (imbalance_finding, comm_finding):
        f = make(ranks)
        if f is not None:
            found.append(f)
    comm_share = (
        _pct(top.comm_ms, top.step_time_ms) if top is not None and top.nccl_ms is not None else None
    )
    overlap = top.overlap_pct if top is not None else None
    result = DistResult(
        step_time_ms=step,
        breakdown_ms=mean_breakdown(ranks, step),
        slowest_rank=top.rank if top is not None else None,
        stragglers=stragglers(ranks),
        wait_pct=wait_pct(ranks),
        comm_share_pct=comm_share,
        overlap_pct=overlap,
        idle_gpus=idle,
        used_gpus=used,
        findings=found,
        verdict=Verdict(),
    )
    result.verdict = verdict(ev, result)
    return result


def verdict(ev: DistEvidence, res: DistResult) -> Verdict:
    ranks = ev.ranks
    busy = [r.gpu_busy_pct for r in ranks if r.gpu_busy_pct is not None]
    gpu_busy = _r(statistics.fmean(busy), 2) if busy else None
    if not ranks or res.step_time_ms <= 0:
        return Verdict("none", gpu_busy, "No rank reported a measured step.")
    ids = {f.id: f for f in res.findings}
    top = next((r for r in ranks if r.rank == res.slowest_rank), None)
    if "dist.idle_gpus" in ids and ids["dist.idle_gpus"].severity == "critical":
        bottleneck = "device_placement"
    elif "dist.comm_bound" in ids:
        bottleneck = "communication"
    else:
        bottleneck = (top.bottleneck if top is not None else None) or "none"
    parts = [f"{ev.world_size} ranks, {res.step_time_ms:.1f} ms per step"]
    if top is not None and len(ranks) > 1:
        mid = typical_work_ms(ranks)
        parts.append(
            f"slowest rank {top.rank} ({top.work_ms:.1f} ms own work vs {mid:.1f} ms for the "
            "others)"
        )
    if res.comm_share_pct is not None:
        text = f"exposed communication {res.comm_share_pct:.0f}% of the step"
        if res.overlap_pct is not None:
            text += f", {res.overlap_pct:.0f}% of NCCL time overlapped with compute"
        parts.append(text)
    else:
        parts.append("communication not measured (no GPU profiler trace)")
    summary = "; ".join(parts) + "."
    first = sort_findings(res.findings)
    if first:
        summary += f" {first[0].title}."
    return Verdict(bottleneck=bottleneck, gpu_busy_pct=gpu_busy, summary=summary)


# --- reading the ranks' reports (plain dicts) ----------------------------------------------------


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _float(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def rank_info(report: Mapping[str, Any]) -> dict[str, Any]:
    """The ``dist_*`` tags of a rank's report (empty for a report of no rank)."""
    run = report.get("run") or {}
    kernels = run.get("kernels") or {}
    return {k[5:]: kernels[k] for k in DIST_KEYS if k in kernels}


def _dataparallel_devices(report: Mapping[str, Any]) -> int | None:
    for f in report.get("findings") or ():
        if f.get("id") == "code.dataparallel":
            for e in f.get("evidence") or ():
                n = _int(e.get("value"))
                if n:
                    return n
    return None


def rank_evidence(report: Mapping[str, Any], rank: int | None = None) -> RankEvidence:
    """One rank's report dict -> :class:`RankEvidence`."""
    info = rank_info(report)
    run = report.get("run") or {}
    kernels = run.get("kernels") or {}
    steps = [float(x) for x in run.get("step_times_ms") or () if isinstance(x, (int, float))]
    if not steps and _float(run.get("step_time_ms")):
        steps = [float(run["step_time_ms"])]
    found_rank = _int(info.get("rank"))
    return RankEvidence(
        rank=rank if rank is not None else (found_rank if found_rank is not None else 0),
        step_times_ms=steps,
        breakdown_ms={
            k: float(v) for k, v in (run.get("breakdown_ms") or {}).items() if _float(v) is not None
        },
        nccl_ms=_float(kernels.get("nccl_ms_per_step")),
        gpu_busy_pct=_float(run.get("gpu_busy_pct")),
        host=info.get("host") if isinstance(info.get("host"), str) else None,
        local_rank=_int(info.get("local_rank")),
        device=_int(info.get("cuda_device")),
        bottleneck=(report.get("verdict") or {}).get("bottleneck"),
        dataparallel_devices=_dataparallel_devices(report),
    )


def node_gpus(report: Mapping[str, Any]) -> NodeGpus | None:
    """The GPUs rank 0's machine has and their mean NVML utilisation over the measured steps."""
    machine = report.get("machine") or {}
    torch_info = machine.get("torch") or {}
    visible = _int(torch_info.get("device_count")) or len(machine.get("gpus") or ())
    if not visible:
        return None
    run = report.get("run") or {}
    starts = [float(x) for x in run.get("step_starts_s") or ()]
    times = [float(x) for x in run.get("step_times_ms") or ()]
    lo = starts[0] if starts else None
    hi = starts[-1] + times[-1] / 1000.0 if starts and times else None
    per_gpu: dict[int, list[float]] = {}
    everything: dict[int, list[float]] = {}
    for s in run.get("timeline") or ():
        g, u, t = _int(s.get("gpu")), _float(s.get("util_pct")), _float(s.get("t"))
        if g is None or u is None or t is None:
            continue
        everything.setdefault(g, []).append(u)
        if lo is None or hi is None or lo <= t <= hi:
            per_gpu.setdefault(g, []).append(u)
    chosen = per_gpu if per_gpu else everything
    util = {g: statistics.fmean(us) for g, us in chosen.items() if us}
    host = rank_info(report).get("host") or machine.get("hostname")
    return NodeGpus(visible=visible, util_pct=util, host=host if isinstance(host, str) else None)


def finding_from_dict(d: Mapping[str, Any]) -> Finding:
    """A finding as a report holds it -> a :class:`Finding` (the inverse of ``to_dict``)."""

    def source(s: Mapping[str, Any] | None) -> SourceLine | None:
        if not s:
            return None
        return SourceLine(file=s["file"], line=s["line"], code=s.get("code"), count=s.get("count"))

    imp = d.get("impact") or {}
    fx = d.get("fix") or {}
    return Finding(
        id=d["id"],
        severity=d["severity"],
        title=d["title"],
        evidence=[
            Evidence(e["label"], e.get("value"), e.get("unit"), source(e.get("source")))
            for e in d.get("evidence") or ()
        ],
        impact=Impact(
            basis=imp.get("basis", "none"),
            text=imp.get("text", ""),
            speedup=imp.get("speedup"),
            recoverable_pct=imp.get("recoverable_pct"),
        ),
        fix=Fix(
            text=fx.get("text", ""),
            snippet_id=fx.get("snippet_id"),
            code=fx.get("code"),
            language=fx.get("language"),
        ),
        detail=d.get("detail"),
        gpu_index=d.get("gpu_index"),
    )


def _grouped_notes(by_rank: Mapping[int, Sequence[str]]) -> list[str]:
    """'ranks 0, 1: note' for a note several ranks share, in first-seen order."""
    who: dict[str, list[int]] = {}
    for rank in sorted(by_rank):
        for note in by_rank[rank]:
            who.setdefault(note, []).append(rank)
    out = []
    for note, ranks in who.items():
        label = "rank" if len(ranks) == 1 else "ranks"
        out.append(f"{label} {', '.join(map(str, ranks))}: {note}")
    return out


def _per_rank_series(ranks: Sequence[RankEvidence], value: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for r in ranks:
        y = getattr(r, value)
        out.append({"x": r.rank, "y": None if y is None else _r(y, 3), "label": f"rank {r.rank}"})
    return out


#: Missing ranks named one by one in the notes; beyond that, a count.
MISSING_RANKS_LISTED = 32


def _missing_ranks(world: int, present: Mapping[int, Any]) -> str:
    """'2, 5, 7' (or '2, 5, ... and 999 more'): the ranks below ``world`` without a report.
    Time and memory grow with the ranks present, never with ``world``."""
    have = sum(1 for r in present if 0 <= r < world)
    total = world - have
    listed: list[str] = []
    r = 0
    while len(listed) < min(total, MISSING_RANKS_LISTED):
        if r not in present:
            listed.append(str(r))
        r += 1
    more = total - len(listed)
    return ", ".join(listed) + (f" ... and {more} more" if more else "")


def merge_reports(
    reports: Sequence[Mapping[str, Any]],
    *,
    world_size: int | None = None,
    label: str | None = None,
    notes: Sequence[str] = (),
) -> Report:
    """The ranks' watch reports (dicts, any order) -> one ``kind="distributed"`` report.

    ``world_size``: how many ranks the job had (default: what the reports say); ranks that sent
    no report are named in the notes. The machine, GPU timeline and node facts come from the
    lowest rank present (rank 0 normally); the step split is the mean over the ranks.
    """
    if not reports:
        raise ValueError("no rank reports to merge")
    by_rank: dict[int, Mapping[str, Any]] = {}
    for i, rep in enumerate(reports):
        info = rank_info(rep)
        rank = _int(info.get("rank"))
        key = rank if rank is not None else i
        old = by_rank.get(key)
        if old is None or (_float(info.get("finished_at")) or 0.0) >= (
            _float(rank_info(old).get("finished_at")) or 0.0
        ):
            by_rank[key] = rep
    said = [_int(rank_info(r).get("world_size")) for r in by_rank.values()]
    world = world_size or max([w for w in said if w] or [len(by_rank)])
    if not 1 <= world <= MAX_WORLD_SIZE:
        raise ValueError(f"a world size of {world} ranks is outside 1..{MAX_WORLD_SIZE}")
    ranks = [rank_evidence(rep, rank) for rank, rep in sorted(by_rank.items())]
    first = by_rank[min(by_rank)]
    backend = next(
        (str(b) for b in (rank_info(r).get("backend") for r in by_rank.values()) if b), None
    )
    ev = DistEvidence(world_size=world, ranks=ranks, node=node_gpus(first), backend=backend)
    res = analyse(ev)

    top = res.slowest_rank if res.slowest_rank is not None else min(by_rank)
    pace = by_rank[top]
    findings = list(res.findings)
    seen = {f.id for f in findings}
    for d in pace.get("findings") or ():
        if d.get("id") not in seen:
            findings.append(finding_from_dict(d))
            seen.add(d.get("id"))

    all_notes = list(notes)
    missing = _missing_ranks(world, by_rank)
    if missing:
        all_notes.append(
            f"no report from rank(s) {missing}: they ended before writing "
            "one, or ran on another machine (set GPUSIGHT_RANK_DIR to a shared directory, or "
            "copy their files and run gpusight merge)"
        )
    if not ev.gpu_trace:
        all_notes.append(
            "communication was not measured: no rank had a GPU profiler trace (on the CPU, "
            "gloo's collectives run inside backward and count as compute)"
        )
    if len(ranks) > 1:
        all_notes.append(
            f"findings below the distributed ones are rank {top}'s (the slowest rank's) own"
        )
    all_notes += _grouped_notes({r: list(by_rank[r].get("notes") or ()) for r in by_rank})

    run = dict(pace.get("run") or {})
    first_run = first.get("run") or {}
    steps = max((len(r.step_times_ms) for r in ranks), default=0)
    kernels: dict[str, Scalar] = {
        k: v for k, v in (run.get("kernels") or {}).items() if not str(k).startswith("dist_")
    }
    kernels.update(
        {
            "dist_world_size": world,
            "dist_ranks_reported": len(ranks),
            "dist_backend": backend,
            "dist_representative_rank": top,
            "dist_slowest_rank": res.slowest_rank,
            "dist_stragglers": ", ".join(map(str, res.stragglers)) or None,
            "dist_wait_pct": _r(res.wait_pct, 1),
            "dist_comm_share_pct": None
            if res.comm_share_pct is None
            else _r(res.comm_share_pct, 1),
            "dist_overlap_pct": None if res.overlap_pct is None else _r(res.overlap_pct, 1),
            "dist_idle_gpus": ", ".join(map(str, res.idle_gpus)) or None,
        }
    )
    for r in ranks:
        kernels[f"rank{r.rank}_step_ms"] = _r(r.step_time_ms, 3)
        kernels[f"rank{r.rank}_work_ms"] = _r(r.work_ms, 3)
        kernels[f"rank{r.rank}_comm_ms"] = _r(r.comm_ms, 3)
        if r.nccl_ms is not None:
            kernels[f"rank{r.rank}_nccl_ms"] = _r(r.nccl_ms, 3)
    run.update(
        {
            "steps": steps,
            "step_time_ms": _r(res.step_time_ms, 3),
            "gpu_busy_pct": res.verdict.gpu_busy_pct,
            "timeline": list(first_run.get("timeline") or ()),
            "kernels": kernels,
        }
    )
    if res.breakdown_ms:
        run["breakdown_ms"] = res.breakdown_ms
    if label:
        run["label"] = label
    if top != min(by_rank):
        # Step starts are on the slowest rank's own clock; the timeline is the first rank's.
        run.pop("step_starts_s", None)

    benches = [
        Benchmark(
            id="dist.step_time",
            label="Step time per rank",
            value=_r(res.step_time_ms, 3),
            unit="ms",
            params={"ranks": len(ranks), "world_size": world},
            series=_per_rank_series(ranks, "step_time_ms"),
        ),
        Benchmark(
            id="dist.work_time",
            label="Own work per rank (step minus exposed communication)",
            value=_r(max(r.work_ms for r in ranks), 3),
            unit="ms",
            params={"slowest_rank": res.slowest_rank},
            series=_per_rank_series(ranks, "work_ms"),
        ),
    ]
    if ev.gpu_trace:
        benches.append(
            Benchmark(
                id="dist.comm_exposed",
                label="Exposed communication per rank",
                value=None
                if res.comm_share_pct is None
                else _r(next(r.comm_ms for r in ranks if r.rank == res.slowest_rank), 3),
                unit="ms",
                params={"overlap_pct": None if res.overlap_pct is None else _r(res.overlap_pct, 1)},
                series=_per_rank_series(ranks, "comm_ms"),
            )
        )
    title = f"{label or first.get('title') or 'distributed run'}: {len(ranks)} of {world} ranks"
    return Report(
        kind="distributed",
        machine=dict(first.get("machine") or {}),
        run=run,
        benchmarks=benches,
        verdict=res.verdict,
        findings=findings,
        notes=all_notes,
        title=title,
    )


def single_process_idle(report: Mapping[str, Any], device: int | None = None) -> Finding | None:
    """``dist.idle_gpus`` for one process (no torchrun) on a machine with several GPUs.

    ``device``: the CUDA device the process worked on, if known; else the profiler window's
    device, else NVML utilisation alone says which GPUs worked."""
    node = node_gpus(report)
    if node is None or node.visible < 2:
        return None
    kernels = (report.get("run") or {}).get("kernels") or {}
    me = rank_evidence(report, 0)
    me.device = device if device is not None else _int(kernels.get("device"))
    if me.device is None and not node.util_pct and not me.dataparallel_devices:
        return None  # nothing says which GPU did the work
    used, idle = gpu_usage(node, [me])
    return idle_finding(node, [me], used, idle)


__all__ = [
    "DistEvidence",
    "DistResult",
    "NodeGpus",
    "RankEvidence",
    "analyse",
    "finding_from_dict",
    "gpu_usage",
    "merge_reports",
    "nccl_slow",
    "node_gpus",
    "rank_evidence",
    "single_process_idle",
    "stragglers",
    "wait_pct",
]
