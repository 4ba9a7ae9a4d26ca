"""Which model call ends a step, where an inference loop calls several models in turn
(``watch/call_cycle.py``): an encoder and a decoder make one step an iteration, not two. Real
CPU torch."""

from __future__ import annotations

import torch
from gpusight.watch.call_cycle import MAX_PERIOD, Cycle, find_cycle
from gpusight.watch.session import Watch
from torch import nn
from watch_support import small_model, snapshot


def test_the_shortest_round_seen_twice() -> None:
    a, b, c = 1, 2, 3
    assert find_cycle([a]) is None
    assert find_cycle([a, a]) == Cycle(1, None)
    assert find_cycle([a, b, a]) is None  # not yet seen twice
    assert find_cycle([a, b, a, b]) == Cycle(2, b)
    assert find_cycle([a, a, b, a, a]) is None
    assert find_cycle([a, a, b, a, a, b]) == Cycle(3, b)
    assert find_cycle([a, b, c, a, b, c]) == Cycle(3, c)
    # A round whose last module is called earlier in it too: its calls cannot mark the end.
    assert find_cycle([a, b, b, a, b, b]) == Cycle(1, None)
    # No round within reach (a decode loop whose length varies): each call ends a step.
    ragged = [a, b, b, a, b, a, b, b, b, a, b, b, a, b, b, b]
    assert len(ragged) == 2 * MAX_PERIOD
    assert find_cycle(ragged) == Cycle(1, None)


def _encoder_decoder() -> tuple[nn.Module, nn.Module]:
    enc = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 16)).eval()
    dec = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4)).eval()
    return enc, dec


def test_an_encoder_then_a_decoder_is_one_step() -> None:
    before = snapshot()
    enc, dec = _encoder_decoder()
    x = torch.randn(8, 32)
    w = Watch(warmup=2, profile_steps=0, stop_after_steps=False, device_types=("meta",))
    with w, torch.no_grad():
        for _ in range(60):
            dec(enc(x))
    assert snapshot() == before
    rec = w.recorder
    assert rec is not None and rec.kind == "forward"
    # Four calls of warm-up (two rounds: the round is known once seen twice), then a step a
    # round.
    assert rec.warmup == 4
    assert rec.measured == 60 - 2
    rep = w.report
    assert rep is not None and rep.run is not None
    rep.validate()
    assert rep.run["steps"] == 60 - 2
    assert any("calls 2 models in turn (Sequential, Sequential)" in n for n in rep.notes)


def test_one_model_keeps_its_warm_up_and_a_step_a_call() -> None:
    model = small_model().eval()
    x = torch.randn(8, 32)
    w = Watch(warmup=2, profile_steps=0, stop_after_steps=False, device_types=("meta",))
    with w, torch.no_grad():
        for _ in range(60):
            model(x)
    rec = w.recorder
    assert rec is not None and rec.warmup == 2 and rec.measured == 58
    assert w.report is not None and not any("in turn" in n for n in w.report.notes)


def test_a_warm_up_of_one_call_leaves_the_first_model_to_end_the_steps() -> None:
    """With one warm-up step the hooks move to the outermost modules seen by then (the
    encoder); the decoder, first called after, is not hooked, and the encoder's calls end the
    steps: still a step a round, and the warm-up as asked."""
    enc, dec = _encoder_decoder()
    x = torch.randn(8, 32)
    w = Watch(warmup=1, profile_steps=0, stop_after_steps=False, device_types=("meta",))
    with w, torch.no_grad():
        for _ in range(30):
            dec(enc(x))
    rec = w.recorder
    assert rec is not None and rec.warmup == 1
    assert rec.measured == 30 - 1


def test_a_training_loop_that_calls_two_models_keeps_its_warm_up() -> None:
    """A GAN's first iteration calls the generator and the critic before any backward: the
    warm-up the round-finding added goes once a backward ends the steps."""
    gen, critic = small_model(), nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = torch.optim.SGD(critic.parameters(), lr=0.01)
    x = torch.randn(8, 32)
    w = Watch(warmup=2, profile_steps=0, stop_after_steps=False, device_types=("meta",))
    with w:
        for _ in range(30):
            opt.zero_grad()
            critic(gen(x).detach()).mean().backward()
            opt.step()
    rec = w.recorder
    assert rec is not None and rec.kind == "optimizer"
    assert rec.warmup == 2 and rec.measured == 28


def test_a_round_whose_last_model_is_not_hooked_leaves_a_step_a_call() -> None:
    """Only the first ``MAX_TOP_MODULES`` outermost modules are hooked after the warm-up: a
    round ended by another would end no step, so each call ends one (and naming it is no
    error)."""
    model = small_model()
    w = Watch(warmup=2, profile_steps=0, stop_after_steps=False, device_types=("meta",))
    w._top_modules = {1: model}
    for key in (1, 2, 1, 2):
        w._note_call(key)
    assert w._cycle == Cycle(1, None) and w._closer is None
