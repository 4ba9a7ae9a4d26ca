"""The verdict a ``--what-if`` measured: where the changes the unchanged run's bottleneck calls
for, each run alone at the script's settings, all failed to win and another change won for the
whole step, that change's bottleneck is the verdict.

On the H100 hf_trainer_defaults' unchanged run (BERT-base under the Trainer, batch 8) read
"precision" (float32 matmuls, the GPU 57 % busy); bf16 alone measured 0.76x and TF32 0.95x,
batch 128 3.17x: kernel launches set the pace at batch 8, and bf16 paid only on top of the
larger batch (3.10x there). A change run on top of another's winner is not alone.
"""

from __future__ import annotations

from .. import finding_catalogue as catalogue
from ..knobs.gain_rule import wins
from ..report import Report, WhatIf


def _alone(rows: list[WhatIf]) -> list[WhatIf]:
    return [
        r
        for r in rows
        if r.skipped is None
        and r.speedup
        and r.finding_id
        and not (r.params or {}).get("stacked_on")
    ]


def settle_verdict(report: Report, rows: list[WhatIf]) -> None:
    """Name the measured bottleneck in ``report.verdict`` where the rows refute its own (a
    row wins at its own noise band)."""
    named = report.verdict.bottleneck
    alone = _alone(rows)
    own = [r for r in alone if catalogue.bottleneck(r.finding_id or "") == named]
    if not own or any(wins(r.speedup, r.noise_pct) for r in own):
        return
    won = [r for r in alone if wins(r.speedup, r.noise_pct) and r.scope != "compute_only"]
    top = max(won, key=lambda r: r.speedup or 0.0, default=None)
    other = catalogue.bottleneck(top.finding_id or "") if top is not None else None
    if top is None or other is None or other == named:
        return
    lost = " and ".join(f"{r.change} {r.speedup:.2f}x" for r in own[:3])
    title = catalogue.title(top.finding_id or "") or other
    report.verdict.bottleneck = other
    report.verdict.summary = (
        f"{title}: measured, {top.change} {top.speedup:.2f}x, while alone {lost} ({named}, "
        "which the unchanged run pointed to, is not what holds this step back). The unchanged "
        f"run: {report.verdict.summary}"
    )
