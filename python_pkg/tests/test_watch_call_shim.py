"""call_shim.py: a function after each call of a module, through ``_compiled_call_impl``, with
the module's own call and its hooks untouched. Real CPU torch."""

from __future__ import annotations

import pytest
import torch
from gpusight.watch import call_shim
from torch import nn


def _never() -> bool:
    return False


def test_the_wrapper_sees_every_call_raising_or_not_and_goes_as_it_came() -> None:
    model = nn.Linear(3, 2)
    assert "_compiled_call_impl" not in vars(model)
    ended: list[nn.Module] = []
    hooked: list[int] = []
    model.register_forward_hook(lambda m, a, o: hooked.append(1))  # the user's own hook
    shim = call_shim.install(model, ended.append, _never)
    assert shim is not None
    x = torch.randn(4, 3)
    assert torch.equal(model(x), nn.functional.linear(x, model.weight, model.bias))
    with pytest.raises(RuntimeError):
        model(torch.randn(4, 5))  # a shape error inside the call
    assert ended == [model, model] and hooked == [1]
    call_shim.remove(shim)
    assert "_compiled_call_impl" not in vars(model)
    model(x)
    assert len(ended) == 2  # nothing of ours left on the call


def test_under_compilation_the_wrapper_is_the_bare_call() -> None:
    model = nn.Linear(3, 2)
    ended: list[nn.Module] = []
    shim = call_shim.install(model, ended.append, lambda: True)
    assert shim is not None
    model(torch.randn(1, 3))
    assert ended == []
    call_shim.remove(shim)


def test_modules_called_another_way_are_left_alone() -> None:
    class OwnCall(nn.Linear):
        def __call__(self, *args: object, **kwargs: object) -> object:
            return super().__call__(*args, **kwargs)

    assert call_shim.install(OwnCall(3, 2), lambda m: None, _never) is None
    compiled = nn.Linear(3, 2)
    vars(compiled)["_compiled_call_impl"] = compiled._call_impl  # where model.compile() puts it
    assert call_shim.install(compiled, lambda m: None, _never) is None


def test_remove_puts_back_an_attribute_that_was_there_and_leaves_a_replacement() -> None:
    model = nn.Linear(3, 2)
    vars(model)["_compiled_call_impl"] = None
    shim = call_shim.install(model, lambda m: None, _never)
    assert shim is not None and shim.had_attr
    call_shim.remove(shim)
    assert "_compiled_call_impl" in vars(model) and model._compiled_call_impl is None
    other = call_shim.install(model, lambda m: None, _never)
    assert other is not None
    theirs = model._call_impl
    vars(model)["_compiled_call_impl"] = theirs  # model.compile() after us
    call_shim.remove(other)
    assert vars(model)["_compiled_call_impl"] is theirs


def test_around_a_compiled_call_it_runs_before_and_after_and_gives_the_call_back() -> None:
    model = nn.Linear(3, 2)
    theirs = model._call_impl
    vars(model)["_compiled_call_impl"] = theirs  # where model.compile() puts its call
    events: list[str] = []
    shim = call_shim.install(
        model,
        lambda m: events.append("after"),
        _never,
        before=lambda m, args: events.append(f"before {len(args)}"),
        around=True,
    )
    assert shim is not None and shim.previous is theirs
    model(torch.randn(1, 3))
    assert events == ["before 1", "after"]
    call_shim.remove(shim)
    assert vars(model)["_compiled_call_impl"] is theirs
    # Not around a call that is not there.
    assert call_shim.install(nn.Linear(3, 2), lambda m: None, _never, around=True) is None


def test_a_stand_in_takes_the_wrappers_place_until_the_run_ends_or_the_shim_goes() -> None:
    model = nn.Linear(3, 2)
    ends: list[str] = []
    shim = call_shim.install(model, lambda m: ends.append("shim"), lambda: False)
    assert shim is not None
    x = torch.randn(1, 3)
    expected = model._call_impl(x)

    def stand_in(*args: object, **kwargs: object) -> object:
        ends.append("stand-in")
        return call_shim.target(shim)(*args, **kwargs)

    call_shim.stand_in(shim, stand_in)
    assert torch.equal(model(x), expected) and ends == ["stand-in"]
    call_shim.end_run(shim)
    model(x)
    assert ends == ["stand-in", "shim"]
    call_shim.end_run(shim)  # no stand-in in place: nothing to do
    assert vars(model)[call_shim.ATTR] is shim.wrapper
    call_shim.stand_in(shim, stand_in)
    call_shim.remove(shim)  # the stand-in goes with the shim
    assert call_shim.ATTR not in vars(model)
    model(x)
    assert ends == ["stand-in", "shim"]
