"""benchmarks/cost/hook.py and benchmarks/cost/spread.py: short real runs on the CPU. The
figures themselves come from the H200 (benchmarks/results/)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from bench_support import load_benchmark


@pytest.fixture
def restore_path() -> Iterator[None]:
    saved = list(sys.path)
    yield
    sys.path[:] = saved


def test_hook_cost_times_all_hooks_against_light_steps(restore_path: None, tmp_path: Path) -> None:
    hc = load_benchmark("cost.hook")
    threads = torch.get_num_threads()
    rc = hc.main(["--rounds", "2", "--steps", "30", "--out", str(tmp_path)])
    assert rc == 0
    assert torch.get_num_threads() == threads
    parts = json.loads((tmp_path / "hook-cost.json").read_text())["parts"]
    assert set(parts) == {"bare", "all_hooks", "watched"}
    assert parts["bare"]["self_us"] is None and parts["bare"]["wall_extra_us"] == 0
    # Every step hooked under all_hooks; on a 4-wide step the hooks are far over their budget,
    # so the watch as it is runs them on the census and 1 in k steps after it.
    assert parts["all_hooks"]["full_steps"] == parts["all_hooks"]["measured_steps"] > 0
    assert 0 < parts["watched"]["full_steps"] < parts["watched"]["measured_steps"]
    assert parts["watched"]["self_us"] > 0


def test_process_spread_runs_processes_and_reprints_its_table(
    restore_path: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ps = load_benchmark("cost.spread")
    argv = sys.argv
    sys.argv = [
        "process_spread.py",
        *("--only", "tiny_batch", "--envs", "plain", "--procs", "2", "--iters", "30"),
        *("--control-s", "0.05", "--out", str(tmp_path)),
    ]
    try:
        assert ps.main() == 0
    finally:
        sys.argv = argv
    got = json.loads((tmp_path / "process-spread.json").read_text())
    runs = got["scenarios"]["tiny_batch"]["runs"]
    assert len(runs) == 2 and all("mean_ms" in r and r["ctrl_before_ms"] > 0 for r in runs)
    assert got["scenarios"]["tiny_batch"]["by_env"]["plain"]["n"] == 2
    text = (tmp_path / "process-spread.txt").read_text()
    assert text.splitlines()[1].startswith("tiny_batch")
    capsys.readouterr()
    sys.argv = ["process_spread.py", "--table-from", str(tmp_path / "process-spread.json")]
    try:
        assert ps.main() == 0
    finally:
        sys.argv = argv
    assert capsys.readouterr().out.strip() == text.strip()


def test_hook_cost_inference_samples_the_pre_hook(restore_path: None, tmp_path: Path) -> None:
    hc = load_benchmark("cost.hook")
    argv = ["--workload", "infer", "--parts", "bare", "all_hooks", "watched", "--rounds", "1"]
    assert hc.main([*argv, "--steps", "40", "--out", str(tmp_path)]) == 0
    parts = json.loads((tmp_path / "hook-cost.json").read_text())["parts"]
    # Each call of the model is a step; its post-hook is the boundary on every step, and on a
    # call this short the pre-hook (the call's clock) runs on the census and 1 in k after it.
    assert parts["all_hooks"]["full_steps"] == parts["all_hooks"]["measured_steps"] > 40
    assert 0 < parts["watched"]["full_steps"] < parts["watched"]["measured_steps"]
