"""A run that ended before any clean step is reported from its start-up steps, with no gain
sized from them (``rules/startup_run.py``). Real CPU torch through ``gpusight run``."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpusight.report import load_report

EXITS_EARLY = """\
import sys

import numpy as np
import torch
from torch import nn

torch.autograd.set_detect_anomaly(True)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(1000):
    x = torch.from_numpy(np.random.rand(16, 32).astype("float32") * 2 - 1)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step == 3:
        sys.exit(0)
"""


def test_a_script_that_exits_after_a_few_steps_sizes_no_gain_from_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch
    from gpusight.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(EXITS_EARLY, encoding="utf-8")
    was = torch.is_anomaly_enabled()
    try:
        assert main(["run", "--quiet", "--json", "r.json", "train.py"]) == 0
    finally:  # the script runs in this process: its switch must not reach the other tests
        torch.autograd.set_detect_anomaly(was)
    rep = load_report(tmp_path / "r.json")
    assert rep["run"]["steps"] >= 1
    assert "start-up step" in rep["verdict"]["summary"]
    assert "the run ended before any clean step" in rep["verdict"]["summary"]
    loads = [f for f in rep["findings"] if f["id"].startswith("load.")]
    for f in loads:
        assert f["severity"] == "info" and f["impact"]["basis"] == "none", f
        assert "Not sized" in f["impact"]["text"]
    # A debugging switch does not rest on the step's split: it keeps its severity.
    anomaly = [f for f in rep["findings"] if f["id"] == "cfg.anomaly_detection"]
    assert anomaly and anomaly[0]["severity"] != "info"


def test_the_verdict_says_what_start_up_steps_it_comes_from() -> None:
    from gpusight.report import Evidence, Finding, Fix, Impact, Verdict
    from gpusight.rules.startup_run import unsized

    est = Impact(basis="estimated", speedup=1.64, recoverable_pct=39.0)
    f = Finding(id="load.cpu_preprocessing", severity="warn", title="host work",
                evidence=[Evidence("x", 1)], impact=est, fix=Fix(text="move it"))  # fmt: skip
    sync = Finding(id="code.host_sync", severity="warn", title="sync", impact=Impact(
        basis="estimated", speedup=1.2), fix=Fix(text="read less"))  # fmt: skip
    v = Verdict("host_cpu", None, "Host work outside the model takes 39%.")
    unsized([f, sync], v, 1)
    assert v.summary.startswith("From 1 start-up step only (the run ended before any clean")
    assert f.severity == "info" and f.impact.basis == "none" and f.impact.speedup is None
    # A sync on a line stays named, without a figure from those steps.
    assert sync.severity == "warn" and sync.impact.basis == "none"
