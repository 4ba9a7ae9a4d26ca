"""Winning experiments -> findings (catalogue ids, measured impact, filled fix) and the verdict."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..report import Evidence, Finding, Fix, Impact, Severity, Verdict, WhatIf
from .context import Context
from .experiments import TOGETHER_KEYS, Outcome
from .snippets import CATALOGUE, combined, loader_args, render
from .variant import Variant

SNIPPET_OF = {
    "num_workers": "whatif.num_workers",
    "pin_memory": "whatif.pin_memory",
    "persistent_workers": "whatif.persistent_workers",
    "prefetch_factor": "whatif.prefetch_factor",
    "batch_size": "whatif.batch_size",
    "channels_last": "whatif.channels_last",
    "tf32": "whatif.tf32",
    "cudnn_benchmark": "whatif.cudnn_benchmark",
    "dataset_on_gpu": "whatif.dataset_on_gpu",
    "compile": "whatif.compile",
}

TITLE_OF = {
    "load.input_bound": "The input pipeline holds the step back",
    "code.pageable_copy": "Copies to the GPU come from pageable memory",
    "load.small_batch": "The batch is too small to keep the GPU busy",
    "load.amp_unused": "The model computes in float32, without mixed precision",
    "load.channels_last": "Convolutions run in the NCHW memory format",
    "cfg.tf32_disabled": "TF32 is off for float32 matmuls",
    "cfg.cudnn_benchmark_off": "cudnn.benchmark is off",
    "load.launch_bound": "Eager mode launches many small kernels",
    "load.memory_headroom": "The dataset fits on the GPU but is loaded from the host every step",
}

BOTTLENECK_OF = {
    "load.input_bound": "input_pipeline",
    "load.memory_headroom": "input_pipeline",
    "code.pageable_copy": "memory_transfer",
    "load.small_batch": "launch_overhead",
    "load.launch_bound": "launch_overhead",
    "load.amp_unused": "precision",
    "cfg.tf32_disabled": "precision",
    "load.channels_last": "compute",
    "cfg.cudnn_benchmark_off": "compute",
}


def severity(speedup: float) -> Severity:
    if speedup >= 2.0:
        return "critical"
    return "warn" if speedup >= 1.15 else "info"


def loader_changes(ctx: Context, winners: Iterable[Outcome]) -> dict[str, Any]:
    """The DataLoader arguments the winners change (workers, pinning, prefetch, batch size)."""
    out: dict[str, Any] = {}
    for o in winners:
        assert o.winner is not None
        if o.winner.source == "loader":
            out.update(o.winner.loader)
        if o.winner.batch_factor > 1 and ctx.batch_size:
            out["batch_size"] = ctx.batch_size * o.winner.batch_factor
    return out


def snippet_for(ctx: Context, o: Outcome, winners: list[Outcome]) -> tuple[str, str]:
    """(snippet id, filled code) for one winning experiment."""
    loader = ctx.work.loader if ctx.dataloader else None
    speed = f"{o.speedup:.2f}x"
    if o.key == "autocast":
        sid = (
            "whatif.autocast_bf16"
            if o.params.get("dtype") == "bfloat16"
            else "whatif.autocast_fp16"
        )
        return sid, render(sid, speedup=speed, device_type=ctx.device.type)
    sid = SNIPPET_OF[o.key]
    params: dict[str, Any] = {"speedup": speed, **o.params}
    if "$loader_args" in CATALOGUE[sid].template:
        # A loader fix carries every loader change that won, so the call is the one to use.
        changes = loader_changes(ctx, [w for w in winners if w.finding_id == o.finding_id])
        if o.key == "batch_size":
            changes = {"batch_size": o.params["batch_size"]}
        params["loader_args"] = (
            loader_args(loader, changes)
            if loader is not None
            else (f"dataset, batch_size={changes.get('batch_size', ctx.batch_size or 1)}")
        )
        params.setdefault("what", o.what_if.change)
        if o.key == "num_workers":
            params["what"] = f"num_workers sweep {o.params.get('sweep', '')}".strip()
    if o.key == "dataset_on_gpu":
        params.setdefault("batch_size", ctx.batch_size or 1)
    return sid, render(sid, loader=loader, **params)


def finding_for(
    ctx: Context, group: list[Outcome], winners: list[Outcome], together: Sequence[Outcome] = ()
) -> Finding:
    """One finding per catalogue id: the best of its experiments, the others as evidence.

    ``together``: measurements of several winners in one arm (the DataLoader winners
    together), evidence of the finding that shares their id.
    """
    best = max(group, key=lambda o: o.speedup)
    w: WhatIf = best.what_if
    fid = best.finding_id
    assert fid is not None
    evidence = [
        Evidence("step time, unchanged", w.before_ms, "ms"),
        Evidence(f"step time, {best.winner.label if best.winner else best.key}", w.after_ms, "ms"),
        Evidence("speedup (medians of interleaved repetitions)", w.speedup, "x"),
    ]
    if w.noise_pct is not None:
        evidence.append(Evidence("noise band of the unchanged runs", w.noise_pct, "%"))
    for o in [*group, *together]:
        if o is not best:
            evidence.append(Evidence(o.what_if.change, o.what_if.speedup, "x"))
    for k, v in (w.params or {}).items():
        if k not in ("won", "repeats") and isinstance(v, (int, float, str)):
            evidence.append(Evidence(k.replace("_", " "), v))
    sid, code = snippet_for(ctx, best, winners)
    s = best.speedup
    noise = f", noise ±{w.noise_pct:.1f}%" if w.noise_pct is not None else ""
    return Finding(
        id=fid,
        severity=severity(s),
        title=f"{TITLE_OF[fid]}: {best.what_if.change} ran {s:.2f}x faster (measured)",
        evidence=evidence,
        impact=Impact(
            basis="measured",
            speedup=round(s, 3),
            recoverable_pct=round(100 * (1 - 1 / s), 1) if s > 1 else 0.0,
            text=(
                f"Measured on a copy of your model: {w.before_ms:.2f} -> {w.after_ms:.2f} ms per "
                f"step, {s:.2f}x{noise}."
            ),
        ),
        fix=Fix(text=CATALOGUE[sid].text, snippet_id=sid, code=code, language="python"),
        detail=" ".join(n for o in group for n in o.notes) or None,
    )


def findings_of(ctx: Context, outcomes: list[Outcome]) -> list[Finding]:
    """One finding per catalogue id of the winners; a measurement of winners together (key in
    ``TOGETHER_KEYS``) is evidence for its id's finding, not a finding or a winner of its own."""
    winners = [
        o for o in outcomes if o.winner is not None and o.finding_id and o.key not in TOGETHER_KEYS
    ]
    together = [o for o in outcomes if o.key in TOGETHER_KEYS and o.what_if.speedup is not None]
    groups: dict[str, list[Outcome]] = {}
    for o in winners:
        assert o.finding_id is not None
        groups.setdefault(o.finding_id, []).append(o)
    return [
        finding_for(ctx, g, winners, [t for t in together if t.finding_id == fid])
        for fid, g in groups.items()
    ]


def combination(winners: list[Outcome]) -> Variant | None:
    """The variant with every winner's change (the GPU-resident dataset replaces loader changes).

    A winner measured on top of another (pin_memory on the num_workers winner) carries that
    one's setting too; both agree on it. Measurements of winners together are left out: their
    parts are here already.
    """
    winners = [o for o in winners if o.key not in TOGETHER_KEYS]
    if not winners:
        return None
    v = Variant("all winners")
    for o in winners:
        assert o.winner is not None
        v = v.combine(o.winner, "all winners")
    if v.source == "device":
        v = v.with_(loader={}, non_blocking=False)
    return v


def combined_code(ctx: Context, v: Variant, speedup: str) -> str:
    loader = ctx.work.loader if ctx.dataloader else None
    changes = dict(v.loader)
    if v.batch_factor > 1 and ctx.batch_size:
        changes["batch_size"] = ctx.batch_size * v.batch_factor
    return combined(
        loader,
        loader_changes=changes,
        non_blocking=v.non_blocking,
        autocast=v.autocast,
        channels_last=v.channels_last,
        tf32=v.tf32,
        cudnn_benchmark=v.cudnn_benchmark,
        compile=v.compile,
        dataset_on_gpu=v.source == "device",
        lr_factor=v.batch_factor,
        device_type=ctx.device.type,
        speedup=speedup,
    )


def verdict(findings: list[Finding], tried: int, noise: float | None) -> Verdict:
    if not findings:
        band = f" (noise ±{noise:.1f}%)" if noise is not None else ""
        return Verdict(
            bottleneck="none",
            summary=(
                f"None of the {tried} changes measured beat the noise{band}: nothing gpusight "
                "tried makes this step faster."
                if tried
                else "No experiment could run: see the skipped what-ifs for why."
            ),
        )
    top = max(findings, key=lambda f: f.impact.speedup or 0.0)
    return Verdict(
        bottleneck=BOTTLENECK_OF.get(top.id, "none"),
        summary=f"{top.title}.",
    )
