"""Figures that cannot be true are not reported: a run with no step claims nothing, and no
estimate runs off to infinity."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from gpusight.cli import main
from gpusight.rules.workload import (
    GpuWindow,
    LoaderInfo,
    Placement,
    WorkloadEvidence,
    analyse,
)


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


def _random_evidence(rng: random.Random) -> WorkloadEvidence:
    n = rng.randint(1, 40)
    base = 10 ** rng.uniform(-3, 3)
    times = [base * rng.choice([1.0, 1.0, 1.0, rng.uniform(0.5, 30.0)]) for _ in range(n)]
    split_keys = ("compute", "data_wait", "copy", "sync_stall", "launch_overhead", "other_cpu")
    window = (
        GpuWindow(
            steps=rng.randint(1, 5),
            gpu=rng.random() < 0.8,
            split_ms={k: base * rng.choice([0.0, 1e-9, rng.random()]) for k in split_keys},
            data_wait_host_ms=base * rng.choice([0.0, rng.random()]),
            kernels_per_step=rng.choice([0.0, 1.0, 300.0]),
            launches_per_step=rng.choice([0.0, 1.0, 300.0]),
            median_kernel_us=rng.choice([None, 0.0, 5.0, 500.0]),
            matmul_fp32_ms=base * rng.choice([0.0, rng.random()]),
            conv_lowp_ms=base * rng.choice([0.0, rng.random()]),
            issued_gpu_ms=rng.choice([None, 0.0, base]),
        )
        if rng.random() < 0.7
        else None
    )
    return WorkloadEvidence(
        step_mode=rng.choice(["optimizer", "backward", "forward", "block"]),
        step_times_ms=times,
        data_wait_ms=[t * rng.choice([0.0, rng.random()]) for t in times],
        host_copy_ms=[t * rng.choice([0.0, 0.1 * rng.random()]) for t in times],
        framework_ms=[t * rng.random() for t in times],
        cuda_available=rng.random() < 0.8,
        cuda_devices=1,
        window=window,
        loader=LoaderInfo(
            num_workers=rng.choice([None, 0, 2, 64]),
            batch_size=rng.choice([None, 1, 8, 4096]),
            prefetch_factor=rng.choice([None, 2]),
        ),
        placement=Placement(
            param_devices=rng.choice([["cpu"], ["cuda:0"], []]),
            batch_size=rng.choice([None, 1, 4, 32, 1024]),
            has_conv=rng.random() < 0.5,
        ),
        cpu_count=rng.choice([None, 1, 2, 16, 128]),
        gpu_used=rng.random() < 0.7,
        nvml_util_pct=rng.choice([None, 0.0, 37.0, 100.0]),
        peak_memory_bytes=rng.choice([None, 10**6, 10**11]),
        memory_capacity_bytes=rng.choice([None, 1.4 * 10**11]),
    )


def test_every_estimate_is_finite_and_bounded_for_any_evidence() -> None:
    rng = random.Random(1234)
    for _ in range(400):
        ev = _random_evidence(rng)
        res = analyse(ev)
        assert math.isfinite(res.step_time_ms)
        assert abs(sum(res.breakdown_ms.values()) - res.step_time_ms) <= 1e-6 * max(
            1.0, res.step_time_ms
        )
        for f in res.findings:
            for s in (f.impact.speedup, *(f.impact.speedup_range or ())):
                assert s is None or (math.isfinite(s) and 0.0 < s <= 100.0), (f.id, f.impact)
            share = f.impact.recoverable_pct
            assert share is None or 0.0 <= share <= 100.0, (f.id, share)
