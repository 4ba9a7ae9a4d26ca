"""Which optimizer's step ends a step (``watch/optimizer_clock.py``), in scripts that step more
than one: replaced optimizers, a new model per fold, a GAN's critic, wrapping optimizers. Real
CPU torch."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from gpusight.watch.optimizer_clock import STALE_AFTER, OptimizerClock
from gpusight.watch.session import Watch
from torch import nn
from watch_support import small_model, snapshot

WARMUP = 2


def _watch() -> Watch:
    return Watch(warmup=WARMUP, profile_steps=0, stop_after_steps=False, device_types=("meta",))


def _train(model: nn.Module, opt: torch.optim.Optimizer, steps: int) -> None:
    x, y = torch.randn(8, 32), torch.randint(0, 4, (8,))
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()


def _measured(w: Watch) -> list[float]:
    rec = w.recorder
    assert rec is not None and rec.kind == "optimizer"
    return [r.duration_ns / 1e6 for r in rec.records if r.phase == "measure"]


@pytest.mark.parametrize("head_first", [True, False])
def test_a_replaced_optimizer_hands_its_steps_over(head_first: bool) -> None:
    """Fine-tuning that makes a new optimizer over the whole model after training the head
    alone, still holding the old one: the new one's steps end the steps, and each of its steps
    is one. Over the same first parameter (the whole model both times) it is the same clock."""
    before = snapshot()
    model = small_model()
    head = model[-1]
    assert isinstance(head, nn.Module)
    first = torch.optim.Adam(head.parameters() if head_first else model.parameters())
    w = _watch()
    with w:
        _train(model, first, 20)
        second = torch.optim.SGD(model.parameters(), lr=0.01)
        _train(model, second, 60)
    assert snapshot() == before
    steps = _measured(w)
    assert len(steps) == 80 - WARMUP
    rep = w.report
    assert rep is not None and rep.run is not None
    rep.validate()
    assert rep.run["steps"] == 80 - WARMUP
    notes = [n for n in rep.notes if "stopped stepping" in n]
    if head_first:
        (note,) = notes
        assert "after step 20" in note and "same parameters (SGD)" in note
    else:
        assert notes == []
    assert first.state  # the old one is still held: what kept its id from being reused


def test_a_new_model_and_optimizer_per_fold_keep_every_step() -> None:
    """Cross-validation in one run: each fold's optimizer takes over from the last one's, over
    other parameters, after ``STALE_AFTER`` of its steps; those steps are steps of their own."""
    held: list[Any] = []
    w = _watch()
    with w:
        for _ in range(3):
            model = small_model()
            opt = torch.optim.Adam(model.parameters())
            held.append((model, opt))
            _train(model, opt, 40)
    steps = _measured(w)
    assert len(steps) == 120 - WARMUP
    rep = w.report
    assert rep is not None
    assert sum("stopped stepping" in n for n in rep.notes) == 2


def test_a_critic_stepping_more_often_keeps_the_first_clock_and_says_so() -> None:
    gen, critic = small_model(), nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
    opt_c = torch.optim.Adam(critic.parameters())
    opt_g = torch.optim.Adam(gen.parameters())
    x = torch.randn(8, 32)
    w = _watch()
    with w:
        for _ in range(40):
            for _ in range(3):
                opt_c.zero_grad()
                critic(gen(x).detach()).mean().backward()
                opt_c.step()
            opt_g.zero_grad()
            (-critic(gen(x)).mean()).backward()
            opt_g.step()
    assert len(_measured(w)) == 120 - WARMUP  # the critic's steps, as before
    rep = w.report
    assert rep is not None
    assert not any("stopped stepping" in n for n in rep.notes)
    (note,) = [n for n in rep.notes if "another (Adam) stepped" in n]
    assert "once every 3.0 steps" in note


class _Wrapping(torch.optim.Optimizer):
    """Lookahead-like: its step calls its base optimizer's."""

    def __init__(self, base: torch.optim.Optimizer) -> None:
        self.base = base
        super().__init__(base.param_groups[0]["params"], {})

    @torch.no_grad()
    def step(self, closure: Any = None) -> None:  # type: ignore[override]
        self.base.step(closure)


def test_a_wrapping_optimizer_and_its_base_change_nothing() -> None:
    model = small_model()
    opt = _Wrapping(torch.optim.SGD(model.parameters(), lr=0.01))
    w = _watch()
    with w:
        _train(model, opt, 60)
    assert len(_measured(w)) == 60 - WARMUP
    rep = w.report
    assert rep is not None
    assert not any("stopped stepping" in n or "another (" in n for n in rep.notes)


def test_optimizers_over_the_same_model_are_one_clock() -> None:
    """Reptile-like: an inner optimizer steps four times per outer step over the same
    parameters: each step of either ends a step, and nothing hands over."""
    model = small_model()
    inner = torch.optim.SGD(model.parameters(), lr=0.01)
    outer = torch.optim.SGD(model.parameters(), lr=0.001)
    w = _watch()
    with w:
        for _ in range(30):
            _train(model, inner, 4)
            outer.step()
    assert len(_measured(w)) == 150 - WARMUP
    rep = w.report
    assert rep is not None
    assert not any("stopped stepping" in n or "another (" in n for n in rep.notes)


@pytest.mark.parametrize("hold", [False, True])
def test_an_optimizer_made_every_step_ends_every_step(hold: bool) -> None:
    """A hand-written schedule that makes a new optimizer each step, the old ones dropped (their
    ids reused or not) or held in a list."""
    model = small_model()
    held = []
    x, y = torch.randn(8, 32), torch.randint(0, 4, (8,))
    w = _watch()
    with w:
        for i in range(60):
            opt = torch.optim.SGD(model.parameters(), lr=0.01 / (1 + i))
            if hold:
                held.append(opt)
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    steps = _measured(w)
    assert len(steps) == 60 - WARMUP
    rep = w.report
    assert rep is not None
    assert not any("stopped stepping" in n for n in rep.notes)


def test_a_step_that_raised_inside_the_optimizer_does_not_hide_later_steps() -> None:
    """An optimizer step that raised (its post-hook never ran), caught by the script: the next
    steps still end steps."""

    class Flaky(torch.optim.SGD):
        calls = 0

        @torch.no_grad()
        def step(self, closure: Any = None) -> Any:  # type: ignore[override]
            Flaky.calls += 1
            if Flaky.calls == 10:
                raise FloatingPointError("a bad batch")
            return super().step(closure)

    model = small_model()
    opt = Flaky(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 32), torch.randint(0, 4, (8,))
    w = _watch()
    with w:
        for _ in range(60):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            try:
                opt.step()
            except FloatingPointError:
                pass
    assert len(_measured(w)) == 59 - WARMUP
    assert w._opt_open == []


class _Opt:
    def __init__(self, *params: torch.Tensor) -> None:
        self.param_groups = [{"params": list(params)}]


def test_the_clock_hands_over_only_once_the_old_one_has_stopped() -> None:
    a, b = torch.zeros(1), torch.zeros(1)
    old, same, other = _Opt(a), _Opt(a, b), _Opt(b)
    clock = OptimizerClock()
    clock.start(old)
    assert clock.other_stepped(same, 5, 100) is None  # first seen
    handover = clock.other_stepped(same, 5, 200)  # again, and the old one has not stepped
    assert handover is not None and handover.why == "replaced" and handover.ends == [100]
    assert clock.key == id(same)
    # The old one back for a while: it has to stall the new one longer than it was stalled.
    assert clock.other_stepped(old, 6, 300) is None
    assert clock.other_stepped(old, 6, 400) is None
    assert clock.other_stepped(old, 6, 500) is None
    assert clock.key == id(same)

    clock = OptimizerClock()
    clock.start(old)
    for i in range(STALE_AFTER):
        assert clock.other_stepped(other, 7, i) is None
    handover = clock.other_stepped(other, 7, STALE_AFTER)
    assert handover is not None and handover.why == "stale"
    assert handover.ends == list(range(STALE_AFTER))


def test_a_regular_idle_run_raises_the_bar() -> None:
    """A critic that steps four times between the clock's steps never takes over by those."""
    a, b = torch.zeros(1), torch.zeros(1)
    clock = OptimizerClock()
    clock.start(_Opt(a))
    critic = _Opt(b)
    t = 0
    for cycle in range(1, 6):
        for _ in range(STALE_AFTER - 1):
            t += 1
            assert clock.other_stepped(critic, cycle, t) is None
    # Stalled now: it takes twice its longest idle run so far (6), and two more.
    longest = STALE_AFTER - 2
    t += 1
    assert clock.other_stepped(critic, 6, t) is None  # the clock stepped since its last
    for _ in range(2 * longest + 1):
        t += 1
        assert clock.other_stepped(critic, 6, t) is None
    got = clock.other_stepped(critic, 6, t + 1)
    assert got is not None and got.why == "stale" and len(got.ends) == 2 * longest + 2


@pytest.mark.parametrize("steps", [3, 200])
def test_the_first_optimizer_step_on_a_light_step_still_ends_steps(steps: int) -> None:
    """Forward-only steps first (inference-like, sampled light), then a training loop whose
    backward and optimizer steps appear: the optimizer's steps end the steps."""
    model = small_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(8, 32)
    w = _watch()
    with w:
        with torch.no_grad():
            for _ in range(steps):
                model(x)
        _train(model, opt, 40)
    rec = w.recorder
    assert rec is not None and rec.kind == "optimizer"
    assert rec.measured == 40 - WARMUP
