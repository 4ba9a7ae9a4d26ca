"""Reading the ranks' watch reports (plain dicts, as saved): their ``dist_*`` tags, each rank's
evidence and rank 0's node (their findings are read back by ``report_parse``).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from .dist_evidence import NodeGpus, RankEvidence

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


def as_int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def as_float(v: Any) -> float | None:
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
                n = as_int(e.get("value"))
                if n:
                    return n
    return None


def rank_evidence(report: Mapping[str, Any], rank: int | None = None) -> RankEvidence:
    """One rank's report dict -> :class:`RankEvidence`."""
    info = rank_info(report)
    run = report.get("run") or {}
    kernels = run.get("kernels") or {}
    steps = [float(x) for x in run.get("step_times_ms") or () if isinstance(x, (int, float))]
    if not steps and as_float(run.get("step_time_ms")):
        steps = [float(run["step_time_ms"])]
    found_rank = as_int(info.get("rank"))
    return RankEvidence(
        rank=rank if rank is not None else (found_rank if found_rank is not None else 0),
        step_times_ms=steps,
        breakdown_ms={
            k: float(v)
            for k, v in (run.get("breakdown_ms") or {}).items()
            if as_float(v) is not None
        },
        nccl_ms=as_float(kernels.get("nccl_ms_per_step")),
        gpu_busy_pct=as_float(run.get("gpu_busy_pct")),
        host=info.get("host") if isinstance(info.get("host"), str) else None,
        local_rank=as_int(info.get("local_rank")),
        device=as_int(info.get("cuda_device")),
        bottleneck=(report.get("verdict") or {}).get("bottleneck"),
        dataparallel_devices=_dataparallel_devices(report),
    )


def node_gpus(report: Mapping[str, Any]) -> NodeGpus | None:
    """The GPUs rank 0's machine has and their mean NVML utilisation over the measured steps."""
    machine = report.get("machine") or {}
    torch_info = machine.get("torch") or {}
    visible = as_int(torch_info.get("device_count")) or len(machine.get("gpus") or ())
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
        g, u, t = as_int(s.get("gpu")), as_float(s.get("util_pct")), as_float(s.get("t"))
        if g is None or u is None or t is None:
            continue
        everything.setdefault(g, []).append(u)
        if lo is None or hi is None or lo <= t <= hi:
            per_gpu.setdefault(g, []).append(u)
    chosen = per_gpu if per_gpu else everything
    util = {g: statistics.fmean(us) for g, us in chosen.items() if us}
    host = rank_info(report).get("host") or machine.get("hostname")
    return NodeGpus(visible=visible, util_pct=util, host=host if isinstance(host, str) else None)
