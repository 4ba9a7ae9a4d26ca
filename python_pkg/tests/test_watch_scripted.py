"""A TorchScript model under the watch (``torch.jit.script``, ``torch.jit.load``): it takes no
hooks, so its calls are timed from a call shim; a re-run's change around its calls says why it
cannot reach it. Real CPU torch."""

from __future__ import annotations

from typing import Any

import torch
from gpusight.knobs import by_name
from gpusight.knobs.base import SCRIPTED_MODEL
from gpusight.watch.session import Watch
from torch import nn
from watch_support import small_model, snapshot


def _scripted() -> Any:
    torch.manual_seed(0)
    return torch.jit.script(small_model())


def test_a_scripted_model_trains_under_the_watch_with_its_forward_timed() -> None:
    before = snapshot()
    model = _scripted()
    w = Watch(warmup=2, profile_steps=0, stop_after_steps=False, device_types=("meta",))
    with w:
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x, y = torch.randn(4, 32), torch.randn(4, 4)
        for _ in range(60):
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert snapshot() == before
    assert vars(model).get("_compiled_call_impl") is None  # the shim came out
    rec = w.recorder
    assert rec is not None and rec.kind == "optimizer"
    assert len([r for r in rec.records if r.phase == "measure"]) >= 20
    info = w.collected.modules.get(id(model))
    assert info is not None and info.forward_ns > 0  # its calls were timed as the model's
    rep = w.report
    assert rep is not None and rep.run is not None and "error" not in rep.run
    rep.validate()


def test_a_scripted_model_in_an_inference_loop_ends_the_steps() -> None:
    model = _scripted().eval()
    w = Watch(warmup=2, profile_steps=0, stop_after_steps=False, device_types=("meta",))
    with w, torch.no_grad():
        for _ in range(80):
            model(torch.randn(4, 32))
    rec = w.recorder
    assert rec is not None and rec.kind == "forward"
    assert len([r for r in rec.records if r.phase == "measure"]) >= 20
    assert vars(model).get("_compiled_call_impl") is None


def test_a_change_around_a_scripted_models_calls_says_why_it_did_not_run() -> None:
    knob = by_name("batch")
    assert knob is not None
    facts = {"injected": {}, "inject_notes": [SCRIPTED_MODEL]}
    why = knob.took_effect(facts, {"replicate": 4})
    assert why == SCRIPTED_MODEL
    assert knob.took_effect({"injected": {}}, {"replicate": 4}) != SCRIPTED_MODEL
