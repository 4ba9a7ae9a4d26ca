"""How far a step is from the GPU's limit (``watch/flop_step.py``, ``watch/speed_of_light.py``):
the FLOPs of a training step counted on the step after the measured ones, and MFU against the
ceilings, or the reason there is none. Real CPU torch."""

from __future__ import annotations

import pytest
import torch
from gpusight.report_schema import validate
from gpusight.text_report import render
from gpusight.watch.flop_step import CountedFlops, flops_blocked, precision_of
from gpusight.watch.session import Watch
from gpusight.watch.speed_of_light import speed_of_light, summary_line
from torch import nn
from torch.utils._python_dispatch import _get_current_dispatch_mode


def _mlp(width: int = 256, depth: int = 12) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(*[nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(depth)])


def _train(model: nn.Module, steps: int, batch: int, eval_every: int = 0) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(batch, 256)
    for i in range(steps):
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
        if eval_every and i % eval_every == eval_every - 1:
            model.eval()
            with torch.no_grad():
                for _ in range(4):
                    model(x)
            model.train()


def _watched(model: nn.Module, steps: int = 30, batch: int = 64, **kw: int) -> Watch:
    w = Watch(steps=6, warmup=2, profile_steps=0, stop_after_steps=False)
    with w:
        _train(model, steps, batch, **kw)
    return w


def test_the_flops_of_an_mlp_step_are_six_times_its_parameters_times_the_batch() -> None:
    model = _mlp()
    w = _watched(model)
    params = sum(p.numel() for p in model.parameters())
    counted = w.flops.result
    assert counted is not None and counted.unavailable is None
    # The counted step is past the measured ones; the first layer's input gradient is not
    # computed (the input needs none), 2 of its 6 FLOPs per weight and item.
    assert counted.step_index is not None and counted.step_index > 8
    assert counted.total == pytest.approx(6 * params * 64, rel=0.05)
    assert counted.by_precision.keys() == {"fp32"}
    assert _get_current_dispatch_mode() is None


def test_on_the_cpu_the_rate_is_given_and_mfu_is_absent_with_its_reason() -> None:
    w = _watched(_mlp())
    report = w.report.to_dict()  # type: ignore[union-attr]
    validate(report)
    sol = report["run"]["speed_of_light"]
    assert sol["achieved_tflops"] > 0
    assert sol["step_time_ms"] == pytest.approx(report["run"]["step_time_ms"], rel=0.2)
    assert sol["mfu_pct"] is None and sol["mfu_datasheet_pct"] is None
    assert "no GPU" in sol["unavailable"]
    text = render(report)
    assert "Speed of light" in text and "not given: the step ran on no GPU" in text


def test_a_step_that_held_an_evaluation_is_counted_again() -> None:
    # An evaluation after every 4th step: here the first step past the measured ones holds one
    # (its 4 forwards would add 2/3 to the count), so the next is counted.
    model = _mlp()
    w = _watched(model, steps=40, eval_every=4)
    params = sum(p.numel() for p in model.parameters())
    counted = w.flops.result
    assert counted is not None and counted.unavailable is None
    assert w.flops.tries == 2
    assert counted.total == pytest.approx(6 * params * 64, rel=0.05)


def test_a_run_that_ends_mid_count_leaves_no_mode_behind() -> None:
    model = _mlp()
    w = Watch(steps=6, warmup=2, profile_steps=0, stop_after_steps=False)
    with pytest.raises(RuntimeError, match="user's own"), w:
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        x = torch.randn(8, 256)
        for _ in range(40):
            opt.zero_grad()
            model(x).sum().backward()
            if w.flops.counting:
                raise RuntimeError("the user's own error, mid-step")
            opt.step()
    assert _get_current_dispatch_mode() is None
    sol = w.report.to_dict()["run"]["speed_of_light"]  # type: ignore[union-attr]
    assert sol == {"unavailable": "the run ended before the step after the measured ones did"}


def test_a_lean_watch_counts_nothing() -> None:
    w = Watch(steps=6, warmup=2, profile_steps=0, stop_after_steps=False, lean=True)
    with w:
        _train(_mlp(), 20, 8)
    assert w.flops.result is None
    assert "speed_of_light" not in w.report.to_dict()["run"]  # type: ignore[union-attr]


def test_mfu_against_measured_and_datasheet_ceilings_blends_precisions() -> None:
    counted = CountedFlops(by_precision={"bf16": 9e12, "fp32": 1e12}, step_index=20)
    sol = speed_of_light(
        counted, 100.0, "NVIDIA H200", {"bf16": (600.0, "measured"), "fp32": (50.0, "measured")}
    )
    assert sol is not None
    # 9e12 at 600 TFLOP/s and 1e12 at 50: 15 + 20 ms of a 100 ms step.
    assert sol["mfu_pct"] == pytest.approx(35.0)
    assert sol["achieved_tflops"] == pytest.approx(100.0)
    assert sol["precision"] == "bf16"
    # The datasheet's H200: dense bf16 989.5, fp32 67 TFLOP/s.
    assert 0 < sol["mfu_datasheet_pct"] < sol["mfu_pct"]
    assert "35% of the bf16 matrix rate measured on this GPU" in (summary_line(sol) or "")


def test_no_ceiling_for_the_main_precision_means_no_mfu_and_says_so() -> None:
    counted = CountedFlops(by_precision={"bf16": 1e12}, step_index=9)
    sol = speed_of_light(
        counted, 10.0, "Some Future GPU", {"bf16": (None, "the bf16 matmul could not run: OOM")}
    )
    assert sol is not None and sol["mfu_pct"] is None and sol["mfu_datasheet_pct"] is None
    assert "no bf16 ceiling is known for Some Future GPU" in sol["unavailable"]
    assert "OOM" in sol["unavailable"]


def test_what_cannot_be_counted_is_named() -> None:
    assert "compiled" in (flops_blocked([], compiled=True) or "")
    dp = nn.DataParallel(nn.Linear(2, 2))
    dp.device_ids = [0, 1]  # as on a two-GPU machine
    assert "threads" in (flops_blocked([dp], compiled=False) or "")
    assert flops_blocked([nn.Linear(2, 2)], compiled=False) is None


def test_float32_reads_as_tf32_only_where_the_flags_allow() -> None:
    flags = {
        "matmul.allow_tf32": False,
        "cudnn.allow_tf32": True,
        "float32_matmul_precision": "highest",
    }
    assert precision_of(torch.float32, conv=True, flags=flags) == "tf32"
    assert precision_of(torch.float32, conv=False, flags=flags) == "fp32"
    flags["float32_matmul_precision"] = "high"
    assert precision_of(torch.float32, conv=False, flags=flags) == "tf32"
    assert precision_of(torch.bfloat16, conv=False, flags={}) == "bf16"
