"""The one severity rule (issue #47 point 4): critical only for a large gain, warn for a smaller
one, info without one; blockers keep their rule's word; the builders settle every finding."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpusight.report import Finding, Impact, load_report
from gpusight.report_schema import finding_ids
from gpusight.rules.severity import BLOCKERS, severity_for


def _f(fid: str, severity: str, impact: Impact) -> Finding:
    return Finding(id=fid, severity=severity, title="t", impact=impact)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("impact", "rule_said", "expected"),
    [
        (Impact("estimated", speedup=2.0, recoverable_pct=50.0), "warn", "critical"),
        # The optimizer that was slow because its parameters were on the CPU: 1.11x.
        (Impact("estimated", speedup=1.11, recoverable_pct=9.9), "critical", "warn"),
        (Impact("measured", speedup=1.31, recoverable_pct=23.7), "critical", "warn"),
        (Impact("measured", speedup=1.4), "info", "critical"),
        (Impact("estimated", recoverable_pct=40.0), "info", "critical"),
        (Impact("estimated", speedup=1.01, recoverable_pct=1.0), "warn", "info"),
        # Within the noise: measured, gives nothing back.
        (Impact("measured", speedup=1.05, recoverable_pct=0.0), "warn", "info"),
        # An estimate from none up to a real gain is a smaller gain; no gain claimed is none.
        (Impact("estimated", speedup=1.0, speedup_range=(1.0, 1.9)), "info", "warn"),
        (Impact("estimated", speedup=1.0, recoverable_pct=0.0), "warn", "info"),
        # A range's low end decides critical.
        (Impact("estimated", speedup=1.2, speedup_range=(1.2, 8.0)), "warn", "warn"),
        # No figure: at most a warning, and the rule's own info stays.
        (Impact("none", text="Depends on the model"), "critical", "warn"),
        (Impact("none", text="Depends on the model"), "info", "info"),
        (Impact("estimated", text="Often several times slower"), "critical", "warn"),
    ],
)
def test_the_severity_follows_the_gain(impact: Impact, rule_said: str, expected: str) -> None:
    assert severity_for(_f("load.launch_bound", rule_said, impact)) == expected


def test_every_finding_id_obeys_it_and_blockers_are_real_ids() -> None:
    assert BLOCKERS <= set(finding_ids())
    small = Impact("estimated", speedup=1.11, recoverable_pct=9.9)
    large = Impact("measured", speedup=3.0, recoverable_pct=66.7)
    for fid in finding_ids():
        if fid in BLOCKERS:
            assert severity_for(_f(fid, "critical", small)) == "critical"
            continue
        assert severity_for(_f(fid, "critical", small)) == "warn", fid
        assert severity_for(_f(fid, "info", large)) == "critical", fid


HOST_BOUND = """\
import numpy as np
import torch
from torch import nn

torch.set_num_threads(1)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.Adam(model.parameters())
for step in range(300):
    x = torch.from_numpy(np.sort(np.random.rand(16, 2048), axis=1)[:, :32].astype("float32"))
    loss = nn.functional.cross_entropy(model(x), torch.zeros(16, dtype=torch.long))
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_watched_run_reports_every_finding_at_the_rules_severity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpusight.cli import main
    from gpusight.report_parse import finding_from_dict

    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(HOST_BOUND, encoding="utf-8")
    assert main(["run", "--quiet", "--steps", "10", "--json", "r.json", "train.py"]) == 0
    findings = [finding_from_dict(d) for d in load_report(tmp_path / "r.json")["findings"]]
    assert findings
    for f in findings:
        assert f.severity == severity_for(f), (f.id, f.severity, f.impact)
