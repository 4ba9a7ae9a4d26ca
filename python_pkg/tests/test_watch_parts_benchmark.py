"""benchmarks/watch_parts.py: its statistics on given blocks, and one short real run on the CPU
that leaves nothing of the watch behind. The figures themselves come from the H200."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "watch_parts.py"


@pytest.fixture(scope="module")
def wp() -> Iterator[ModuleType]:
    saved = list(sys.path)
    spec = importlib.util.spec_from_file_location("watch_parts_bench", BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    yield mod
    sys.path[:] = saved


def _blocks(ms: list[float]) -> list[dict[str, Any]]:
    return [{"median_ms": m, "mean_ms": m, "gc_per_1000_steps": 0.0} for m in ms]


def test_paired_and_same_state_figures_leave_out_the_slow_phases(wp: ModuleType) -> None:
    bare = [1.0, 1.0, 2.0, 1.0, 1.0, 1.0]
    # +3 % in every round, except one where only the watched block hit a slow phase (x2) and
    # one where only the bare block did.
    watched = [1.03, 1.03, 1.03, 2.06, 1.03, 1.03]
    lines, result = wp.summary(
        {"bare": _blocks(bare), "watched": _blocks(watched)}, 100, 6, "cpu", "x"
    )
    row = result["variants"]["watched"]
    assert row["paired_pct"] == pytest.approx(3.0)
    assert row["same_state_pct"] == pytest.approx(3.0) and row["same_state_rounds"] == 4
    assert row["q1_pct"] == pytest.approx(3.0)
    assert any(line.startswith("watched") and "+3.0%" in line for line in lines)


def test_a_short_cpu_run_writes_its_table_and_restores_everything(
    wp: ModuleType, tmp_path: Path
) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rc = wp.main(
            [
                "--out",
                str(tmp_path),
                "--parts",
                "bare",
                "minimal",
                "watched",
                "--rounds",
                "2",
                "--block-s",
                "0.02",
                "--profile-steps",
                "5",
                "--top",
                "3",
                "--settle-s",
                "0.01",
                "--warm-steps",
                "30",
            ]
        )
    finally:
        torch.set_num_threads(threads)
    assert rc == 0  # 1 when a watch left something changed
    got = json.loads((tmp_path / "watch-parts.json").read_text())
    assert got["restore_problems"] == []
    assert got["warm_steps"] == 30 and got["settle_s"] == 0.01
    assert set(got["variants"]) == {"bare", "minimal", "watched"}
    assert all(len(v["blocks"]) == 2 for v in got["variants"].values())
    # The loop thread's CPU time a step, beside its wall time, and its paired figure.
    assert all(0 < b["cpu_ms"] for v in got["variants"].values() for b in v["blocks"])
    assert "cpu_paired_pct" in got["variants"]["watched"]
    assert "watched" in (tmp_path / "watch-parts.txt").read_text()
