"""Another model's calls (a teacher, a GAN's other half) told from the main model's own,
through a real watch on CPU torch: the former are the step's computation, the latter (a
validation batch every step) the user's work."""

from __future__ import annotations

import torch


def test_the_watch_tells_another_models_calls_from_the_main_models_own() -> None:
    """A teacher's call is the step's computation (``model_calls``); the main model's own call
    on a validation batch every step stays the user's work."""
    import os

    from gpusight.watch.code_sources import forward_site, model_calls
    from gpusight.watch.session import Watch
    from torch import nn

    student = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
    teacher = nn.Sequential(nn.Linear(16, 4))
    opt = torch.optim.SGD(student.parameters(), lr=0.01)
    x, xv = torch.randn(8, 16), torch.randn(8, 16)
    lines: dict[str, int] = {}
    with Watch(steps=6, warmup=2, profile_steps=0) as w:
        while True:
            lines["teacher"] = _here() + 1
            target = teacher(x).softmax(-1).detach()
            lines["student"] = _here() + 1
            out = student(x)
            loss = nn.functional.kl_div(out.log_softmax(-1), target, reduction="batchmean")
            opt.zero_grad()
            loss.backward()
            opt.step()
            lines["val"] = _here() + 1
            val = student(xv).sum().item()
            assert val == val
    site = forward_site(w)
    assert site is not None and site.line == lines["student"]
    name = os.path.basename(__file__)
    calls = model_calls(w)
    assert (name, lines["teacher"]) in calls
    assert (name, lines["student"]) not in calls and (name, lines["val"]) not in calls


def _here() -> int:
    import sys

    return sys._getframe(1).f_lineno
