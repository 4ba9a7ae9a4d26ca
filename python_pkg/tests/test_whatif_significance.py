"""A gain whose noise band includes 1x is not significant: never a winner, so never a finding."""

from __future__ import annotations

from typing import Any, cast

from gpusight.knobs.gain_rule import band_excludes_one
from gpusight.whatif.arms import planned
from gpusight.whatif.findings import findings_of
from gpusight.whatif.inference import Latency, Pair, _what_if, _wins
from gpusight.whatif.procedures import outcome_of
from gpusight.whatif.runner import Comparison


def test_band_rule() -> None:
    assert band_excludes_one(1.5, 10.0)  # 1.35x .. 1.65x
    assert not band_excludes_one(1.05, 10.0)  # 0.945x .. 1.155x
    assert not band_excludes_one(6.12, 340.0)
    assert not band_excludes_one(0.8, None)


def test_noisy_big_gain_in_diagnose_gives_no_finding() -> None:
    # Baseline blocks that vary wildly (noise ~110 %), variant ~6x faster on the median.
    cmp = Comparison(base_ms=[15.0, 60.0, 120.0, 60.0, 4.0], variant_ms=[10.0] * 5)
    assert cmp.speedup > 5 and cmp.noise_pct is not None and cmp.noise_pct > 100
    # The user's loader: end to end.
    variant = planned("num_workers=4", source="loader", num_workers=4)
    outcome = outcome_of("num_workers", "num_workers=4", "load.input_bound", cmp, variant)
    assert outcome.winner is None
    assert outcome.what_if.speedup is not None and outcome.what_if.speedup > 5
    found = findings_of(cast(Any, None), [outcome])
    assert [f for f in found if f.severity in ("warn", "critical")] == []


def test_noisy_big_gain_in_inference_is_not_a_win() -> None:
    # The case: 6.1x on the median with a p10..p90 band of about 340 % of the median.
    base = Latency(batch=1, samples_ms=[1.0] * 2 + [61.0] * 6 + [250.0] * 2)
    variant = Latency(batch=1, samples_ms=[10.0] * 10)
    pair = Pair(base, variant)
    what = _what_if("inference_mode", pair)
    assert what.speedup is not None and what.speedup > 6
    assert what.noise_pct is not None and what.noise_pct > 300
    assert not _wins(pair)
    quiet = Pair(Latency(batch=1, samples_ms=[61.0, 60.0, 62.0] * 3), variant)
    assert _wins(quiet)  # the same gain with little noise still wins
