"""benchmarks/cost/parts.py: its statistics on given blocks, and one short real run on the CPU
that leaves nothing of the watch behind. The figures themselves come from the H200."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from bench_support import benchmark


@pytest.fixture(scope="module")
def wp() -> Iterator[ModuleType]:
    with benchmark("cost.parts") as mod:
        yield mod


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


def test_the_median_interval_has_its_order_statistics_and_coverage(wp: ModuleType) -> None:
    # n = 20: P(B <= 5) = 0.021 <= 0.025 < P(B <= 6), so the 6th and 15th values.
    assert wp.median_ci([float(x) for x in range(20)]) == (5.0, 14.0)
    assert wp.median_ci([1.0, 2.0, 3.0, 4.0, 5.0]) is None  # 2 * 1/32 > 5 %: no interval
    rng = random.Random(7)
    covered = 0
    for _ in range(2000):
        lo, hi = wp.median_ci([rng.gauss(0.0, 1.0) for _ in range(15)])
        covered += lo <= 0.0 <= hi
    assert 0.94 <= covered / 2000 <= 0.99


def test_full_clock_rounds_pair_only_blocks_at_the_gpus_full_clock(wp: ModuleType) -> None:
    bare = _blocks([1.0, 2.0, 1.0, 1.0])
    watched = _blocks([1.02, 1.02, 2.0, 1.04])
    clocks = [(1980, 1980), (1980, 600), (1980, 1980), (1965, 1980)]  # bare's 2nd slowed down
    for b, c in zip(bare, clocks, strict=True):
        b["sm_mhz"] = list(c)
    for w, c in zip(watched, [(1980, 1980), (1980, 1980), (345, 1980), (1980, 1980)], strict=True):
        w["sm_mhz"] = list(c)
    assert wp.full_clock_rounds(bare, watched) == pytest.approx([1.02, 1.04])
    _, result = wp.summary({"bare": bare, "watched": watched}, 100, 4, "cuda", "2.x")
    row = result["variants"]["watched"]
    assert row["full_clock_rounds"] == 2 and row["full_clock_pct"] == pytest.approx(3.0)
    assert wp.full_clock_rounds(_blocks([1.0]), _blocks([1.1])) == []  # no clocks: no figure


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


@pytest.mark.parametrize("name", ["unbatched_inference", "tiny_batch", "mlp_adam"])
def test_every_workload_steps_on_the_cpu_and_trains_its_own_model(
    wp: ModuleType, name: str
) -> None:
    work = wp.WORKLOADS[name](torch)
    before = [p.detach().clone() for p in work.model.parameters()]
    with work.mode():
        for _ in range(2):
            work.step()
    work.sync()
    moved = any(not torch.equal(a, p) for a, p in zip(before, work.model.parameters(), strict=True))
    assert moved is (name != "unbatched_inference")  # training steps update it; inference not
