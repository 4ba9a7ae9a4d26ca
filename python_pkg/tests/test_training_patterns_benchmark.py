"""benchmarks/verdicts/patterns.py on the CPU, a few of its loop shapes: every iteration past the
warm-up is one of the report's steps, and its table and JSON are written. (Its step times
against the loop's own clock are a benchmark's figures, in ``benchmarks/results/``.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from bench_support import benchmark
from watch_support import snapshot

SHAPES = ["opt_every_step", "replaced_after_head", "wrapping", "gan_i_mod_3", "accumulate_4"]


@pytest.fixture(scope="module")
def tp() -> Iterator[ModuleType]:
    with benchmark("verdicts.patterns") as mod:
        yield mod


def test_every_iteration_is_a_step(tp: ModuleType, tmp_path: Path) -> None:
    before = snapshot()
    assert tp.main(["--only", *SHAPES, "--iters", "40", "--out", str(tmp_path)]) == 0
    assert snapshot() == before
    rows = json.loads((tmp_path / "training-patterns.json").read_text())["rows"]
    assert list(rows) == SHAPES
    for name, row in rows.items():
        assert "error" not in row, (name, row)
        assert row["steps"] == row["expected_steps"] == 40 - tp.WARMUP, (name, row)
        assert row["kind"] == "optimizer" and row["step_ms"] > 0 and row["own_ms"] > 0
    table = (tmp_path / "training-patterns-table.txt").read_text()
    assert all(name in table for name in SHAPES)
