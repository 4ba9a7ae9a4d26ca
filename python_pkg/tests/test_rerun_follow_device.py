"""A moved model's outputs stay on its device and the script's host tensors follow them
(rerun/follow_device.py), on real torch: the ``meta`` device stands in for a GPU on the CPU."""

from __future__ import annotations

import time
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from gpusight.rerun.driver import Driver, RunResult
from gpusight.rerun.follow_device import FollowDevice
from gpusight.rerun.inject import install
from gpusight.rerun.plan import Arm
from torch import nn
from torch.overrides import TorchFunctionMode, _get_current_function_mode

META = torch.device("meta")


def test_host_labels_follow_the_outputs() -> None:
    model = nn.Linear(4, 3).to(META)
    labels = torch.randint(0, 3, (5,))
    mode = FollowDevice(META)
    out = model(torch.randn(5, 4).to(META))
    mode.enter()
    try:
        loss = F.cross_entropy(out, labels)  # would raise: meta and cpu in one op
        assert loss.device == META and mode.moved == 1
        scaled = loss * torch.tensor(2.0)  # a 0-dim host tensor mixes as it is
        assert scaled.device == META and mode.moved == 1
        scaled.backward()
        assert model.weight.grad is not None and model.weight.grad.device == META
        # Host-only work is the script's own: nothing is moved.
        assert (torch.ones(2) + torch.ones(2)).device.type == "cpu" and mode.moved == 1
    finally:
        mode.leave()
    assert _get_current_function_mode() is None


def test_a_mode_the_script_entered_since_is_not_popped() -> None:
    mode = FollowDevice(META)
    mode.enter()
    inner = TorchFunctionMode()
    inner.__enter__()
    try:
        mode.leave()  # not innermost: stays, and the script's mode is still on top
        assert _get_current_function_mode() is inner and mode.entered
    finally:
        inner.__exit__(None, None, None)
    mode.leave()
    assert _get_current_function_mode() is None and not mode.entered


def _runner(results: dict[bool, RunResult], seen: list[dict[str, Any]]) -> Any:
    def run(label: str, changes: dict[str, Any], profile: bool, timeout_s: float) -> RunResult:
        seen.append(dict(changes))
        return results[bool(changes.get("outputs_back"))]

    return run


def _ok(changes: dict[str, Any]) -> RunResult:
    run = {"steps": 20, "step_time_ms": 5.0, "items_per_step": 32, "step_times_ms": [5.0] * 20}
    return RunResult("moved", changes, True, 4.0, {"run": run}, {"injected": {"to_device": 1}})


def test_a_script_that_fails_with_outputs_on_the_gpu_is_measured_with_them_copied_back() -> None:
    arm = Arm("to_device", "model and batches on the GPU", {"to_device": "cuda"}, "code.cpu_model")
    failed = RunResult("moved", arm.changes, False, 3.0, error="the script failed: TypeError")
    seen: list[dict[str, Any]] = []
    driver = Driver(_runner({True: _ok({"to_device": "cuda", "outputs_back": True})}, seen),
                    budget_s=100.0)  # fmt: skip
    driver.t0 = time.monotonic()
    res = driver._outputs_back(arm, failed, _ok({}))
    assert seen == [{"to_device": "cuda", "outputs_back": True}]
    assert res.ok and res.first_error == "the script failed: TypeError"
    assert arm.changes == {"to_device": "cuda", "outputs_back": True}


def test_no_fallback_when_the_move_did_not_take_effect_or_the_budget_is_spent() -> None:
    arm = Arm("to_device", "model and batches on the GPU", {"to_device": "cuda"}, "code.cpu_model")
    seen: list[dict[str, Any]] = []
    driver = Driver(_runner({}, seen), budget_s=100.0)
    driver.t0 = time.monotonic()
    why = "the change did not take effect (the model was already there)"
    untaken = RunResult("m", arm.changes, False, 3.0, error=why)
    assert driver._outputs_back(arm, untaken, _ok({})) is untaken
    driver.t0 = time.monotonic() - 99.0  # 1 s left: the control's 4 s run does not fit
    crashed = RunResult("m", arm.changes, False, 3.0, error="the script failed")
    assert driver._outputs_back(arm, crashed, _ok({})) is crashed
    assert seen == [] and arm.changes == {"to_device": "cuda"}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a second device: CUDA")
def test_a_moved_model_trains_with_the_scripts_host_labels_metrics_and_numpy() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(8, 8), torch.randint(0, 3, (8,))
    total = torch.zeros(())
    correct = torch.zeros(3)
    inj = install({"to_device": "cuda"})
    try:
        for _ in range(4):
            out = model(x)
            loss = nn.functional.cross_entropy(out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.detach()  # after the step, in place on a host tensor: stays there
            correct[:3] += out.detach()[:3, 0]
            assert out.detach().numpy().shape == (8, 3)
        assert total.device.type == "cpu" and correct.device.type == "cpu"
        assert model[0].weight.device.type == "cuda"
        assert inj.applied["outputs_follow"] >= 3 and "outputs_back" not in inj.applied
    finally:
        inj.undo()
    assert _get_current_function_mode() is None
