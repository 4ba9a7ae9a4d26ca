"""A watched model copied or saved mid-run: ``copy.deepcopy(model)`` (a teacher or EMA copy)
and ``torch.save(model)`` work as they do unwatched, and the copy carries no watch. Real CPU
torch through ``gpusight run``."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path

import pytest
import torch
from gpusight.hook_copies import WatchHook, unwatched

TEACHER = """\
import copy
import sys

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(40):
    x = torch.randn(8, 16)
    teacher = copy.deepcopy(model).eval()
    # A copy carries no watch (the watch may hook it later, as any model it sees called).
    hooks = [*teacher._forward_pre_hooks.values(), *teacher._forward_hooks.values()]
    assert all(getattr(h, "__name__", "") == "unwatched" for h in hooks), hooks
    with torch.no_grad():
        target = teacher(x).softmax(-1)
        assert torch.equal(teacher(x), model(x))  # the same weights, computing the same
    out = model(x)
    loss = nn.functional.kl_div(out.log_softmax(-1), target, reduction="batchmean")
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step == 30:
        torch.save(model, "model.pt")
        torch.save(model.state_dict(), "weights.pt")
print("done", file=sys.stderr)
"""


def _ran_whole(tmp_path: Path, source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The script ran to its end under ``gpusight run`` (``test_host_lines``' helper), with no
    error: what it wrote is there to read."""
    from test_host_lines import _run

    rep = _run(tmp_path, source, monkeypatch)
    assert "error" not in rep["run"], rep["run"].get("error")
    assert rep["run"]["steps"] >= 8


def test_a_hook_copies_and_pickles_as_one_that_does_nothing() -> None:
    calls: list[int] = []
    hook = WatchHook(lambda *a: calls.append(len(a)))
    hook(1, 2)
    assert calls == [2]
    assert copy.deepcopy(hook) is unwatched
    assert pickle.loads(pickle.dumps(hook)) is unwatched
    assert unwatched(1, 2, kw=3) is None


def test_a_model_deep_copied_and_saved_mid_run_works_as_unwatched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ran_whole(tmp_path, TEACHER, monkeypatch)
    saved = torch.load(tmp_path / "model.pt", weights_only=False)
    weights = torch.load(tmp_path / "weights.pt")
    for name, p in saved.state_dict().items():
        assert torch.equal(p, weights[name])
    x = torch.randn(2, 16)
    assert saved(x).shape == (2, 4)  # its hooks do nothing


SCRIPTED = """\
import sys

import torch
from torch import nn

@torch.jit.script
def doubled(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@torch.jit.script
class Running:
    def __init__(self, total: torch.Tensor):
        self.total = total

    def add(self, x: torch.Tensor) -> torch.Tensor:
        # Names resolved in the scripting caller's frame: the script's ``torch``.
        self.total = self.total + torch.abs(x).sum()
        return self.total


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
running = Running(torch.zeros(()))
for step in range(40):
    x = torch.randn(8, 16)
    loss = doubled(model(x)).pow(2).mean()
    running.add(loss.detach())
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 5 == 0:  # an export every few steps, while the watch's hooks are on
        scripted = torch.jit.script(model)
        with torch.no_grad():
            assert torch.equal(scripted(x), model(x))
        scripted.save("model.pt")
print("done", file=sys.stderr)
"""


def test_a_model_scripted_mid_run_is_the_users_without_the_watchs_hooks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ran_whole(tmp_path, SCRIPTED, monkeypatch)
    loaded = torch.jit.load(str(tmp_path / "model.pt"))
    assert loaded(torch.randn(2, 16)).shape == (2, 4)
    assert torch.jit.script is torch.jit._script.script  # torch's own, back after the run


def test_the_watchs_hooks_are_set_aside_and_put_back_in_their_places() -> None:
    from gpusight.hook_copies import set_aside
    from torch import nn

    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    mine = model.register_forward_pre_hook(lambda m, a: None)
    ours = model.register_forward_pre_hook(WatchHook(lambda m, a: None), prepend=True)
    inner = model[0].register_forward_hook(WatchHook(lambda m, a, o: None))
    before = list(model._forward_pre_hooks)
    with set_aside(model):
        assert list(model._forward_pre_hooks) == [mine.id]
        assert not model[0]._forward_hooks
        later = model.register_forward_pre_hook(lambda m, a: None)
    assert list(model._forward_pre_hooks) == [*before, later.id]  # ours first again
    assert list(model[0]._forward_hooks) == [inner.id]
    ours.remove()
    assert list(model._forward_pre_hooks) == [mine.id, later.id]
