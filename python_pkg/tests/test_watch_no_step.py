"""Figures that cannot be true are not reported: a run with no step claims nothing, and no
estimate runs off to infinity."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from gpusight.cli import main
from gpusight.rules.workload import GpuWindow, WorkloadEvidence, analyse


@pytest.mark.parametrize(
    "source, code",
    [
        ("print(1)\n", 0),
        ("import sys\nsys.exit(3)\n", 3),
        ("import torch\nx = torch.ones(3) * 2\n", 0),
    ],
)
def test_a_script_with_no_step_gets_no_bottleneck(tmp_path: Path, source: str, code: int) -> None:
    script = tmp_path / "s.py"
    script.write_text(source)
    out = tmp_path / "r.json"
    assert main(["run", "--quiet", "--json", str(out), str(script)]) == code
    rep = json.loads(out.read_text())
    assert rep["verdict"]["bottleneck"] == "none"
    assert "No training or inference step" in rep["verdict"]["summary"]
    assert not [f for f in rep["findings"] if f["severity"] in ("warn", "critical")]


def test_estimates_stay_finite_near_a_whole_step() -> None:
    # A window that put the whole step in other host time (as a CUPTI failure once did).
    window = GpuWindow(
        steps=3,
        gpu=True,
        split_ms={"compute": 0.0, "other_cpu": 170.0},
        kernels_per_step=1.0,
        launches_per_step=1.0,
    )
    ev = WorkloadEvidence(
        step_mode="optimizer",
        step_times_ms=[170.0] * 10,
        data_wait_ms=[0.0] * 10,
        host_copy_ms=[0.0] * 10,
        framework_ms=[1e-9] * 10,
        cuda_available=True,
        cuda_devices=1,
        window=window,
        gpu_used=True,
    )
    res = analyse(ev)
    assert res.findings
    for f in res.findings:
        s = f.impact.speedup
        assert s is None or (math.isfinite(s) and s <= 20.0), (f.id, s)
