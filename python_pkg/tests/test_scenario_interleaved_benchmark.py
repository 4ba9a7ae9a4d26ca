"""benchmarks/cost/scenario.py: a scenario's own script run twice in one process, bare and
watched, taking turns at its ``Steps.mark()``; short real runs on the CPU. The figures
themselves come from the H200."""

from __future__ import annotations

import json
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from bench_support import benchmark


@pytest.fixture(scope="module")
def si() -> Iterator[ModuleType]:
    with benchmark("cost.scenario") as mod:
        yield mod


def run_main(si: ModuleType, argv: list[str], timeout: float = 120.0) -> int:
    """``main(argv)`` in a thread that must end: a benchmark that hangs fails the test."""
    out: list[int] = []
    th = threading.Thread(target=lambda: out.append(si.main(argv)), daemon=True)
    th.start()
    th.join(timeout)
    assert not th.is_alive(), "the benchmark did not end"
    return out[0]


@pytest.mark.parametrize("control", [False, True])
def test_turns_are_taken_at_the_scripts_own_clock_and_nothing_is_left_behind(
    si: ModuleType, tmp_path: Path, control: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    import _common
    import torch
    from gpusight.watch import session

    mark = _common.Steps.mark
    flags = (torch.get_num_threads(), torch.is_grad_enabled(), torch.get_float32_matmul_precision())
    argv = ["--only", "tiny_batch", "--block-steps", "3", "--pairs", "4", "--out", str(tmp_path)]
    assert run_main(si, [*argv, "--control"] if control else argv) == 0
    res = json.loads((tmp_path / "scenario-interleaved.json").read_text())["results"][0]
    assert res["errors"] == {} and res["restore_problems"] == []
    # Two pairs of blocks per W B B W, each block the given number of the script's steps.
    assert [b["who"] for b in res["blocks"]] == ["W", "B", "B", "W"] * 2
    assert all(b["n"] == 3 and b["mean_ms"] > 0 for b in res["blocks"])
    assert "steady_pct" in res and res["steady_ci_pct"] is None  # 4 pairs: too few for one
    if control:
        assert "self_us" not in res
    else:
        # The watch saw its own thread's steps only: the 40 alone and its 4 blocks of 3, less
        # its warm-up and profiler window; a report was made.
        assert 0 < res["measured_steps"] <= 40 + 4 * 3 - 3
        assert res["outcome"] == "completed" and res["self_us"] > 0
        assert res["report_pct"] > 0 and res["bottleneck"]
    text = (tmp_path / "scenario-interleaved.txt").read_text()
    assert text.splitlines()[0].startswith("scenario ") and "tiny_batch" in text
    assert text in capsys.readouterr().out
    assert _common.Steps.mark is mark and session._ACTIVE is None
    assert sys.argv[0] != "tiny_batch.py"
    assert (
        torch.get_num_threads(),
        torch.is_grad_enabled(),
        torch.get_float32_matmul_precision(),
    ) == flags


def test_blocks_are_sized_from_the_watched_threads_warm_up(si: ModuleType) -> None:
    turns = si.Turns(40, None, None, None)
    turns.warm_ms["W"] = [500.0] + [2.0] * 39  # the first step builds and warms: not the pace
    turns.size_from_warmup(block_s=0.05, budget_s=20.0, max_pairs=300)
    assert turns.block == 25  # 50 ms of 2 ms steps
    assert turns.pairs == 200  # 20 s of blocks, two a pair
    assert [turns.who(t) for t in range(2, 8)] == ["W", "B", "B", "W", "W", "B"]
    assert turns.who(2 + 2 * 200) is None  # the schedule ends


def test_a_script_that_fails_in_one_thread_frees_the_other(
    si: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The bare thread's script raises in its fifth step, while the watched one waits for its
    # turn: both end, the failure is reported, and the run says so in its exit code.
    (tmp_path / "fails_in_b.py").write_text(
        textwrap.dedent(
            """
            import threading
            import torch
            from _common import Steps, parse_args, pick_device

            def main():
                args = parse_args("fails in B", iters=100)
                dev = pick_device(args.device)
                lin = torch.nn.Linear(4, 4)
                with Steps("fails_in_b", args, dev, 1) as steps:
                    for i in range(args.iters):
                        lin(torch.randn(2, 4)).sum().backward()
                        if threading.current_thread().name == "scenario-B" and i == 4:
                            raise ValueError("a loader that raises")
                        steps.mark()
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "out"
    assert run_main(si, ["--only", "fails_in_b", "--block-steps", "2", "--out", str(out)]) == 1
    res = json.loads((out / "scenario-interleaved.json").read_text())["results"][0]
    assert res["errors"] == {"B": "ValueError: a loader that raises"}
    assert res["restore_problems"] == [] and res["blocks"] == []
    assert "ValueError: a loader that raises" in (out / "scenario-interleaved.txt").read_text()


def test_a_blocks_mean_step_counts_its_wall_time_with_the_drain(si: ModuleType) -> None:
    # A GPU-bound step: the host marks three steps 1 ms apart, and the drain waits 6 ms more for
    # the queued work; the block's mean step is its wall time over its steps, the median the
    # host's pace.
    b = si.block_figures([1.0, 1.0, 1.0], wall_ms=9.0)
    assert b == {"n": 3, "mean_ms": 3.0, "median_ms": 1.0}
