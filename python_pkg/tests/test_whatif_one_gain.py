"""One gain per change in a report (issue #36, point 3): a change measured alone and again as the
only member of "all winners together" shows one gain, the alone one, and says why the other
differs; a skipped row never carries or lends a number. Real torch on the CPU for diagnose."""

from __future__ import annotations

import multiprocessing
import re

import pytest
import torch
from gpusight.one_gain import REPEAT_OF, one_gain_per_change, shows_gain
from gpusight.report import Finding, Fix, Impact, WhatIf
from gpusight.whatif import diagnose
from thread_support import one_thread  # noqa: F401 (autouse: one torch thread)
from torch import nn
from torch.utils.data import DataLoader
from whatif_support import SleepyDataset

ALONE = "DataLoader(num_workers=2) instead of 0"
TOGETHER = "all winners together: num_workers=2"


def _finding(speedup: float) -> Finding:
    return Finding(
        id="load.input_bound",
        severity="warn",
        title=f"The input pipeline holds the step back: {ALONE} ran {speedup:.2f}x faster",
        impact=Impact(
            basis="measured",
            speedup=speedup,
            text=f"Measured end to end: 170.00 -> 89.47 ms per step, {speedup:.2f}x.",
        ),
        fix=Fix(text="Load batches in worker processes.", code="loader = DataLoader(...)"),
    )


def _alone() -> WhatIf:
    return WhatIf(ALONE, 170.0, 89.47, 1.9, "load.input_bound", {"num_workers": 2}, 1.7,
                  scope="end_to_end")  # fmt: skip


def _together(**kw: object) -> WhatIf:
    row = WhatIf(TOGETHER, 190.0, 74.8, 2.54, None, {"winners": "num_workers", REPEAT_OF: ALONE},
                 9.6, scope="end_to_end",
                 fix=Fix(text="Every measured winner in one training loop.",
                         code="# All measured winners together: 2.54x end to end.\n"))  # fmt: skip
    for k, v in kw.items():
        setattr(row, k, v)
    return row


def _card_text(f: Finding) -> str:
    return " ".join([f.title, f.impact.text, f.fix.text, f.fix.code or "", f.detail or ""])


def test_a_skipped_combination_with_a_number_lends_it_to_no_card() -> None:
    finding, alone = _finding(1.9), _alone()
    together = _together(skipped="only one DataLoader setting won: its own row measures it")
    one_gain_per_change([finding], [alone, together])
    assert together.speedup is None and together.after_ms is None and together.fix is None
    assert finding.impact.speedup == 1.9
    assert "2.54" not in _card_text(finding)
    assert [r.change for r in (alone, together) if shows_gain(r)] == [ALONE]


def test_a_change_measured_twice_shows_the_alone_gain_and_says_why_the_other_differs() -> None:
    finding, alone, together = _finding(1.9), _alone(), _together()
    one_gain_per_change([finding], [alone, together])
    assert finding.impact.speedup == 1.9 and together.fix is None
    assert [r.change for r in (alone, together) if shows_gain(r)] == [ALONE]
    # One headline gain; the other appears once, inside the sentence that explains it.
    assert finding.impact.text.startswith("Measured end to end: 170.00 -> 89.47 ms per step")
    why = finding.impact.text
    assert f"({TOGETHER}): 2.54x ±9.6%, over a second baseline" in why
    assert "the unchanged step took 12% longer there (190.00 ms against 170.00 ms here)" in why
    assert "its noise (±9.6%) is wider" in why
    assert together.speedup == 2.54  # the row keeps its measurement, as data


def test_a_second_measurement_within_the_noise_is_said_to_agree_without_a_number() -> None:
    finding, alone = _finding(1.9), _alone()
    together = _together(speedup=1.93, before_ms=171.0, after_ms=88.6, noise_pct=2.0)
    one_gain_per_change([finding], [alone, together])
    assert "the same within the noise" in finding.impact.text
    assert "1.93" not in _card_text(finding) and together.fix is None


def _gains_in(text: str) -> set[str]:
    return set(re.findall(r"\d+\.\d+x", text))


def test_diagnose_on_a_slow_loader_reports_one_gain_for_the_worker_change() -> None:
    # The example notebook's shape: items wait on I/O, num_workers=0. The worker sweep wins, the
    # DataLoader winners together are skipped (one setting won), and the winners' final run
    # measures num_workers again: one gain on the cards, the sweep's.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(SleepyDataset(delay_s=0.004), batch_size=8, shuffle=True)
    report = diagnose(model, loader, loss_fn=nn.CrossEntropyLoss(), optimizer=opt, steps=4,
                      budget_s=12, experiments=["num_workers", "loader_combined"])  # fmt: skip
    report.validate()
    assert multiprocessing.active_children() == []
    rows = {r.change: r for r in report.what_if}
    sweep = next(r for r in report.what_if if r.params and "from_num_workers" in r.params)
    assert sweep.params is not None and sweep.params["won"], (sweep.skipped, sweep.params)
    skipped = [r for r in report.what_if if r.skipped is not None]
    assert any("its own row measures it" in (r.skipped or "") for r in skipped), rows
    assert all(r.speedup is None and r.fix is None for r in skipped)
    final = report.what_if[-1]
    assert final.change.startswith("all winners together"), rows
    assert final.skipped is None, final.skipped  # measured: num_workers twice
    assert final.params is not None and final.params[REPEAT_OF] == sweep.change
    assert final.fix is None  # the finding's card is the change's, once
    shown = [r for r in report.what_if if shows_gain(r)]
    assert [r.change for r in shown] == [sweep.change]
    finding = report.finding("load.input_bound")
    assert finding is not None and finding.impact.speedup == pytest.approx(sweep.speedup)
    # No card (finding or row fix) states any other gain as its own; the second measurement is
    # named only inside the sentence that says why it differs.
    own = f"{sweep.speedup:.2f}x"
    card = " ".join([finding.title, finding.fix.text, finding.fix.code or ""])
    assert _gains_in(card) <= {own}, card
    lead = finding.impact.text.split(" Measured again in another run")[0]
    assert _gains_in(lead) <= {own}, finding.impact.text
    codes = " ".join(r.fix.code or "" for r in report.what_if if r.fix is not None)
    assert not _gains_in(codes), codes
    # The notes do not give the repeated change a second gain either.
    assert not any("Together the winners gave" in n for n in report.notes), report.notes
