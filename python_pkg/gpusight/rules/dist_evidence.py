"""What the distributed rules compare, per rank and per node, and the measures read off it:
the slowest rank, the stragglers, the wait, the mean step split, which GPUs worked.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..report import Finding, Verdict
from .dist_thresholds import BUSY_UTIL_PCT, IDLE_UTIL_PCT, STRAGGLER_PCT


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


def rounded(x: float, n: int = 2) -> float:
    return round(x, n)


def percent(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole > 0 else 0.0


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
    return percent(max(0.0, top.work_ms - typical_work_ms(ranks)), step)


def mean_breakdown(ranks: Sequence[RankEvidence], total: float) -> dict[str, float]:
    """Each category averaged over the ranks, scaled to add up to ``total``."""
    keys = sorted({k for r in ranks for k in r.breakdown_ms})
    if not keys or not ranks:
        return {}
    mean = {k: statistics.fmean(r.breakdown_ms.get(k, 0.0) for r in ranks) for k in keys}
    s = sum(mean.values())
    scale = total / s if s > 0 else 0.0
    return {k: rounded(v * scale, 3) for k, v in mean.items()}


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
