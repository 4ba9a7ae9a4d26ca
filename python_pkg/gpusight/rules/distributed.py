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
from collections.abc import Mapping, Sequence
from typing import Any

from ..report import Benchmark, Finding, Report, Scalar, Verdict, sort_findings
from ..report_parse import finding_from_dict
from ..report_schema import MAX_WORLD_SIZE
from .dist_evidence import (
    DistEvidence,
    DistResult,
    NodeGpus,
    RankEvidence,
    gpu_usage,
    mean_breakdown,
    percent,
    rounded,
    slowest,
    stragglers,
    typical_work_ms,
    wait_pct,
)
from .dist_findings import comm_finding, idle_finding, imbalance_finding, nccl_slow
from .rank_reports import as_float, as_int, node_gpus, rank_evidence, rank_info
from .severity import settle


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
        percent(top.comm_ms, top.step_time_ms)
        if top is not None and top.nccl_ms is not None
        else None
    )
    overlap = top.overlap_pct if top is not None else None
    settle(found)
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
    gpu_busy = rounded(statistics.fmean(busy), 2) if busy else None
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
        out.append(
            {"x": r.rank, "y": None if y is None else rounded(y, 3), "label": f"rank {r.rank}"}
        )
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


def _latest_by_rank(reports: Sequence[Mapping[str, Any]]) -> dict[int, Mapping[str, Any]]:
    """Each rank's report (its position in ``reports`` when it names no rank); of two for one
    rank, the one that finished last."""
    by_rank: dict[int, Mapping[str, Any]] = {}
    for i, rep in enumerate(reports):
        info = rank_info(rep)
        rank = as_int(info.get("rank"))
        key = rank if rank is not None else i
        old = by_rank.get(key)
        if old is None or (as_float(info.get("finished_at")) or 0.0) >= (
            as_float(rank_info(old).get("finished_at")) or 0.0
        ):
            by_rank[key] = rep
    return by_rank


def _merged_findings(res: DistResult, pace: Mapping[str, Any]) -> list[Finding]:
    """The distributed findings, then the pace-setting rank's own (one per id)."""
    findings = list(res.findings)
    seen = {f.id for f in findings}
    for d in pace.get("findings") or ():
        if d.get("id") not in seen:
            findings.append(finding_from_dict(d))
            seen.add(d.get("id"))
    return findings


def _merged_notes(
    notes: Sequence[str],
    ev: DistEvidence,
    by_rank: Mapping[int, Mapping[str, Any]],
    top: int,
) -> list[str]:
    all_notes = list(notes)
    missing = _missing_ranks(ev.world_size, by_rank)
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
    if len(ev.ranks) > 1:
        all_notes.append(
            f"findings below the distributed ones are rank {top}'s (the slowest rank's) own"
        )
    all_notes += _grouped_notes({r: list(by_rank[r].get("notes") or ()) for r in by_rank})
    return all_notes


def _merged_kernels(
    pace_run: Mapping[str, Any], ev: DistEvidence, res: DistResult, top: int
) -> dict[str, Scalar]:
    """The pace-setting rank's kernel facts (less its own ``dist_*`` tags), the job's
    ``dist_*`` figures and each rank's step, work, communication and NCCL time."""
    kernels: dict[str, Scalar] = {
        k: v for k, v in (pace_run.get("kernels") or {}).items() if not str(k).startswith("dist_")
    }
    kernels.update(
        {
            "dist_world_size": ev.world_size,
            "dist_ranks_reported": len(ev.ranks),
            "dist_backend": ev.backend,
            "dist_representative_rank": top,
            "dist_slowest_rank": res.slowest_rank,
            "dist_stragglers": ", ".join(map(str, res.stragglers)) or None,
            "dist_wait_pct": rounded(res.wait_pct, 1),
            "dist_comm_share_pct": None
            if res.comm_share_pct is None
            else rounded(res.comm_share_pct, 1),
            "dist_overlap_pct": None if res.overlap_pct is None else rounded(res.overlap_pct, 1),
            "dist_idle_gpus": ", ".join(map(str, res.idle_gpus)) or None,
        }
    )
    for r in ev.ranks:
        kernels[f"rank{r.rank}_step_ms"] = rounded(r.step_time_ms, 3)
        kernels[f"rank{r.rank}_work_ms"] = rounded(r.work_ms, 3)
        kernels[f"rank{r.rank}_comm_ms"] = rounded(r.comm_ms, 3)
        if r.nccl_ms is not None:
            kernels[f"rank{r.rank}_nccl_ms"] = rounded(r.nccl_ms, 3)
    return kernels


def _merged_run(
    pace: Mapping[str, Any],
    first: Mapping[str, Any],
    ev: DistEvidence,
    res: DistResult,
    top: int,
    first_rank: int,
    label: str | None,
) -> dict[str, Any]:
    """The pace-setting rank's run, with the job's step time and split, the first rank's GPU
    timeline and the merged kernel facts."""
    run = dict(pace.get("run") or {})
    first_run = first.get("run") or {}
    steps = max((len(r.step_times_ms) for r in ev.ranks), default=0)
    kernels = _merged_kernels(run, ev, res, top)
    run.update(
        {
            "steps": steps,
            "step_time_ms": rounded(res.step_time_ms, 3),
            "gpu_busy_pct": res.verdict.gpu_busy_pct,
            "timeline": list(first_run.get("timeline") or ()),
            "kernels": kernels,
        }
    )
    if res.breakdown_ms:
        run["breakdown_ms"] = res.breakdown_ms
    if label:
        run["label"] = label
    if top != first_rank:
        # Step starts are on the slowest rank's own clock; the timeline is the first rank's.
        run.pop("step_starts_s", None)
    return run


def _rank_benchmarks(ev: DistEvidence, res: DistResult) -> list[Benchmark]:
    """``dist.step_time``, ``dist.work_time`` and (with a GPU trace) ``dist.comm_exposed``,
    each with one point per rank."""
    ranks = ev.ranks
    benches = [
        Benchmark(
            id="dist.step_time",
            label="Step time per rank",
            value=rounded(res.step_time_ms, 3),
            unit="ms",
            params={"ranks": len(ranks), "world_size": ev.world_size},
            series=_per_rank_series(ranks, "step_time_ms"),
        ),
        Benchmark(
            id="dist.work_time",
            label="Own work per rank (step minus exposed communication)",
            value=rounded(max(r.work_ms for r in ranks), 3),
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
                else rounded(next(r.comm_ms for r in ranks if r.rank == res.slowest_rank), 3),
                unit="ms",
                params={
                    "overlap_pct": None if res.overlap_pct is None else rounded(res.overlap_pct, 1)
                },
                series=_per_rank_series(ranks, "comm_ms"),
            )
        )
    return benches


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
    by_rank = _latest_by_rank(reports)
    said = {rank: as_int(rank_info(r).get("world_size")) for rank, r in by_rank.items()}
    sizes = sorted({w for w in said.values() if w})
    if len(sizes) > 1 and world_size is None:
        # Reports of different jobs: a merge would name ranks missing that no job had.
        each = ", ".join(f"rank {r}: {w}" for r, w in sorted(said.items()) if w)
        raise ValueError(
            f"the reports disagree on the job's world size ({each}): they come from different "
            "runs; merge the files of one run (or say --world-size)"
        )
    world = world_size or (sizes[-1] if sizes else len(by_rank))
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
    title = f"{label or first.get('title') or 'distributed run'}: {len(ranks)} of {world} ranks"
    return Report(
        kind="distributed",
        machine=dict(first.get("machine") or {}),
        run=_merged_run(pace, first, ev, res, top, min(by_rank), label),
        benchmarks=_rank_benchmarks(ev, res),
        verdict=res.verdict,
        findings=_merged_findings(res, pace),
        notes=_merged_notes(notes, ev, by_rank, top),
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
    me.device = device if device is not None else as_int(kernels.get("device"))
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
    "comm_finding",
    "finding_from_dict",
    "gpu_usage",
    "idle_finding",
    "imbalance_finding",
    "mean_breakdown",
    "merge_reports",
    "nccl_slow",
    "node_gpus",
    "rank_evidence",
    "rank_info",
    "single_process_idle",
    "slowest",
    "stragglers",
    "typical_work_ms",
    "verdict",
    "wait_pct",
]
