"""gpusight.bench.nvml and what the matmul rows say with it: the GPU's own account of its clocks
(power cap, thermal slowdown) in params, the summary and the finding; and subsets of the
benchmarks, on a machine without CUDA or NVML."""

from __future__ import annotations

import pytest
import torch
from gpusight.bench import bench_findings, copies, launch, matmul
from gpusight.bench.nvml import ClockSummary, GpuNvml
from gpusight.bench.suite import build_report, summary
from gpusight.report import Benchmark
from gpusight.report_schema import validate

needs_no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA path")


def capped() -> ClockSummary:
    return ClockSummary(
        samples=12,
        sm_clock_mhz=1755.0,
        sm_clock_min_mhz=1710.0,
        sm_clock_max_mhz=1980.0,
        power_w=695.2,
        power_max_w=702.0,
        power_limit_w=700.0,
        power_source="instant",
        temperature_c=62.0,
        reasons=["sw_power_cap"],
    )


def test_a_power_capped_gpu_says_so() -> None:
    state = capped()
    assert state.describe() == (
        "power-capped at 700 W (sw_power_cap): SM clock 1,755 of 1,980 MHz, 695 W, 62 °C"
    )
    params = state.params()
    assert params["clock_events"] == "sw_power_cap" and params["sm_clock_mhz"] == 1755.0
    assert all(v is None or isinstance(v, (str, int, float)) for v in params.values())
    free = ClockSummary(3, 1980.0, 1980.0, 1980.0, 400.0, 410.0, 700.0, "instant", 50.0, [])
    assert free.describe().startswith("no clock limit reported: SM clock 1,980")
    hot = ClockSummary(3, 1500.0, 1400.0, 1980.0, None, None, None, None, 88.0, ["hw_slowdown"])
    assert hot.describe().startswith("clocks held down (hw_slowdown)")
    assert ClockSummary(0, None, None, None, None, None, None, None, None).describe() == (
        "no NVML readings"
    )


def _bf16(value: float, state: ClockSummary | None, regime: str = "sustained") -> Benchmark:
    params: dict[str, str | int | float | bool | None] = {"n": 8192, "regime": regime}
    if state is not None:
        params.update(state.params())
    return Benchmark(
        id="matmul.bf16",
        label="matmul bf16, sustained",
        value=value,
        unit="TFLOP/s",
        ceiling=989.5,
        ceiling_source="NVIDIA H200 datasheet",
        params=params,
    )


def test_summary_and_finding_carry_the_gpu_state() -> None:
    rows = [_bf16(680.0, capped())]
    text = summary(rows)
    assert "bf16 matmul 680 TFLOP/s (69 % of datasheet; sustained; power-capped at 700 W)" in text
    assert "short burst" in summary([_bf16(760.0, None, "burst")])
    low = bench_findings([_bf16(300.0, capped())])
    assert [f.id for f in low] == ["hw.matmul_below_expected"]
    states = [e.value for e in low[0].evidence if e.label.endswith("GPU while timed")]
    assert states == [capped().describe()]
    machine = {"platform": "x", "python": "3", "cpu_count": 1, "gpus": []}
    validate(build_report(rows, machine=machine).to_dict())


def test_without_nvml_every_reading_is_none() -> None:
    nv = GpuNvml(0)
    try:
        if nv.handle is not None:
            pytest.skip("NVML works here")
        assert nv.why  # says why
        assert nv.sample() is None and nv.pcie() == (None, None)
        state = nv.summary()
        assert state.samples == 0 and state.reasons == []
        assert state.params()["gpu_state"] == "no NVML readings"
    finally:
        nv.close()


@needs_no_cuda
def test_subsets_run_only_what_is_asked() -> None:
    rows = launch.run(only=("sync.item", "launch.graph"))
    assert [r.id for r in rows] == ["launch.graph", "sync.item"]
    rows = copies.run(directions=(("d2h", "pageable"),), device_copy=False)
    assert [r.id for r in rows] == ["copy.d2h.pageable"]
    assert [r.id for r in copies.run(directions=(), device_copy=True)] == ["copy.d2d"]
    rows = matmul.run(precisions=("fp32", "bf16"))
    assert [r.id for r in rows] == ["matmul.fp32", "matmul.bf16"]  # the order asked for
    for row in rows:
        assert (row.skipped or "").startswith("no CUDA device")
