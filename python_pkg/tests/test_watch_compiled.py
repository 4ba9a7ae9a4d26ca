"""A watched torch.compile program is the user's program: the watch's hooks never break its
graph, and the one recompile that taking the warm-up's global hooks off causes lands in one
more warm-up step. Real CPU torch, dynamo's eager backend (no C++ compiler needed)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import pytest
import torch
import torch._dynamo
from gpusight.watch.session import Watch
from torch import nn
from torch._dynamo.utils import counters
from watch_support import small_model, snapshot

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

STEPS = 40
WARMUP = 3


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()
    counters.clear()


def _breaks() -> int:
    return sum(counters["graph_break"].values())


def _graphs() -> int:
    return int(counters["stats"]["unique_graphs"])


def _compiled() -> int:
    """Graphs and frames compiled (a module compiled in place can compile frames and count no
    graph): what the watch's one extra warm-up step follows."""
    return _graphs() + int(counters["frames"]["ok"])


def _training(how: str) -> Callable[[], None]:
    torch.manual_seed(0)
    model = small_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(4, 32), torch.randn(4, 4)
    if how == "module":
        call: Callable[[torch.Tensor], torch.Tensor] = torch.compile(model, backend="eager")
    elif how == "in_place":
        model.compile(backend="eager")
        call = model
    else:  # a compiled function that calls the model and the loss
        call = torch.compile(lambda t: model(t), backend="eager")

    def step() -> None:
        loss = nn.functional.mse_loss(call(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return step


def _inference(how: str) -> Callable[[], None]:
    torch.manual_seed(0)
    model = small_model().eval()
    x = torch.randn(4, 32)
    call: Any = (
        torch.compile(model, backend="eager")
        if how == "module"
        else torch.compile(lambda t: model(t), backend="eager")
    )

    def step() -> None:
        with torch.no_grad():
            call(x)

    return step


def _bare_then_watched(make: Callable[[], Callable[[], None]]) -> tuple[int, Watch]:
    """The graphs a bare run compiles; then the same program watched (from a fresh dynamo).
    ``_COMPILED_AFTER`` holds what had been compiled after each watched step."""
    step = make()
    for _ in range(STEPS):
        step()
    assert _breaks() == 0
    graphs = _graphs()
    torch._dynamo.reset()
    counters.clear()
    step = make()
    w = Watch(warmup=WARMUP, profile_steps=0, stop_after_steps=False, device_types=("meta",))
    _COMPILED_AFTER.clear()
    with w:
        for _ in range(STEPS):
            step()
            _COMPILED_AFTER.append(_compiled())
    return graphs, w


_COMPILED_AFTER: list[int] = []


def _nothing_compiled_while_measured(measured: int) -> bool:
    """A recompile costs tens of milliseconds against a step of under one here: the measured
    steps (the last ``measured`` ones) must not hold one. Counted, not timed: a 2-core CI
    machine stalls a step by 10x now and then."""
    return _COMPILED_AFTER[STEPS - measured - 1] == _COMPILED_AFTER[-1]


@pytest.mark.parametrize("how", ["module", "in_place", "function"])
def test_a_compiled_training_step_keeps_its_graph_and_its_steps(how: str) -> None:
    before = snapshot()
    graphs, w = _bare_then_watched(lambda: _training(how))
    assert _breaks() == 0  # before the hooks asked is_compiling first, 4 to 9 here
    # The same graphs, and at most one more: dynamo guards on the global module hooks, which
    # come off after the warm-up's first steps.
    assert graphs <= _graphs() <= graphs + 1
    rec = w.recorder
    assert rec is not None and rec.kind == "optimizer"
    measured = [r.duration_ns for r in rec.records if r.phase == "measure"]
    # Where anything was compiled, one more warm-up step takes the recompile (tens of ms here
    # against a step of about 1 ms).
    assert len(measured) == STEPS - WARMUP - (_compiled() > 0)
    assert _nothing_compiled_while_measured(len(measured))
    assert snapshot() == before


def test_without_a_warm_up_no_step_becomes_one() -> None:
    """``warmup=0`` measures from the first step: the recompile is measured, as asked."""
    step = _training("module")
    w = Watch(warmup=0, profile_steps=0, stop_after_steps=False, device_types=("meta",))
    with w:
        for _ in range(STEPS):
            step()
    rec = w.recorder
    assert rec is not None and rec.warmup == 0 and _graphs() > 0
    assert sum(r.phase == "measure" for r in rec.records) == STEPS


def test_a_compiled_model_called_from_python_is_the_inference_step() -> None:
    graphs, w = _bare_then_watched(lambda: _inference("module"))
    assert _breaks() == 0 and _graphs() <= graphs + 1
    rec = w.recorder
    assert rec is not None and rec.kind == "forward"
    measured = [r.duration_ns for r in rec.records if r.phase == "measure"]
    assert len(measured) == STEPS - WARMUP - 1
    assert _nothing_compiled_while_measured(len(measured))


def test_a_model_called_inside_compiled_inference_is_one_step_and_the_report_says_why() -> None:
    graphs, w = _bare_then_watched(lambda: _inference("function"))
    assert _breaks() == 0 and _graphs() <= graphs + 1
    assert w.recorder is not None and w.recorder.kind is None
    report = w.report
    assert report is not None and report.run["steps"] == 1
    note = next(n for n in report.notes if n.startswith("no optimizer step"))
    assert "torch.compile(model)" in note and "compiled graphs" in note


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_the_gpu_a_compiled_training_step_keeps_its_graph() -> None:
    """With CUDA the watch adds sync-debug mode, the copy wrapper and the sampler process; none
    of them may break the graph either (AOT autograd's eager backend: no kernels to compile)."""
    dev = torch.device("cuda")

    def make() -> Callable[[], None]:
        torch.manual_seed(0)
        model = small_model().to(dev)
        call = torch.compile(model, backend="aot_eager")
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        x, y = torch.randn(4, 32), torch.randn(4, 4)

        def step() -> None:
            loss = nn.functional.mse_loss(call(x.to(dev)), y.to(dev))
            opt.zero_grad()
            loss.backward()
            opt.step()

        return step

    graphs, w = _bare_then_watched(make)
    assert _breaks() == 0 and graphs <= _graphs() <= graphs + 1
    rec = w.recorder
    assert rec is not None and rec.kind == "optimizer"
    assert sum(r.phase == "measure" for r in rec.records) == STEPS - WARMUP - (_compiled() > 0)


def _compile_warnings(user_hook: bool) -> tuple[list[str], bool]:
    """The global-hooks warnings a torch.compile'd module gives while watched, and whether the
    warnings filters were as found afterwards."""
    import warnings

    from torch.nn.modules import module as nn_module

    handle = nn_module.register_module_forward_hook(lambda m, a, o: None) if user_hook else None
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            filters = list(warnings.filters)
            step = _training("module")
            with Watch(warmup=WARMUP, profile_steps=0, stop_after_steps=False):
                for _ in range(8):
                    step()
            restored = warnings.filters == filters
    finally:
        if handle is not None:
            handle.remove()
    return [str(w.message) for w in seen if "global hooks on modules" in str(w.message)], restored


def test_the_watchs_own_global_hooks_give_torch_compile_no_warning() -> None:
    """torch warns at each call of a compiled module while any global module hook is on, as the
    watch's are through its warm-up: that warning would be about the watch, not the script."""
    found, restored = _compile_warnings(user_hook=False)
    assert found == [] and restored


def test_a_users_own_global_hook_still_gets_torch_compiles_warning() -> None:
    found, restored = _compile_warnings(user_hook=True)
    assert found and restored


def test_a_model_compiled_in_place_before_the_watch_is_found_where_the_code_holds_it() -> None:
    """``model.compile()`` runs the model's hooks inside its compiled call, traced, where they
    stand aside; a model compiled before the watch began (an earlier notebook cell) is found
    among the names of the code that started the watch, and seen around its compiled call."""
    model = small_model().eval()
    model.compile(backend="eager")
    theirs = vars(model)["_compiled_call_impl"]
    x = torch.randn(4, 32)
    with torch.no_grad():
        model(x)
    w = Watch(warmup=WARMUP, profile_steps=0, stop_after_steps=False, device_types=("meta",))
    with w, torch.no_grad():
        for _ in range(STEPS):
            model(x)
    assert _breaks() == 0
    rec = w.recorder
    assert rec is not None and rec.kind == "forward" and len(rec.records) == STEPS
    assert vars(model)["_compiled_call_impl"] is theirs
    assert not model._forward_hooks and not model._forward_pre_hooks


class _Touchy:
    """A name's value that raises when asked its class (a lazy proxy, say)."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        raise RuntimeError("not now")


class _Lazy:
    """A proxy that does its work (an import, say) on the first attribute it is asked for."""

    __slots__ = ()
    asked: ClassVar[list[str]] = []

    def __getattr__(self, name: str) -> object:
        _Lazy.asked.append(name)
        raise AttributeError(name)


def test_the_namespaces_given_are_looked_through_and_odd_values_skipped() -> None:
    model = small_model().eval()
    model.compile(backend="eager")
    x = torch.randn(4, 32)
    spaces = [{"odd": _Touchy(), "lazy": _Lazy(), "models": [model]}]
    w = Watch(warmup=WARMUP, profile_steps=0, stop_after_steps=False, namespaces=spaces)
    with w, torch.no_grad():
        for _ in range(STEPS):
            model(x)
    rec = w.recorder
    assert rec is not None and rec.kind == "forward" and len(rec.records) == STEPS
    assert _Lazy.asked == []  # looking through it asked the proxy for nothing


class _Holder:
    def __init__(self, model: nn.Module) -> None:
        self.model = model


def test_a_model_compiled_in_place_held_by_an_object_is_found() -> None:
    """One level into the names' values: a pipeline-like object's ``.model``."""
    holder = _Holder(small_model().eval())
    holder.model.compile(backend="eager")
    x = torch.randn(4, 32)
    w = Watch(warmup=WARMUP, profile_steps=0, stop_after_steps=False, device_types=("meta",))
    with w, torch.no_grad():
        for _ in range(STEPS):
            holder.model(x)
    rec = w.recorder
    assert rec is not None and rec.kind == "forward" and len(rec.records) == STEPS


def test_a_model_compiled_in_place_held_deeper_is_not_seen_and_the_report_says_why() -> None:
    """Only the names and one level into them are looked through: a model two levels down is
    not found, and the report says what to do. (Its frames compile without a graph counted: the
    watch counts frames too.)"""
    holders = {"main": _Holder(small_model().eval())}
    holders["main"].model.compile(backend="eager")
    x = torch.randn(4, 32)
    w = Watch(warmup=WARMUP, profile_steps=0, stop_after_steps=False, device_types=("meta",))
    with w, torch.no_grad():
        for _ in range(STEPS):
            holders["main"].model(x)
    assert w.recorder is not None and w.recorder.kind is None
    report = w.report
    assert report is not None
    note = next(n for n in report.notes if n.startswith("no optimizer step"))
    assert "model.compile() in place" in note and "torch.compile(model)" in note


def test_a_model_compiled_in_place_while_watched_is_seen_around_its_compiled_call() -> None:
    """As ``gpusight run`` and a cell that compiles the model meet it: the watch wraps the
    compiled call it just made, so each call is a step, and the compiled call is the user's
    again afterwards."""
    model = small_model().eval()
    x = torch.randn(4, 32)
    w = Watch(warmup=WARMUP, profile_steps=0, stop_after_steps=False, device_types=("meta",))
    with w, torch.no_grad():
        model.compile(backend="eager")
        for _ in range(STEPS):
            model(x)
    assert _breaks() == 0
    rec = w.recorder
    assert rec is not None and rec.kind == "forward" and len(rec.records) == STEPS
    measured = [r for r in rec.records if r.phase == "measure"]
    assert measured and all(r.full and r.framework_ns > 0 for r in measured)
    theirs = vars(model)["_compiled_call_impl"]  # torch.compile's, ours came out
    assert theirs is not None and "gpusight" not in getattr(theirs, "__module__", "")
    with torch.no_grad():
        assert torch.equal(model(x), model._call_impl(x))
    assert not model._forward_hooks and not model._forward_pre_hooks


def test_blocks_compiled_in_place_inside_a_model_lose_their_shims_after_the_warm_up() -> None:
    """Compiling each block in place is common; the shims around their compiled calls find the
    steps of a model that is itself compiled, but on blocks of a plain model they would time
    every block's call: after the warm-up only the outermost module keeps anything of ours."""
    blocks = [nn.Linear(32, 32) for _ in range(3)]
    model = nn.Sequential(*blocks).eval()
    x = torch.randn(4, 32)
    w = Watch(warmup=WARMUP, profile_steps=0, stop_after_steps=False, device_types=("meta",))
    attr = "_compiled_call_impl"
    with w, torch.no_grad():
        for block in blocks:
            block.compile(backend="eager")
        for _ in range(STEPS):
            model(x)
        mine = [b for b in blocks if "gpusight" in getattr(vars(b)[attr], "__module__", "")]
    assert mine == []
    rec = w.recorder
    assert rec is not None and rec.kind == "forward" and len(rec.records) == STEPS
    assert all("gpusight" not in getattr(vars(b)[attr], "__module__", "") for b in blocks)
