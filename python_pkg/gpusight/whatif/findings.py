"""Winning experiments -> findings (catalogue ids, measured impact, filled fix) and the verdict."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from .. import finding_catalogue as catalogue
from ..fixes import SNIPPETS
from ..fixes.measured_code import combined_loop, loader_args, render
from ..knobs import by_row, dataloader, owners
from ..knobs.base import Arm as Plan
from ..knobs.gain_rule import MIN_GAIN
from ..knobs.loader import LOADER_KEYS
from ..report import Evidence, Finding, Fix, Impact, Severity, Verdict, WhatIf
from .arms import batch_factor, merged, planned, source_of, without
from .context import Context
from .procedures import TOGETHER_KEYS, Outcome

SCOPE_TEXT = {
    "end_to_end": "your whole step, with your loader",
    "compute_only": "compute only, on batches cached from your loader",
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
        on_loader = source_of(o.winner) == "loader"
        out.update(dataloader.arguments(o.winner.changes, ctx.user_batch, settings=on_loader))
    return out


def snippet_for(ctx: Context, o: Outcome, winners: list[Outcome]) -> tuple[str, str]:
    """(snippet id, filled code) for one winning experiment: its knob's snippet
    (``Knob.local_snippet``), a loader call with the loader winners of its finding."""
    loader = ctx.work.loader if ctx.dataloader else None
    knob = by_row(o.key)
    sid, own = knob.local_snippet(o.key, o.params) if knob else (f"whatif.{o.key}", {})
    params: dict[str, Any] = {"speedup": f"{o.speedup:.2f}x", "device_type": ctx.device.type}
    params |= {**o.params, **own}
    changes = params.pop("loader_changes", None)
    template = SNIPPETS[sid].template
    if "{loader_args}" in template:
        # A loader fix carries every loader change that won, so the call is the one to use.
        if changes is None:
            changes = loader_changes(ctx, [w for w in winners if w.finding_id == o.finding_id])
        if loader is None:  # the call's batch, the user's unless the change sets one
            changes = {**dataloader.batch_change(ctx.user_batch or 1), **changes}
        params["loader_args"] = loader_args(loader, changes)
        params.setdefault("what", o.what_if.change)
    if "{batch_size}" in template:
        params = {**dataloader.batch_change(ctx.user_batch or 1), **params}
    return sid, render(sid, loader=loader, **params)


def _ranked(ctx: Context, o: Outcome) -> tuple[bool, float]:
    """Within one finding: a whole-step measurement before a compute-only one while loading
    sets the pace, then the larger gain."""
    return (not ctx.loader_bound or o.what_if.scope != "compute_only", o.speedup)


def finding_for(
    ctx: Context, group: list[Outcome], winners: list[Outcome], together: Sequence[Outcome] = ()
) -> Finding | None:
    """One finding per catalogue id: the best of its experiments, the others as evidence.

    ``together``: measurements of several winners in one arm (the DataLoader winners
    together), evidence of the finding that shares their id.

    A gain measured on cached batches (compute alone) is said to be that, never the user's
    speedup. While the loader sets the pace it becomes an estimate: the most it can give the
    whole step with loading as it is; None (no finding) when that bound is within the noise.
    """
    best = max(group, key=lambda o: _ranked(ctx, o))
    w: WhatIf = best.what_if
    fid = best.finding_id
    assert fid is not None
    compute_only = w.scope == "compute_only"
    s = best.speedup
    bound = ctx.end_to_end_bound(s) if compute_only and ctx.loader_bound else None
    if bound is not None and bound < MIN_GAIN:
        return None
    evidence = [
        Evidence("step time, unchanged", w.before_ms, "ms"),
        Evidence(f"step time, {best.winner.label if best.winner else best.key}", w.after_ms, "ms"),
        Evidence("speedup (medians of interleaved repetitions)", w.speedup, "x"),
    ]
    if w.scope is not None:
        evidence.append(Evidence("what the timing covered", SCOPE_TEXT[w.scope]))
    if w.noise_pct is not None:
        evidence.append(Evidence("noise band of the unchanged runs", w.noise_pct, "%"))
    for o in [*group, *together]:
        if o is not best:
            evidence.append(Evidence(o.what_if.change, o.what_if.speedup, "x"))
    for k, v in (w.params or {}).items():
        if k not in ("won", "repeats") and isinstance(v, (int, float, str)):
            evidence.append(Evidence(k.replace("_", " "), v))
    sid, code = snippet_for(ctx, best, winners)
    noise = f", noise ±{w.noise_pct:.1f}%" if w.noise_pct is not None else ""
    title = f"{catalogue.title(fid, ctx.cuda) or fid}: {best.what_if.change}"
    steps = f"{w.before_ms:.2f} ms unchanged -> {w.after_ms:.2f} ms per step, {s:.2f}x{noise}"
    if bound is not None:
        lo, ca = statistics.median(ctx.loader_base_ms), statistics.median(ctx.cached_base_ms)
        impact = Impact(
            basis="estimated",
            speedup=round(bound, 3),
            recoverable_pct=round(100 * (1 - 1 / bound), 1),
            text=(
                f"Measured compute only, on batches cached from your loader: {steps}. Not your "
                f"step's speedup: with your loader a step takes {lo:.2f} ms, {ca:.2f} ms of it "
                f"compute, so this change can give the whole step at most {bound:.2f}x "
                "(estimated)."
            ),
        )
        title += (
            f" ran {s:.2f}x faster on cached batches (compute only); with your loader at most "
            f"{bound:.2f}x (estimated)"
        )
        severity_of = bound
    else:
        where = (
            "compute only, on batches cached from your loader (loading, not timed here, adds "
            "little to your step)"
            if compute_only
            else "end to end, your whole step"
            + (" with your loader" if w.scope == "end_to_end" and ctx.dataloader else "")
        )
        impact = Impact(
            basis="measured",
            speedup=round(s, 3),
            recoverable_pct=round(100 * (1 - 1 / s), 1) if s > 1 else 0.0,
            text=f"Measured on a copy of your model, {where}: {steps}.",
        )
        title += (
            f" ran {s:.2f}x faster on cached batches (measured, compute only)"
            if compute_only
            else f" ran {s:.2f}x faster (measured)"
        )
        severity_of = s
    return Finding(
        id=fid,
        severity=severity(severity_of),
        title=title,
        evidence=evidence,
        impact=impact,
        fix=Fix(text=SNIPPETS[sid].text, snippet_id=sid, code=code, language="python"),
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
    found = [
        finding_for(ctx, g, winners, [t for t in together if t.finding_id == fid])
        for fid, g in groups.items()
    ]
    return [f for f in found if f is not None]


def combination(winners: list[Outcome]) -> Plan | None:
    """The variant with every winner's change (the GPU-resident dataset replaces loader changes).

    A winner measured on top of another (pin_memory on the num_workers winner) carries that
    one's setting too; both agree on it. Measurements of winners together are left out: their
    parts are here already.
    """
    winners = [o for o in winners if o.key not in TOGETHER_KEYS]
    if not winners:
        return None
    v = planned("all winners")
    for o in winners:
        assert o.winner is not None
        v = merged(v, o.winner, "all winners")
    if source_of(v) == "device":
        v = without(v, *LOADER_KEYS, "non_blocking")
    return v


def combined_code(ctx: Context, v: Plan, speedup: str) -> str:
    loader = ctx.work.loader if ctx.dataloader else None
    changes = dataloader.arguments(v.changes, ctx.user_batch)
    return combined_loop(
        loader,
        v.changes,
        loader_changes=changes,
        setup=[line for k in owners(v.changes) for line in k.setup_code],
        lr_factor=batch_factor(v),
        device_type=ctx.device.type,
        speedup=speedup,
    )


def verdict(
    findings: list[Finding],
    tried: int,
    noise: float | None,
    loader_ms: tuple[float, float] | None = None,
) -> Verdict:
    """The bottleneck of the top finding, measured ones first (an estimate never leads).

    ``loader_ms``: (step with the user's loader, the same step on cached batches) when the
    loader sets the pace; when every finding is an estimate the verdict then names the input
    pipeline (with none at all, nothing was found to beat the noise: it says so).
    """
    measured = [f for f in findings if f.impact.basis == "measured"]
    if findings and not measured and loader_ms is not None:
        lo, ca = loader_ms
        return Verdict(
            bottleneck="input_pipeline",
            summary=(
                f"Loading sets the pace: a step with your loader takes {lo:.1f} ms, the same "
                f"step on cached batches {ca:.1f} ms; no change gpusight measured with your "
                "loader beat the noise (see the what-ifs)."
            ),
        )
    if not findings:
        band = f" (noise ±{noise:.1f}%)" if noise is not None else ""
        loading = (
            f" Loading takes {loader_ms[0] - loader_ms[1]:.1f} of the {loader_ms[0]:.1f} ms of a "
            "step with your loader."
            if loader_ms is not None
            else ""
        )
        return Verdict(
            bottleneck="none",
            summary=(
                f"None of the {tried} changes measured beat the noise{band}: nothing gpusight "
                "tried makes this step faster."
                if tried
                else "No experiment could run: see the skipped what-ifs for why."
            )
            + loading,
        )
    top = max(findings, key=lambda f: (f.impact.basis == "measured", f.impact.speedup or 0.0))
    return Verdict(
        bottleneck=catalogue.bottleneck(top.id) or "none",
        summary=f"{top.title}.",
    )
