"""benchmarks/cost/interleaved.py: its pairing on given blocks, and short real runs on the CPU
(a watched thread and a control) that leave nothing of the watch behind. The figures themselves
come from the H200."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from bench_support import benchmark


@pytest.fixture(scope="module")
def wi() -> Iterator[ModuleType]:
    with benchmark("cost.interleaved") as mod:
        yield mod


def test_pairs_are_adjacent_blocks_in_the_w_b_b_w_order(wi: ModuleType) -> None:
    # Pace drifts 10 % a block; the watch costs 2 %: each adjacent pair sees the drift's step
    # in opposite directions, so their median is the 2 % (up to the drift's second order).
    pace = [1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7]
    blocks = []
    for i, p in enumerate(pace):
        who = wi.ORDER[i % len(wi.ORDER)]
        blocks.append({"who": who, "mean_ms": p * (1.02 if who == "W" else 1.0)})
    assert [b["who"] for b in blocks] == ["W", "B", "B", "W"] * 2
    ratios = wi.pair_ratios(blocks, "mean_ms")
    assert len(ratios) == 4
    assert ratios[0] == pytest.approx(1.02 * 1.0 / 1.1)  # W first, then B: W looks faster
    assert ratios[1] == pytest.approx(1.02 * 1.3 / 1.2)  # B first, then W: W looks slower
    assert sum(ratios) / len(ratios) == pytest.approx(1.02, abs=0.01)
    assert wi.pair_ratios(blocks[:1], "mean_ms") == []  # an unpaired block counts for nothing


@pytest.mark.parametrize(
    ("control", "part"),
    [(False, "watched"), (True, "watched"), (False, "minimal"), (False, "raw_hooks")],
)
def test_a_short_cpu_run_writes_its_table_and_restores_everything(
    wi: ModuleType, tmp_path: Path, control: bool, part: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch
    from gpusight.watch import session
    from gpusight.watch.session import Watch

    flags = (torch.get_num_threads(), torch.is_grad_enabled())
    cores = os.sched_getaffinity(0)
    argv = ["--workload", "tiny_batch", "--pairs", "4", "--block-steps", "3"]
    argv += ["--warm-steps", "24", "--out", str(tmp_path), "--part", part]
    wrap_copy = Watch._wrap_copy  # "minimal" leaves Tensor.to unwrapped for its run only
    # The control runs both timing threads on one core; the main thread gets its cores back.
    assert wi.main([*argv, "--control", "--core", str(min(cores))] if control else argv) == 0
    assert os.sched_getaffinity(0) == cores
    result = json.loads((tmp_path / "watch-interleaved.json").read_text())
    assert [b["who"] for b in result["blocks"]] == ["W", "B", "B", "W"] * 2
    assert all(b["mean_ms"] > 0 and b["cpu_ms"] >= 0 for b in result["blocks"])
    assert result["restore_problems"] == [] and result["watch_error"] is None
    assert "mean_pct" in result and "median_pct" in result
    if control:
        assert result["measured_steps"] == 0 and result["detail_every"] is None
        assert result["core"] == min(cores)
    elif part == "raw_hooks":
        assert result["measured_steps"] == 0  # no watch: the two hooks alone
    else:
        # The watched thread's steps past the watch's warm-up, all of them measured.
        assert result["measured_steps"] == 24 - 3 + 4 * 3 and result["self_us"] > 0
    text = (tmp_path / "watch-interleaved.txt").read_text()
    assert text.splitlines()[0].startswith("watch interleaved on cpu")
    assert text in capsys.readouterr().out
    assert session._ACTIVE is None  # the watch is gone
    assert Watch._wrap_copy is wrap_copy and result["part"] == part
    assert (f"part {part!r}" in text) is (part not in ("watched", "raw_hooks"))
    assert ("no watch; two do-nothing hooks" in text) is (part == "raw_hooks")
    assert (torch.get_num_threads(), torch.is_grad_enabled()) == flags


def test_raw_hooks_are_registered_as_the_watch_registers_them_and_removed(wi: ModuleType) -> None:
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    first = model.register_forward_pre_hook(lambda m, a: None)
    with wi.raw_hooks(model):
        pre = list(model._forward_pre_hooks)
        assert len(pre) == 2 and pre[0] != first.id  # the benchmark's pre-hook runs first
        assert len(model._forward_hooks) == 1 and len(model._forward_hooks_always_called) == 1
        model(torch.zeros(1, 2))
    assert list(model._forward_pre_hooks) == [first.id] and not model._forward_hooks
