"""A ``--what-if`` outcome -> the report: one what-if row per change, measured impacts on the
findings they answer, the verdict's summary and a note that accounts for the budget.

A row compares items per second. ``before_ms``/``after_ms`` are the time per *baseline batch*
of items (the arm's step scaled to the baseline's items), so that their ratio is the gain in
items per second whatever the batch. A row run on top of the winning batch (``params.stacked_on``)
compares with that batch's run: its gain is over it; the winners' combined row is the one over
the control.
"""

from __future__ import annotations

from typing import Any

from ..finding_catalogue import title
from ..knobs import by_name, owners
from ..knobs.gain_rule import loses, threshold, wins
from ..one_gain import REPEAT_OF, one_gain_per_change, repeat_of
from ..report import Evidence, Finding, Fix, Impact, Report, WhatIf
from ..rules.severity import settle
from .disturbed import disturbed
from .measured_verdict import settle_verdict
from .outcome import Outcome, RunResult
from .plan import Arm, together_label


def _fix_for(arm: Arm, items: int | None, facts: dict[str, Any]) -> Fix:
    knob = by_name(arm.group)
    return knob.fix(arm, items, facts) if knob is not None else Fix(text=arm.label)


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


def _row(
    arm: Arm,
    res: RunResult | None,
    before: float | None,
    base_items: int | None,
    noise: float,
    ref: RunResult | None = None,
) -> WhatIf:
    params: dict[str, Any] = {"group": arm.group}
    if arm.stacked_on:
        params["stacked_on"] = arm.stacked_on
    params.update({f"set_{k}": v for k, v in arm.changes.items() if isinstance(v, (int, str))})
    for owner in owners(arm.changes):
        params.update(owner.row_params(arm.changes))
    if res is None:
        return WhatIf(arm.label, before, None, None, arm.finding_id, params, None,
                      arm.skipped or "not run")  # fmt: skip
    params["wall_s"] = round(res.wall_s, 1)
    if not res.ok:
        return WhatIf(arm.label, before, None, None, arm.finding_id, params, None,
                      res.error or "failed")  # fmt: skip
    after = res.ms_per(base_items)
    params["steps"] = res.steps
    if res.items:
        params["items_per_step"] = res.items
        params["items_per_s"] = round(res.items / res.step_ms * 1000.0, 1) if res.step_ms else 0
    speedup = round(before / after, 3) if before and after else None
    unsettled = res.shapes_unsettled
    if speedup is not None and speedup < 1.0 and unsettled is not None:
        # A cost paid once per shape only slows a short window: a loss here is not the
        # change's, a gain would stand.
        return WhatIf(arm.label, before, None, None, arm.finding_id, params, None,
                      unsettled_text(unsettled, res.steps))  # fmt: skip
    knob = by_name(arm.group)
    if knob is not None and ref is not None:
        params.update(knob.cost(res.facts, ref.facts, after, before))
    return WhatIf(arm.label, before, round(after, 4) if after else None, speedup,
                  arm.finding_id, params, round(noise, 2), scope=arm.scope)  # fmt: skip


def unsettled_text(new: int, steps: int) -> str:
    return (
        f"not measured steady: {new} of its {steps} measured steps took a batch of a shape new "
        "to the run, too few one seen before to tell a cost paid once per shape (in bf16, "
        "cuDNN's attention plan for each sequence length) from the step's own: batches padded "
        "to a few shapes (pad_to_multiple_of=64), or more --steps, measure it"
    )


def apply(report: Report, out: Outcome) -> Report:
    """Fill ``report`` (the baseline's) with the outcome's rows, impacts and notes."""
    facts = out.baseline.facts or {}
    ref = out.reference
    base_items = ref.items
    before = out.reference_ms(base_items)
    rows: list[WhatIf] = []
    best: dict[str, tuple[float, Arm, RunResult, WhatIf]] = {}
    for i, (arm, res) in enumerate(out.arms):
        under = out.stacked_on.get(i)
        ms = under.ms_per(base_items) if under is not None else before
        row = _row(arm, res, ms, base_items, out.row_noise(res, under), under or ref)
        rows.append(row)
        if res is not None and row.speedup and arm.finding_id:
            cur = best.get(arm.finding_id)
            if cur is None or row.speedup > cur[0]:
                best[arm.finding_id] = (row.speedup, arm, res, row)
    if out.together is not None:
        winners, res = out.together
        part = any(a.scope == "compute_only" for a in winners)
        tog = Arm("together", together_label(winners, out.left_out),
                  {}, None, skipped="over the budget",
                  scope="compute_only" if part else "end_to_end")  # fmt: skip
        row = _row(tog, res, before, base_items, out.row_noise(res))
        row.params = {**(row.params or {}), "winners": ",".join(a.group for a in winners)}
        if out.left_out:
            row.params["left_out"] = ",".join(a.group for a in out.left_out)
        if out.together_from and res is not None:
            row.params["measured_in"] = out.together_from
        if len(winners) == 1:  # one change measured again: its own row has its gain
            row.params[REPEAT_OF] = winners[0].label
        rows.append(row)
    report.what_if = rows
    noisy = disturbed(out)
    if noisy is not None:
        for row in rows:  # no gain stands against controls another load slowed
            row.speedup, row.after_ms, row.skipped = None, None, row.skipped or noisy
        report.notes.append(f"what-if: {noisy}")
        return report
    for fid, (gain, arm, res, row) in best.items():
        f = report.finding(fid)
        measured = fix_text = None
        ips0 = base_items / row.before_ms * 1000.0 if base_items and row.before_ms else None
        ips1 = res.items_per_s(base_items)
        rate = (
            f" ({ips0:.0f} -> {ips1:.0f} items/s)" if ips0 is not None and ips1 is not None else ""
        )
        noise = row.noise_pct or 0.0
        if gain >= threshold(noise):
            measured = Impact(
                basis="measured",
                text=_measured_text(arm, gain, rate, noise)
                + _once_cost(row.params or {})
                + _outputs_back(res),
                speedup=round(gain, 2),
                recoverable_pct=round(100.0 * (1.0 - 1.0 / gain), 1),
            )
            fix_text = _fix_for(arm, base_items, facts)
        elif f is not None:
            # A measured change that did not beat the noise: the estimate does not stand.
            said = (
                f", slower beyond the noise (±{noise:.1f}%): this change does not help here."
                if loses(gain, noise)
                else f", within the noise (±{noise:.1f}%): not significant."
            )
            f.impact = Impact(
                basis="measured",
                text=f"Measured end to end: {arm.label} gave {gain:.2f}x{rate}"
                + (" over that batch alone" if arm.stacked_on else "")
                + said,
                speedup=round(gain, 2),
                recoverable_pct=0.0,
            )
            continue
        else:
            continue
        if f is None:
            f = Finding(
                id=fid,
                severity="info",  # the severity rule settles it from the measured gain
                title=title(fid, bool(facts.get("cuda"))) or arm.label,
                evidence=[],
                fix=fix_text,
            )
            report.findings.append(f)
        else:
            f.fix = fix_text
        f.impact = measured
        f.evidence = [
            *f.evidence,
            Evidence("measured change", arm.label),
            Evidence("measured speedup (items/s)", round(gain, 2), "x"),
        ]
    one_gain_per_change(report.findings, rows)
    settle(report.findings)
    settle_verdict(report, rows)
    _summarise(report, out, rows)
    return report


def _once_cost(params: dict[str, Any]) -> str:
    """What the change costs once (``Knob.cost``), said beside its steady gain."""
    secs = params.get("compile_s")
    if secs is None:
        return ""
    steps = params.get("break_even_steps")
    pays = f"; it pays for itself after about {int(steps):,} steps" if steps else ""
    return (
        f" Compiling took {float(secs):.1f} s once, at the start{pays} (torch caches what it "
        "compiled on disk: later runs on this machine start sooner)."
    )


def _measured_text(arm: Arm, gain: float, rate: str, noise: float) -> str:
    if arm.stacked_on:
        return (
            f"Measured end to end on top of {arm.stacked_on}: the script re-run with both was "
            f"{gain:.2f}x faster in items per second than with {arm.stacked_on} alone{rate}, "
            f"noise ±{noise:.1f}%; the winners together is the gain over your script as it is."
        )
    if arm.scope == "compute_only":
        return (
            f"Measured on the model's compute only (the same inputs repeated, not your loop at "
            f"a larger batch): {arm.label} was {gain:.2f}x faster in items per second{rate}, "
            f"noise ±{noise:.1f}%; the script's own batch setting is the end-to-end test."
        )
    return (
        f"Measured end to end: the script re-run with {arm.label} was {gain:.2f}x faster in "
        f"items per second{rate}, noise ±{noise:.1f}%."
    )


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


def _marked(runs: list[RunResult], attr: str, head: str, tail: str) -> str | None:
    """``head``, the runs with steps marked ``attr`` and how many, ``tail``; None if none."""
    marked = [(r.label, len(getattr(r, attr))) for r in runs if getattr(r, attr)]
    if not marked:
        return None
    return head + ", ".join(f"{label} ({n})" for label, n in marked) + tail


def _recompiles(out: Outcome) -> str | None:
    """Say which runs had a measured step that compiled anew or took a rare new batch shape
    (``RunResult.steady_times_ms``)."""
    together = [out.together[1]] if out.together is not None and out.together[1] else []
    runs = [r for r in (out.control, *(res for _, res in out.arms), *together) if r is not None]
    found = (
        _marked(runs, "recompiled", "torch.compile compiled anew in a measured step of ",
                " (a new input shape, such as an epoch's short last batch)"),
        _marked(runs, "new_shapes", "a measured step of ",
                " took a batch of a shape new to the run (an epoch's short last batch, a new "
                "sequence length: cuDNN autotunes or plans for it, the allocator grows, once)"),
    )  # fmt: skip
    said = [s for s in found if s]
    if not said:
        return None
    return (
        "; ".join(said) + ": each such step counts at the run's other steps' median, since a "
        "shape is paid for once, not every step"
    )


def _summarise(report: Report, out: Outcome, rows: list[WhatIf]) -> None:
    ran = [r for r in rows if r.skipped is None and repeat_of(r) is None]
    skipped = [r for r in rows if r.skipped is not None]
    note = (
        f"what-if: {out.runs} runs of the script in {out.spent_s:.0f} s of the "
        f"{out.budget_s:.0f} s budget; each compares items per second over the measured steps "
        f"with the control run's (noise ±{out.noise_pct:.1f}%, {out.noise_note}; each row's "
        "band is the wider of that and its own run's)"
    )
    if out.plan:
        note += "; planned in this order (arms): " + ", ".join(out.plan)
    if out.not_planned:
        note += "; not tried: " + "; ".join(f"{k}: {v}" for k, v in out.not_planned.items())
    for said in (_epoch_spread(out), _recompiles(out)):
        if said:
            note += "; " + said
    if skipped:
        note += "; not run: " + "; ".join(f"{r.change}: {r.skipped}" for r in skipped[:6])
    if out.interrupted:
        note += "; interrupted (Ctrl-C): the rows cover what ran"
    report.notes.append(note)
    # A row on top of the winning batch gains over that batch, not over the script as it is.
    won = [
        r for r in ran if wins(r.speedup, r.noise_pct) and not (r.params or {}).get("stacked_on")
    ]
    whole = [r for r in won if r.scope != "compute_only"]
    if won:
        top = max(whole or won, key=lambda r: r.speedup or 0.0)
        what = "makes the script" if whole else "makes the model's compute alone"
        report.verdict.summary = (
            f"{report.verdict.summary} Measured: {top.change} {what} "
            f"{top.speedup:.2f}x faster (items per second)."
        ).strip()
    elif ran:
        report.verdict.summary = (
            f"{report.verdict.summary} Measured: none of the {len(ran)} changes tried beat the "
            "noise."
        ).strip()
