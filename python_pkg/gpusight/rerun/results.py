"""A ``--what-if`` outcome -> the report: one what-if row per change, measured impacts on the
findings they answer, the verdict's summary and a note that accounts for the budget.

A row compares items per second. ``before_ms``/``after_ms`` are the time per *baseline batch*
of items (the arm's step scaled to the baseline's items), so that their ratio is the gain in
items per second whatever the batch.
"""

from __future__ import annotations

import statistics
from typing import Any

from ..fixes import fix
from ..fixes import workload as _workload_snippets  # noqa: F401  (registers the snippets)
from ..fixes.cell_patch import CellSource, with_cell_fix, with_statement_cell_fix
from ..fixes.patch import loader_patch
from ..fixes.patch_files import read_text, with_patch
from ..fixes.statement_patches import autocast_patch, autocast_text, tf32_cell_text, tf32_patch
from ..report import Evidence, Finding, Fix, Impact, Report, Severity, WhatIf
from ..rules.workload import CodeSource, channels_last_fix, knob_batch_fix, to_device_fix
from .driver import MIN_GAIN, Outcome, RunResult
from .plan import Arm

# Findings that a measured change answers, when the watch did not raise one itself.
_TITLES = {
    "load.input_bound": "The input pipeline sets the pace",
    "load.small_batch": "A larger batch processes more items per second",
    "infer.unbatched": "Larger batches per forward serve more requests per second",
    "load.launch_bound": "A larger batch amortises the launches",
    "load.amp_unused": "bf16 autocast makes the step faster",
    "cfg.tf32_disabled": "TF32 makes the float32 matmuls faster",
    "load.channels_last": "channels_last makes the convolutions faster",
    "cfg.cudnn_benchmark_off": "cudnn.benchmark picks faster convolution algorithms",
    "code.cpu_model": "The model runs on the CPU although a GPU is available",
}


_LOADER_ARGS = ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor", "batch_size")


def _site_text(site: dict[str, Any]) -> str | None:
    try:
        return read_text(str(site["file"]))
    except (OSError, UnicodeDecodeError, KeyError):
        return None


def _forward_source(facts: dict[str, Any]) -> CodeSource | None:
    """The line that calls the model, as the rules' fixes take it: its notebook cell, else its
    file's text (a cell's own file is not on disk: its text is then empty)."""
    site = facts.get("forward_site") or {}
    cell = facts.get("forward_cell")
    text = _site_text(site) if site.get("file") else None
    if text is None and not cell:
        return None
    return CodeSource(str(site.get("shown") or ""), text or "", int(site.get("line") or 0),
                      CellSource(**cell) if cell else None)  # fmt: skip


def _patched(f: Fix, arm: Arm, facts: dict[str, Any]) -> Fix:
    """The measured change, as a patch of the user's own lines where they are known: the
    DataLoader call's arguments, the model's call under autocast, TF32 after ``import torch``,
    the model and its input in channels_last, the model and its batch on the GPU."""
    if arm.group == "channels_last":
        inputs = ((facts.get("model") or {}).get("input_channels_last")) is False
        return channels_last_fix(f, _forward_source(facts), inputs)
    if arm.group == "to_device":
        return to_device_fix(f, _forward_source(facts), str(arm.changes.get("to_device") or "cuda"))
    cell = facts.get("forward_cell")
    if arm.group in ("autocast", "tf32") and cell:
        src = CellSource(**cell)
        new = (
            autocast_text(
                src.compiled,
                src.line,
                dtype=str(arm.changes["autocast"]),
                torch_alias=src.torch_alias,
            )
            if arm.group == "autocast"
            else tf32_cell_text(src.compiled, src.torch_alias or "torch")
        )
        if with_statement_cell_fix(f, src, new):
            return f  # a notebook's training cell: its forward call under autocast, or TF32 on
    if arm.group in ("autocast", "tf32"):
        # Autocast wraps the model's call; TF32 goes after the import torch of the file that
        # calls the model, else of the file that builds the loader.
        sites = [facts.get("forward_site")]
        if arm.group == "tf32":
            sites.append(facts.get("loader_site"))
        for site in (s for s in sites if s and s.get("file")):
            text = _site_text(site)
            if text is None:
                continue
            shown = str(site["shown"])
            patch = (
                autocast_patch(text, int(site["line"]), shown, dtype=str(arm.changes["autocast"]))
                if arm.group == "autocast"
                else tf32_patch(text, shown)
            )
            if patch:
                return with_patch(f, patch, {shown: text})
        return f
    site = facts.get("loader_site") or {}
    values = {k: v for k, v in arm.changes.items() if k in _LOADER_ARGS}
    cell = facts.get("loader_cell")
    if values and cell and with_cell_fix(f, CellSource(**cell), values):
        return f  # a notebook's loader: its cell changed, and the statement to run
    if not values or not site.get("file"):
        return f
    text = _site_text(site)
    if text is None:
        return f
    shown = str(site["shown"])
    return with_patch(f, loader_patch(text, int(site["line"]), shown, values), {shown: text})


def _new_batch(arm: Arm, items: int | None) -> int:
    """The batch a ``batch`` arm ran: the loader's ``batch_size``, or ``replicate`` times the
    baseline's items."""
    ch = arm.changes
    return int(ch.get("batch_size") or (items or 1) * int(ch.get("replicate") or 1))


def _fix_for(arm: Arm, items: int | None, facts: dict[str, Any]) -> Fix:
    f = _snippet_for(arm, items, facts)
    if arm.group == "batch" and arm.changes.get("replicate") and not arm.changes.get("batch_size"):
        # No DataLoader made the batch (the what-if replicated the model's input).
        return knob_batch_fix(f, _forward_source(facts), _new_batch(arm, items))
    return _patched(f, arm, facts)


def _snippet_for(arm: Arm, items: int | None, facts: dict[str, Any]) -> Fix:
    ch = arm.changes
    loader = facts.get("loader") or {}
    if arm.group in ("workers", "loader"):
        return fix(
            f"Build the DataLoader with {arm.label.removeprefix('DataLoader ')} (measured).",
            "loader.workers",
            batch_size=int(loader.get("batch_size") or items or 64),
            workers=int(ch.get("num_workers") or loader.get("num_workers") or 4),
        )
    if arm.group == "batch":
        new = _new_batch(arm, items)
        if arm.finding_id == "infer.unbatched":
            return fix(f"Group {new} requests per forward.", "infer.batch_requests", batch=new)
        return fix(
            f"Grow the batch to {new} (and scale the learning rate).",
            "batch.larger",
            batch_size=int(items or 1),
            suggested=new,
        )
    if arm.group == "autocast":
        return fix("Run the forward under bf16 autocast.", "precision.autocast", dtype="bfloat16")
    if arm.group == "tf32":
        return fix("Allow TF32 for float32 matmuls and convolutions.", "torch.enable_tf32")
    if arm.group == "channels_last":
        return fix("Use channels_last for the model and its inputs.", "memory.channels_last")
    if arm.group == "cudnn_benchmark":
        return fix("Let cuDNN pick the fastest algorithms.", "torch.cudnn_benchmark")
    if arm.group == "to_device":
        return fix("Move the model and each batch to the GPU.", "placement.to_device",
                   device="cuda")  # fmt: skip
    return Fix(text=arm.label)


def _outputs_back(res: RunResult) -> str:
    """What a moved model's measurement left out: its outputs went back to the CPU, where the
    script's loss and labels are (a host sync a step), which the real fix moves too."""
    if not ((res.facts or {}).get("injected") or {}).get("outputs_back"):
        return ""
    return (
        " The model's outputs were copied back to the CPU every step, where the script uses "
        "them (its loss and labels there): the fix moves those to the GPU too, which can gain a "
        "little more than this."
    )


def _ms_per_base_items(res: RunResult, base_items: int | None) -> float | None:
    if not res.step_ms:
        return None
    if res.items and base_items:
        return res.step_ms * base_items / res.items
    return res.step_ms


def _row(
    arm: Arm, res: RunResult | None, before: float | None, base_items: int | None, noise: float
) -> WhatIf:
    params: dict[str, Any] = {"group": arm.group}
    params.update({f"set_{k}": v for k, v in arm.changes.items() if isinstance(v, (int, str))})
    if res is None:
        return WhatIf(arm.label, before, None, None, arm.finding_id, params, None,
                      arm.skipped or "not run")  # fmt: skip
    params["wall_s"] = round(res.wall_s, 1)
    if not res.ok:
        return WhatIf(arm.label, before, None, None, arm.finding_id, params, None,
                      res.error or "failed")  # fmt: skip
    after = _ms_per_base_items(res, base_items)
    params["steps"] = res.steps
    if res.items:
        params["items_per_step"] = res.items
        params["items_per_s"] = round(res.items / res.step_ms * 1000.0, 1) if res.step_ms else 0
    speedup = round(before / after, 3) if before and after else None
    return WhatIf(arm.label, before, round(after, 4) if after else None, speedup,
                  arm.finding_id, params, round(noise, 2), scope="end_to_end")  # fmt: skip


def apply(report: Report, out: Outcome) -> Report:
    """Fill ``report`` (the baseline's) with the outcome's rows, impacts and notes."""
    facts = out.baseline.facts or {}
    ref = out.control if out.control is not None and out.control.ok else out.baseline
    base_items = ref.items
    before = ref.step_ms
    if before and out.controls and ref is out.control:
        # Several control runs: their median is the reference (one slow phase of the host
        # does not move it).
        more = [_ms_per_base_items(c, base_items) for c in out.controls]
        before = statistics.median([before, *(m for m in more if m)])
    rows: list[WhatIf] = []
    best: dict[str, tuple[float, Arm, RunResult]] = {}
    for arm, res in out.arms:
        row = _row(arm, res, before, base_items, out.noise_pct)
        rows.append(row)
        if res is not None and row.speedup and arm.finding_id:
            cur = best.get(arm.finding_id)
            if cur is None or row.speedup > cur[0]:
                best[arm.finding_id] = (row.speedup, arm, res)
    if out.together is not None:
        winners, res = out.together
        tog = Arm("together", "all winners together: " + ", ".join(a.label for a in winners),
                  {}, None, skipped="over the budget")  # fmt: skip
        row = _row(tog, res, before, base_items, out.noise_pct)
        row.params = {**(row.params or {}), "winners": ",".join(a.group for a in winners)}
        rows.append(row)
    report.what_if = rows
    threshold = max(MIN_GAIN, 1.0 + out.noise_pct / 100.0)
    for fid, (gain, arm, res) in best.items():
        f = report.finding(fid)
        measured = fix_text = None
        ips0 = base_items / before * 1000.0 if base_items and before else None
        ips1 = res.items_per_s(base_items)
        rate = (
            f" ({ips0:.0f} -> {ips1:.0f} items/s)" if ips0 is not None and ips1 is not None else ""
        )
        if gain >= threshold:
            measured = Impact(
                basis="measured",
                text=f"Measured end to end: the script re-run with {arm.label} was "
                f"{gain:.2f}x faster in items per second{rate}, noise ±{out.noise_pct:.1f}%."
                + _outputs_back(res),
                speedup=round(gain, 2),
                recoverable_pct=round(100.0 * (1.0 - 1.0 / gain), 1),
            )
            fix_text = _fix_for(arm, base_items, facts)
        elif f is not None:
            # A measured change that did not beat the noise: the estimate does not stand.
            f.impact = Impact(
                basis="measured",
                text=f"Measured end to end: {arm.label} gave {gain:.2f}x{rate}, within the "
                f"noise (±{out.noise_pct:.1f}%): not significant.",
                speedup=round(gain, 2),
            )
            f.severity = "info"
            continue
        else:
            continue
        if f is None:
            sev: Severity = "critical" if gain >= 3.0 else "warn" if gain >= 1.3 else "info"
            f = Finding(
                id=fid,
                severity=sev,
                title=_TITLES.get(fid, arm.label),
                evidence=[],
                fix=fix_text,
            )
            report.findings.append(f)
        else:
            f.fix = fix_text
            if gain >= 1.3 and f.severity == "info":
                f.severity = "warn"
        f.impact = measured
        f.evidence = [
            *f.evidence,
            Evidence("measured change", arm.label),
            Evidence("measured speedup (items/s)", round(gain, 2), "x"),
        ]
    _summarise(report, out, rows, threshold)
    return report


def _epoch_spread(out: Outcome) -> str | None:
    """Say so where a run's loader start was spread over its epoch (``RunResult.step_ms``)."""
    runs = [out.control or out.baseline, *(res for _, res in out.arms if res is not None)]
    spread = [r for r in runs if r.epoch_share_ms > 0]
    if not spread:
        return None
    ld = (spread[0].facts or {}).get("loader") or {}
    return (
        "each run's DataLoader start (its workers and first batch: "
        f"{float(ld.get('epoch_start_ms') or 0):.0f} ms in the first such run) is counted once "
        f"per epoch of {ld.get('batches_per_epoch')} batches, as an epoch pays it (not with "
        "persistent workers, which start once)"
    )


def _summarise(report: Report, out: Outcome, rows: list[WhatIf], threshold: float) -> None:
    ran = [r for r in rows if r.skipped is None]
    skipped = [r for r in rows if r.skipped is not None]
    note = (
        f"what-if: {out.runs} runs of the script in {out.spent_s:.0f} s of the "
        f"{out.budget_s:.0f} s budget; each compares items per second over the measured steps "
        f"with the control run's (noise ±{out.noise_pct:.1f}%, {out.noise_note})"
    )
    spread = _epoch_spread(out)
    if spread:
        note += "; " + spread
    if skipped:
        note += "; not run: " + "; ".join(f"{r.change}: {r.skipped}" for r in skipped[:6])
    if out.interrupted:
        note += "; interrupted (Ctrl-C): the rows cover what ran"
    report.notes.append(note)
    wins = [r for r in ran if r.speedup and r.speedup >= threshold]
    if wins:
        top = max(wins, key=lambda r: r.speedup or 0.0)
        report.verdict.summary = (
            f"{report.verdict.summary} Measured: {top.change} makes the script "
            f"{top.speedup:.2f}x faster (items per second)."
        ).strip()
    elif ran:
        report.verdict.summary = (
            f"{report.verdict.summary} Measured: none of the {len(ran)} changes tried beat the "
            "noise."
        ).strip()
