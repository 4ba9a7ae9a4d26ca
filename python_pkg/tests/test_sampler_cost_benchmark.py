"""benchmarks/cost/sampler.py: the watch's sampler process paused and resumed around blocks of a
bare workload; a short real run on the CPU (no NVML here: the children sample the host's CPU %
only). The figures themselves come from the H200."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from bench_support import benchmark


@pytest.fixture(scope="module")
def sc() -> Iterator[ModuleType]:
    with benchmark("cost.sampler") as mod:
        yield mod


def test_states_rotate_and_the_children_are_stopped_after(sc: ModuleType, tmp_path: Path) -> None:
    argv = ["--workload", "tiny_batch", "--rounds", "3", "--block-s", "0.05"]
    assert sc.main([*argv, "--warm-steps", "20", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "sampler-cost.json").read_text())
    assert [b["state"] for b in res["blocks"]] == [
        *("off", "nvml", "sampler"),
        *("nvml", "sampler", "off"),
        *("sampler", "off", "nvml"),
    ]
    assert res["off_pct"] == 0.0 and "nvml_pct" in res and "sampler_pct" in res
    for child in res["children"].values():
        assert child["samples"] > 0  # it sampled, and answered "stop" after its pauses
        with pytest.raises(ProcessLookupError):
            os.kill(child["pid"], 0)  # and is gone
    assert (tmp_path / "sampler-cost.txt").read_text().startswith("sampler cost on cpu")


def test_rotation_puts_each_state_in_each_place(sc: ModuleType) -> None:
    orders = [sc.rotate(r) for r in range(3)]
    for i in range(3):
        assert {o[i] for o in orders} == set(sc.STATES)
