"""One gain rule for every what-if: the least gain, a sweep's knee and the noise band are
defined in ``knobs/gain_rule.py`` and nowhere else in the package (the re-run, ``diagnose`` on
copies and the inference what-if read them there), so the same change cannot be called a gain
on one surface and noise on another."""

from __future__ import annotations

import re
from pathlib import Path

import gpusight
import pytest
from gpusight.knobs.gain_rule import (
    band_excludes_one,
    knee_of,
    loses,
    mean_noise_pct,
    noise_pct,
    threshold,
    wins,
)

PKG = Path(gpusight.__file__).resolve().parent
RULE = PKG / "knobs" / "gain_rule.py"

# A constant of the win rule or a knee, or a noise formula of its own (a MAD, a p10-p90 band, a
# range over the median, a standard error) outside the rule.
OWN_RULE = re.compile(
    r"^\s*(MIN_GAIN|KNEE_GAIN|KNEE_SHARE|PLATEAU_GAIN|GAIN)\s*=|1\.4826|p90\s*-\s*\S*p10"
    r"|max\(\w+\)\s*-\s*min\(\w+\)\)\s*/\s*(statistics\.)?median|\bp?stdev\("
)


def test_no_second_gain_rule_in_the_package() -> None:
    found = []
    for path in sorted(PKG.rglob("*.py")):
        if path == RULE or "labextension" in path.parts or path.parent.name == "bench":
            continue
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            if OWN_RULE.search(line):
                found.append(f"{path.relative_to(PKG)}:{n}: {line.strip()}")
    assert found == []


def test_the_rule_itself() -> None:
    # The band: the middle 80 % of the measurements over their median; one disturbed block of
    # five moves it less than it moves the range.
    assert noise_pct([10.0, 10.0]) == 0.0
    assert noise_pct([9.0, 10.0, 11.0]) == pytest.approx(16.0)
    assert noise_pct([10.0]) is None and noise_pct([0.0, 0.0]) is None
    disturbed = [10.0, 10.2, 9.9, 10.1, 30.0]
    assert (noise_pct(disturbed) or 0) < 100.0 * (30.0 - 9.9) / 10.1
    # One run's mean step: twice its standard error over its blocks' means.
    assert mean_noise_pct([9.0, 10.0, 11.0]) == pytest.approx(200.0 / 3**0.5 / 10.0)
    assert mean_noise_pct([10.0, 10.0, 10.0]) == 0.0 and mean_noise_pct([9.0, 11.0]) == 0.0
    # A win gains at least 5 % and its whole band lies above 1x.
    assert not wins(1.04, 0.0) and wins(1.05, 0.0)
    assert not wins(1.15, 16.0) and wins(1.2, 16.0)
    for noise in (0.0, 2.0, 16.0, 50.0):
        assert band_excludes_one(threshold(noise) * 1.0001, noise)
    # A loss is as far below 1x as a win is above it: 0.61x at ±3 % is one, 0.96x is not.
    assert loses(0.61, 3.0) and not loses(0.96, 3.0) and not loses(None, 3.0)
    assert loses(1.0 / threshold(16.0), 16.0) and not loses(0.9, 16.0)
    # A sweep's answer: the smallest point within 95 % of the best.
    assert knee_of([(2, 2.0), (4, 3.0), (8, 3.1)]) == 4
