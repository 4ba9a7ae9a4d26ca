"""The distributed findings, one function per finding id: ``dist.idle_gpus``,
``dist.imbalance``, ``dist.comm_bound`` and ``dist.nccl_slow``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..fixes import fix
from ..fixes import scaling as _scaling_snippets  # noqa: F401  (registers the snippets)
from ..report import Benchmark, Evidence, Finding, Impact, Severity
from .dist_evidence import (
    NodeGpus,
    RankEvidence,
    percent,
    rounded,
    slowest,
    stragglers,
    typical_work_ms,
    wait_pct,
)
from .dist_thresholds import (
    COMM_CRITICAL_PCT,
    COMM_WARN_PCT,
    IMBALANCE_NAMED_PCT,
    NCCL_SLOW_SHARE,
)


def _impact(share: float, text: str) -> Impact:
    share = max(0.0, min(100.0, share))
    speedup = 100.0 / (100.0 - share) if share < 100.0 else None
    return Impact(
        basis="estimated",
        text=text,
        recoverable_pct=rounded(share, 1),
        speedup=round(speedup, 2) if speedup is not None else None,
    )


def idle_finding(
    node: NodeGpus, ranks: Sequence[RankEvidence], used: list[int], idle: list[int]
) -> Finding | None:
    if not idle or not used or node.visible < 2:
        return None  # no GPU used at all is code.cpu_model's case, not this one
    share = percent(len(idle), node.visible)
    sev: Severity = "critical" if share >= 50.0 else "warn"
    ev = [
        Evidence("GPUs visible on this machine", node.visible),
        Evidence("processes (ranks) on this machine", len(ranks)),
        Evidence("GPUs in use", ", ".join(map(str, used)) or None),
        Evidence("idle GPUs", ", ".join(map(str, idle))),
    ]
    for g in sorted(node.util_pct):
        ev.append(
            Evidence(
                f"GPU {g} utilisation during the steps (NVML)", rounded(node.util_pct[g], 1), "%"
            )
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
        Evidence("its own work per step", rounded(top.work_ms), "ms"),
        Evidence("the other ranks' own work per step (median)", rounded(mid), "ms"),
        Evidence("others wait per step", rounded(extra), "ms"),
        Evidence("stragglers", ", ".join(map(str, late))),
    ]
    ev += [
        Evidence(f"rank {r.rank}: own work / step", rounded(r.work_ms), "ms")
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
            extra_ms=rounded(extra, 1),
        ),
    )


def comm_finding(ranks: Sequence[RankEvidence]) -> Finding | None:
    top = slowest(ranks)
    if top is None or top.nccl_ms is None or top.step_time_ms <= 0:
        return None
    share = percent(top.comm_ms, top.step_time_ms)
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
            Evidence("NCCL kernel time per step", rounded(top.nccl_ms), "ms"),
            Evidence("of it exposed (no compute beside it)", rounded(top.comm_ms), "ms"),
            Evidence(
                "overlapped with compute", None if overlap is None else rounded(overlap, 1), "%"
            ),
            Evidence("step time", rounded(top.step_time_ms), "ms"),
        ],
        impact=_impact(
            share,
            "Communication overlapped with backward (or done less often) stops costing step time.",
        ),
        fix=fix(
            "Overlap and shrink the all-reduce: larger buckets, bf16 compression, or "
            "gradient accumulation with no_sync().",
            "dist.overlap",
            exposed_ms=rounded(top.comm_ms, 1),
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
        Evidence("share of the ceiling", rounded(100 * share, 1), "%"),
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
