"""gpusight.bench.run_all and the bench report on a machine without CUDA: the CPU benchmark runs,
every GPU benchmark says why it did not, and nothing of the user's is changed."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import torch
from gpusight import cli
from gpusight.bench import bench_findings, build_report, run_all
from gpusight.bench.flags import snapshot
from gpusight.bench.table import format_table
from gpusight.commands import bench as bench_command
from gpusight.commands.bench import ProgressBar
from gpusight.report import Benchmark
from gpusight.report_schema import validate
from gpusight.rules.cpu_only_build import cpu_only_torch_version

needs_no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA path")

GPU_IDS = {
    "matmul.fp32",
    "matmul.tf32",
    "matmul.bf16",
    "matmul.fp16",
    "matmul.fp8",
    "copy.h2d.pinned",
    "copy.h2d.pageable",
    "copy.d2h.pinned",
    "copy.d2h.pageable",
    "copy.d2d",
    "launch.eager",
    "launch.graph",
    "sync.synchronize",
    "sync.item",
}


@needs_no_cuda
def test_cpu_runs_and_gpu_rows_say_why_not() -> None:
    flags = snapshot()
    rng = torch.random.get_rng_state()
    stages: list[tuple[str, float]] = []
    rows = run_all(budget_s=1.0, progress=lambda s, f: stages.append((s, f)), quick=True)
    ids = [r.id for r in rows]
    assert len(ids) == len(set(ids))
    assert set(ids) == GPU_IDS | {"cpu.matmul.fp32"}
    cpu = rows[ids.index("cpu.matmul.fp32")]
    assert cpu.value is not None and cpu.value > 0 and cpu.unit == "GFLOP/s"
    assert cpu.spread is not None and cpu.spread[0] <= cpu.value <= cpu.spread[1]
    for row in rows:
        if row.id in GPU_IDS:
            assert row.value is None
            assert row.skipped is not None and row.skipped.startswith("no CUDA device")
    fractions = [f for _, f in stages]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert snapshot() == flags
    assert torch.equal(torch.random.get_rng_state(), rng)


@needs_no_cuda
def test_bench_report_is_schema_valid() -> None:
    report = build_report(budget_s=0.5, quick=True)
    data = report.to_dict()
    validate(data)
    assert data["kind"] == "bench"
    # A CPU-only torch build (what the tests pin) is named first, never "no bottleneck".
    cpu_only = cpu_only_torch_version(data["machine"]) is not None
    assert data["verdict"]["bottleneck"] == ("environment" if cpu_only else "none")
    assert ("CPU-only build" in data["verdict"]["summary"]) == cpu_only
    assert "no CUDA device" in data["verdict"]["summary"]
    assert any("no CUDA device" in note for note in data["notes"])
    json.dumps(data, allow_nan=False)


def test_ctrl_c_during_a_benchmark_leaves_nothing_behind() -> None:
    flags = snapshot()
    threads = set(threading.enumerate())

    def progress(stage: str, fraction: float) -> None:
        if stage == "cpu matmul" and fraction > 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_all(budget_s=2.0, progress=progress, quick=True)
    assert set(threading.enumerate()) == threads
    assert snapshot() == flags


def _rows(h2d: float, bf16: float) -> list[Benchmark]:
    return [
        Benchmark(
            id="copy.h2d.pinned",
            label="host to device, pinned",
            value=h2d,
            unit="GB/s",
            ceiling=63.0,
            ceiling_source="PCIe gen5 x16",
            params={"pcie_gen": 5, "pcie_width": 16},
        ),
        Benchmark(
            id="matmul.bf16",
            label="matmul bf16",
            value=bf16,
            unit="TFLOP/s",
            ceiling=989.5,
            ceiling_source="NVIDIA H200 datasheet",
        ),
    ]


def test_findings_from_slow_copies_and_matmuls() -> None:
    healthy = bench_findings(_rows(h2d=55.0, bf16=797.0))
    assert healthy == []
    sick = bench_findings(_rows(h2d=12.0, bf16=300.0))
    assert [f.id for f in sick] == ["hw.h2d_below_link", "hw.matmul_below_expected"]
    assert "19 %" in sick[0].title
    report = build_report(_rows(h2d=12.0, bf16=300.0), machine=_machine())
    validate(report.to_dict())
    assert report.verdict.bottleneck == "environment"
    assert report.finding("hw.h2d_below_link") is not None


def _machine() -> dict[str, object]:
    return {"platform": "linux", "python": "3.12", "cpu_count": 16, "gpus": []}


def test_table_folds_skipped_rows() -> None:
    rows = [
        *_rows(h2d=55.0, bf16=797.0),
        Benchmark(id="a", label="a", value=None, unit="x", skipped="no CUDA device"),
        Benchmark(id="b", label="b", value=None, unit="x", skipped="no CUDA device"),
    ]
    text = format_table(rows)
    assert "copy.h2d.pinned" in text and "87 %" in text and "81 %" in text
    assert "a (+1 more): skipped: no CUDA device" in text


@needs_no_cuda
def test_command_writes_a_valid_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "bench" in cli.COMMAND_MODULES
    parser = argparse.ArgumentParser()
    bench_command.register(parser.add_subparsers())
    out = tmp_path / "bench.json"
    args = parser.parse_args(["bench", "--quick", "--budget", "1", "--json", str(out)])
    assert args.func(args) == 0
    captured = capsys.readouterr()
    assert "cpu.matmul.fp32" in captured.out
    assert "skipped: no CUDA device" in captured.out
    assert "[100%] done" in captured.err
    validate(json.loads(out.read_text()))
    bad = parser.parse_args(["bench", "--budget", "0"])
    assert bad.func(bad) == 2


def test_progress_bar_draws_in_place_on_a_terminal() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    bar = ProgressBar(stream, width=10)
    bar("matmul bf16", 0.5)
    bar("done", 1.0)
    bar.close()
    text = stream.getvalue()
    assert "\r[#####-----]  50%  matmul bf16" in text
    assert "\r[##########] 100%  done" in text and text.endswith("\n")


def test_importing_bench_does_not_import_torch() -> None:
    code = textwrap.dedent(
        """
        import sys
        import gpusight.bench, gpusight.commands.bench
        print("torch" in sys.modules)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "False"


def test_fallback_machine_is_schema_valid() -> None:
    from gpusight.bench.machine import machine_info, minimal_machine

    for machine in (minimal_machine(), machine_info()):
        validate(build_report([], machine=machine).to_dict())


def test_fp32_is_set_against_the_faster_precisions() -> None:
    from gpusight.bench.matmul import compare_to_best
    from gpusight.bench.suite import summary

    rows = [
        Benchmark("matmul.fp32", "fp32", 51.0, "TFLOP/s", ceiling=67.0),
        Benchmark("matmul.tf32", "tf32", 402.0, "TFLOP/s", ceiling=494.5),
        Benchmark("matmul.bf16", "bf16", 797.0, "TFLOP/s", ceiling=989.5),
        Benchmark("matmul.fp8", "fp8", None, "TFLOP/s", skipped="fp8 needs 8.9"),
    ]
    compare_to_best(rows)
    fp32 = rows[0].params or {}
    assert fp32["best"] == "matmul.bf16"
    assert fp32["x_below_tf32"] == pytest.approx(402 / 51, rel=5e-3)  # 3 digits kept
    assert fp32["x_below_best"] == pytest.approx(797 / 51, rel=5e-3)
    assert "x_below_fp32" not in (rows[1].params or {})
    assert rows[3].params is None
    text = summary(rows)
    assert "bf16 matmul 797 TFLOP/s (81 % of datasheet)" in text
    assert "7.88x with tf32 and 15.6x with bf16" in text
