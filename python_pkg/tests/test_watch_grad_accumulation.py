"""gpusight.watch on a real CPU gradient-accumulation loop: an optimizer step over 8 micro-batches,
``loss.item()`` read on each, and the step split by the host's clocks where no kernel trace is."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import gpusight
import pytest
import torch
from gpusight.rules.workload import WorkloadEvidence, analyse, breakdown
from gpusight.watch import report_builder
from thread_support import one_thread  # noqa: F401 (autouse: one torch thread)
from torch import nn

MICRO = 8


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[WorkloadEvidence]:
    """The evidence the watch's report was analysed from (the real ``analyse`` still runs)."""
    got: list[WorkloadEvidence] = []

    def spy(ev: WorkloadEvidence) -> Any:
        got.append(ev)
        return analyse(ev)

    monkeypatch.setattr(report_builder, "analyse", spy)
    return got


def accumulate(steps: int, micro: int = MICRO) -> list[float]:
    """``steps`` optimizer steps of ``micro`` micro-batches each, the loss read every time."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU())
    head = nn.Linear(512, 10)
    opt = torch.optim.SGD([*model.parameters(), *head.parameters()], lr=0.01)
    x = torch.randn(micro, 32, 256)
    y = torch.randint(0, 10, (micro, 32))
    logged = []
    for _ in range(steps):
        total = 0.0
        for m in range(micro):
            loss = nn.functional.cross_entropy(head(model(x[m])), y[m]) / micro
            loss.backward()
            total += loss.item()  # a sync per micro-batch
        opt.step()
        opt.zero_grad(set_to_none=True)
        logged.append(total)
    return logged


def test_accumulation_without_a_kernel_trace_is_not_host_work(
    seen: list[WorkloadEvidence],
) -> None:
    # More warm-up and measured steps than micro-batches in an optimizer step: the first
    # optimizer step comes before the backward calls (the steps until then) could end the watch.
    with gpusight.watch(steps=8, warmup=2, profile_steps=0) as w:
        accumulate(steps=14)
    rep = w.report
    assert rep is not None and rep.run is not None
    ev = seen[-1]
    # The optimizer ends the steps, and each holds its 8 micro-batches' model calls.
    assert ev.step_mode == "optimizer"
    assert rep.run["steps"] >= 4
    step = sum(ev.step_times_ms) / len(ev.step_times_ms)
    inside = sum(ev.framework_ms) / len(ev.framework_ms)
    assert inside > 0.5 * step
    # The same host clocks, as on a GPU whose profiler window lost its kernels (CUPTI): NVML's
    # utilisation is all that says how busy it was.
    gpu = replace(ev, cuda_available=True, cuda_devices=1, gpu_used=True, nvml_util_pct=10.0)
    gpu.window = None
    split = breakdown(gpu)
    assert split["launch_overhead"] > split["other_cpu"]
    assert analyse(gpu).verdict.bottleneck != "host_cpu"


def test_fewer_steps_than_micro_batches_still_measure_optimizer_steps() -> None:
    # 1 warm-up, 1 + 2 profiled and 4 measured steps: the backward calls alone would end the
    # measuring before the first optimizer step, and the profiler window would have covered
    # micro-batches that the optimizer's first step then merged into one.
    with gpusight.watch(steps=4, warmup=1, profile_steps=2) as w:
        accumulate(steps=20)
    rep = w.report
    assert rep is not None and rep.run is not None
    rep.validate()
    kernels = rep.run["kernels"]
    assert kernels["step_mode"] == "optimizer"
    assert rep.run["steps"] == 4
    # The window ran again over optimizer steps: its profiled steps hold the model's ops.
    assert kernels["window_steps"] == 2
    assert kernels["cpu_op_ms_per_step"] > 0
    assert any("the window ran again over the new steps" in n for n in rep.notes)
