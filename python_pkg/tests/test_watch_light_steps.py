"""Light steps (``watch/detail.py``): on a short step the module hooks and framework clocks run on
1 in k steps; the other steps take the hooks off the model (a step that a model call ends keeps
its post-hook, the boundary). Real CPU torch."""

from __future__ import annotations

import itertools
import time

import pytest
import torch
from gpusight.watch import detail
from gpusight.watch.detail import DetailPlan, full_every_for
from gpusight.watch.host_lines import STEPS as LINE_STEPS
from gpusight.watch.recorder import StepRecord
from gpusight.watch.session import MAX_RUN, Watch
from torch import nn
from watch_support import measured_step, small_model, snapshot


def _step(ms: float, overhead_us: float, detail_us: float = 0.0) -> StepRecord:
    return measured_step(ms, detail_us=detail_us, hooks_us=overhead_us)


def test_full_every_keeps_the_hooks_within_their_budget() -> None:
    assert full_every_for(0.0) == 1
    assert full_every_for(detail.HOOK_BUDGET) == 1
    assert full_every_for(detail.HOOK_BUDGET * 3.5) == 4
    assert full_every_for(1.0) == detail.MAX_EVERY


def test_the_census_splits_the_hooks_cost_from_the_detail() -> None:
    # 30 us of hooks in a 2 ms step (1.5 %): sampled; the 1 us of detail is not.
    plan = DetailPlan()
    for _ in range(detail.CENSUS):
        plan.step_ended(_step(2.0, 30.0, detail_us=1.0))
    assert plan.every == 1
    assert plan.hook_share == pytest.approx(30e-3 / 2.0)
    assert plan.full_every == full_every_for(30e-3 / 2.0) == 15
    # The same hooks in a 50 ms step: every step.
    long = DetailPlan()
    for _ in range(detail.CENSUS):
        long.step_ended(_step(50.0, 30.0))
    assert long.full_every == 1 and long.next_full()


def _train(model: nn.Module, steps: int, sleep_s: float = 0.0, compile_at: int = -1) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(4, 32), torch.randn(4, 4)
    for i in range(steps):
        if i == compile_at:
            model._compiled_call_impl = model._call_impl  # where model.compile() puts its call
        if sleep_s:
            time.sleep(sleep_s)
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


def test_a_short_training_step_takes_the_hooks_off_on_most_steps_and_restores_all() -> None:
    before = snapshot()
    model = small_model()
    hooks_during: list[int] = []
    w = Watch(warmup=2, profile_steps=0, stop_after_steps=False, device_types=("meta",))
    with w:
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x, y = torch.randn(4, 32), torch.randn(4, 4)
        for _ in range(400):
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            hooks_during.append(len(model._forward_hooks) + len(model._forward_pre_hooks))
    assert snapshot() == before
    # No hook of ours left on the model, and none of the user's touched.
    assert not model._forward_hooks and not model._forward_pre_hooks
    plan = w.detail
    rec = w.recorder
    assert rec is not None and rec.kind == "optimizer"
    assert plan.full_every > 1, plan.hook_share
    measured = [r for r in rec.records if r.phase == "measure"]
    light = [r for r in measured if not r.full]
    full = [r for r in measured if r.full]
    assert light and len(full) >= detail.CENSUS
    assert plan.full == len(full) < len(measured)
    # Light steps time no framework call and pay less of the watch; the model's hooks were off
    # after them (0) and on after full ones (2).
    assert all(r.framework_ns == 0 for r in light)
    assert all(r.framework_ns > 0 for r in full)
    assert 0 in hooks_during and 2 in hooks_during
    light_cost = sum(r.overhead_ns for r in light) / len(light)
    full_cost = sum(r.overhead_ns for r in full[detail.CENSUS :] or full) / max(
        1, len(full[detail.CENSUS :] or full)
    )
    assert light_cost < full_cost
    rep = w.report
    assert rep is not None and rep.run is not None
    rep.validate()
    k = rep.run["kernels"]
    assert k["module_hooks_every"] == plan.full_every
    assert k["module_hooks_steps"] == plan.full
    assert any("were timed on" in n for n in rep.notes)


def test_light_steps_get_the_timed_steps_mean_framework_time() -> None:
    from gpusight.watch.report_builder import _framework_per_step

    a, b, c = (StepRecord(i, "measure", 0, 10) for i in range(3))
    a.framework_ns, b.framework_ns = 2_000_000, 4_000_000
    c.full = False
    assert _framework_per_step([a, b, c]) == [2.0, 4.0, 3.0]


def test_hooks_within_their_budget_run_on_every_step(monkeypatch: pytest.MonkeyPatch) -> None:
    # A budget this VM's cache-cold hooks stay within after a 30 ms step (~0.3 % of it here).
    monkeypatch.setattr(detail, "HOOK_BUDGET", 0.05)
    model = small_model()
    w = Watch(warmup=2, profile_steps=0, stop_after_steps=False, device_types=("meta",))
    with w:
        _train(model, detail.CENSUS + 8, sleep_s=0.03)
    rec = w.recorder
    assert rec is not None
    assert w.detail.full_every == 1, w.detail.hook_share
    assert all(r.full and r.framework_ns > 0 for r in rec.records if r.phase == "measure")
    rep = w.report
    assert rep is not None
    assert not any("were timed on" in n for n in rep.notes)


def _hooks_and_shim(model: nn.Module) -> tuple[int, int, bool]:
    shim = vars(model).get("_compiled_call_impl") is not None
    return len(model._forward_pre_hooks), len(model._forward_hooks), shim


def test_a_short_inference_step_ends_light_steps_from_a_call_shim() -> None:
    """Where a model call ends the step, light steps take both hooks off (torch's hook path
    costs more than the rest) and end the step from a wrapper of the model's call
    (``call_shim.py``); the census's full steps run the hooks, later full steps the shim, which
    times the call then. No step is lost."""
    before = snapshot()
    model = small_model().eval()
    x = torch.randn(2, 32)
    seen: list[tuple[int, int, bool]] = []
    calls = 400
    w = Watch(warmup=2, profile_steps=0, stop_after_steps=False, device_types=("meta",))
    with w, torch.inference_mode():
        for _ in range(calls):
            model(x)
            seen.append(_hooks_and_shim(model))
    assert snapshot() == before
    assert not model._forward_hooks and not model._forward_pre_hooks
    assert "_compiled_call_impl" not in vars(model)  # as it was: the class's None
    rec, plan = w.recorder, w.detail
    assert rec is not None and rec.kind == "forward"
    assert len(rec.records) == calls  # every call ended one step, light or not
    assert plan.full_every > 1, plan.hook_share
    measured = [r for r in rec.records if r.phase == "measure"]
    light = [r for r in measured if not r.full]
    full = [r for r in measured if r.full]
    assert light and len(full) >= detail.CENSUS and plan.full == len(full)
    assert all(r.framework_ns == 0 for r in light)
    assert all(r.framework_ns > 0 for r in full)
    # The census's full steps: both hooks and no shim; after it the shim alone, full or light.
    assert set(seen[3:]) == {(1, 1, False), (0, 0, True)}
    assert seen.index((0, 0, True)) >= detail.CENSUS
    assert set(seen[seen.index((0, 0, True)) :]) == {(0, 0, True)}
    rep = w.report
    assert rep is not None and rep.run is not None
    rep.validate()
    assert rep.run["kernels"]["module_hooks_steps"] == plan.full


def _runs_started(w: Watch) -> list[int]:
    """Wrap ``w._start_run``: the list gets each run's length."""
    started: list[int] = []
    start = w._start_run

    def spy(shim: object, steps: int) -> None:
        started.append(steps)
        start(shim, steps)  # type: ignore[arg-type]

    w._start_run = spy  # type: ignore[method-assign]
    return started


def test_light_inference_steps_end_in_runs_and_each_call_is_one_step() -> None:
    """The light steps that the plan knows are light end as a run (a stand-in of the shim
    appends each call's end, ``Watch._start_run``): every call is still one step, in order,
    and the run's steps reach the recorder and the plan's counts, up to the watch's end."""
    model = small_model().eval()
    x = torch.randn(2, 32)
    calls = 600
    w = Watch(warmup=2, profile_steps=0, stop_after_steps=False, device_types=("meta",))
    started = _runs_started(w)
    with w, torch.inference_mode():
        for _ in range(calls):
            model(x)
    assert "_compiled_call_impl" not in vars(model) and not w._run
    rec, plan = w.recorder, w.detail
    assert rec is not None and len(rec.records) == calls
    assert started and sum(started) > calls // 2, started  # most steps ended in runs
    assert all(0 < n <= MAX_RUN for n in started)
    measured = [r for r in rec.records if r.phase == "measure"]
    assert plan.measured == len(measured) == rec.measured
    assert [r.index for r in rec.records] == list(range(1, calls + 1))
    for a, b in itertools.pairwise(rec.records):
        assert a.start_ns <= a.end_ns <= b.start_ns
    # Each step's share of the watch's cost is there, runs or not.
    assert all(r.overhead_ns > 0 for r in measured)
    assert sum(r.full for r in measured) == plan.full


def test_a_run_stops_at_the_step_its_recorder_must_end_on() -> None:
    model = small_model().eval()
    x = torch.randn(2, 32)
    w = Watch(steps=40, warmup=2, profile_steps=0, device_types=("meta",))
    calls = 0
    with w, torch.inference_mode():
        for _ in range(1000):
            model(x)
            calls += 1
    rec = w.recorder
    assert rec is not None and rec.measured == 40
    # The call after the 40th measured step's (the step whose FLOPs were counted) and those
    # timed by line, raised StopWatch: not a run's length later.
    assert calls == len(rec.records) + LINE_STEPS == rec.warmup + 40 + LINE_STEPS


def test_runs_go_on_past_the_step_count_until_the_window_is_long_enough() -> None:
    """With ``steps`` and a window too long for them, the measuring goes on, runs too, and stops
    at the step count's cap, exactly."""
    from gpusight.watch.recorder import WINDOW_STEPS_FACTOR

    model = small_model().eval()
    x = torch.randn(2, 32)
    w = Watch(steps=20, warmup=2, profile_steps=0, min_window_s=60.0, device_types=("meta",))
    started = _runs_started(w)
    with w, torch.inference_mode():
        for _ in range(2000):
            model(x)
    rec = w.recorder
    assert rec is not None and rec.measured == 20 * WINDOW_STEPS_FACTOR
    assert sum(started) > 20 * WINDOW_STEPS_FACTOR // 2


def test_a_step_that_waits_for_its_loader_ends_the_run_and_keeps_its_own_wait() -> None:
    """A loader's wait belongs to the step that waited: a run's steps hold nothing of their
    own, so the step that does ends the run, and the wait stays on it, not on the run."""
    from torch.utils.data import DataLoader, TensorDataset

    model = small_model().eval()
    x = torch.randn(2, 32)
    loader = DataLoader(TensorDataset(torch.randn(64, 32)), batch_size=1)
    calls = 500
    waited: list[bool] = []
    w = Watch(warmup=2, profile_steps=0, stop_after_steps=False, device_types=("meta",))
    started = _runs_started(w)
    it = iter(loader)
    with w, torch.inference_mode():
        for i in range(calls):
            fetch = i % 10 == 0
            if fetch:
                try:
                    next(it)
                except StopIteration:
                    it = iter(loader)
                    next(it)
            waited.append(fetch)
            model(x)
    rec = w.recorder
    assert rec is not None and len(rec.records) == calls and started
    measured = [(r, f) for r, f in zip(rec.records, waited, strict=True) if r.phase == "measure"]
    assert len(measured) > 300
    assert all((r.data_ns > 0) == f for r, f in measured), [
        (r.index, r.data_ns, f) for r, f in measured if (r.data_ns > 0) != f
    ][:5]


def test_a_model_whose_class_has_its_own_call_keeps_its_post_hook() -> None:
    class OwnCall(nn.Sequential):
        def __call__(self, *args: object, **kwargs: object) -> object:
            return super().__call__(*args, **kwargs)

    model = OwnCall(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 4)).eval()
    x = torch.randn(2, 32)
    seen: list[tuple[int, int, bool]] = []
    w = Watch(warmup=2, profile_steps=0, stop_after_steps=False, device_types=("meta",))
    with w, torch.inference_mode():
        for _ in range(300):
            model(x)
            seen.append(_hooks_and_shim(model))
    rec = w.recorder
    assert rec is not None and len(rec.records) == 300 and w.detail.full_every > 1
    assert set(seen[3:]) == {(1, 1, False), (0, 1, False)}  # light: the post-hook alone


def test_the_model_pickles_and_copies_with_a_shim_in_place() -> None:
    import copy
    import pickle

    model = small_model().eval()
    x = torch.randn(2, 32)
    w = Watch(warmup=2, profile_steps=0, stop_after_steps=False, device_types=("meta",))
    copies: list[nn.Module] = []
    with w, torch.no_grad():
        for _ in range(300):
            model(x)
            if vars(model).get("_compiled_call_impl") is not None and not copies:
                copies += [pickle.loads(pickle.dumps(model)), copy.deepcopy(model)]
    assert len(copies) == 2
    with torch.no_grad():
        for c in copies:
            assert "_compiled_call_impl" not in vars(c)
            assert torch.equal(c(x), model(x))


def test_model_compile_mid_run_replaces_the_shim_and_keeps_the_users_compiled_call() -> None:
    model = small_model().eval()
    x = torch.randn(2, 32)
    calls, compile_at = 300, 150
    w = Watch(warmup=2, profile_steps=0, stop_after_steps=False, device_types=("meta",))
    with w, torch.inference_mode():
        for i in range(calls):
            if i == compile_at:
                assert vars(model).get("_compiled_call_impl") is not None  # a shim, by now
                model.compile(backend="eager")
            model(x)
    rec = w.recorder
    # Every step up to the compile is kept (a model compiled in place runs its hooks inside
    # the compiled call, where they see nothing: the steps after it are not seen, as before
    # light steps).
    assert rec is not None and len(rec.records) >= compile_at
    compiled = vars(model).get("_compiled_call_impl")
    assert compiled is not None  # the user's compiled call stays; only our shim would go
    assert not model._forward_hooks and not model._forward_pre_hooks


def test_inference_keeps_its_pre_hooks_where_hooked_modules_nest() -> None:
    """Without a pre-hook, a hooked module called inside another hooked one would look like an
    outermost call and end a step in the middle of one."""
    inner = small_model().eval()

    class Outer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = inner
            self.head = nn.Linear(4, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.inner(x))

    outer = Outer().eval()
    x = torch.randn(2, 32)
    calls = 300
    w = Watch(warmup=2, profile_steps=0, stop_after_steps=False, device_types=("meta",))
    with w, torch.inference_mode():
        inner(x)  # the first call at the top: inner is an outermost module too
        for _ in range(calls):
            outer(x)
    rec = w.recorder
    assert rec is not None and rec.kind == "forward"
    assert w.detail.full_every > 1  # short enough to sample...
    measured = [r for r in rec.records if r.phase == "measure"]
    assert measured and all(r.full for r in measured)  # ...but nested: every step hooked
    assert len(rec.records) == calls + 1  # one step per outermost call, none for inner's


def test_a_model_compiled_in_place_keeps_its_hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    """``model.compile()`` traces the model's hooks: taking them off and on would compile it
    again each time. (Marked as compiled here; compiling for real is slow on the CPU.)"""
    model = small_model()
    w = Watch(warmup=2, profile_steps=0, stop_after_steps=False, device_types=("meta",))
    with w:
        _train(model, 300, compile_at=1)
    rec = w.recorder
    assert rec is not None
    assert w.detail.full_every > 1  # short enough to sample...
    assert all(r.full for r in rec.records if r.phase == "measure")  # ...but it stays on


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_once_torch_compile_compiled_something_the_hooks_stay_on() -> None:
    """A compiled function that calls the model traces the model's hooks (dynamo's eager
    backend here: no C++ compiler needed), and each change of them would compile it again."""
    import torch._dynamo.utils as dynamo_utils

    model = small_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    @torch.compile(backend="eager")
    def forward(x: torch.Tensor) -> torch.Tensor:
        return model(x)

    x, y = torch.randn(4, 32), torch.randn(4, 4)
    graphs = dynamo_utils.counters["stats"]["unique_graphs"]
    w = Watch(warmup=2, profile_steps=0, stop_after_steps=False, device_types=("meta",))
    with w:
        for _ in range(200):
            loss = nn.functional.mse_loss(forward(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert dynamo_utils.counters["stats"]["unique_graphs"] > graphs  # compiled while watched
    rec = w.recorder
    assert rec is not None and rec.kind == "optimizer"
    assert w.detail.full_every > 1  # short enough to sample...
    assert all(r.full for r in rec.records if r.phase == "measure")  # ...but it stays on
    assert not model._forward_hooks and not model._forward_pre_hooks


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_launch_bound_cuda_training_step_runs_light_steps_with_the_profiler_window() -> None:
    """tiny_batch's shape on a GPU, with the profiler window: light steps after the census, the
    loss read every 10 steps still counted as a sync, and the report valid."""
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(6):
        layers += [nn.Linear(1024, 1024), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(1024, 10)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    xs = torch.randn(16, 8, 1024, device="cuda")
    ys = torch.randint(0, 10, (16, 8), device="cuda")
    w = Watch(warmup=3, profile_steps=3, stop_after_steps=False)
    with w:
        for i in range(400):
            loss = nn.functional.cross_entropy(model(xs[i % 16]), ys[i % 16])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if i % 10 == 0:
                loss.item()
    assert not model._forward_hooks and not model._forward_pre_hooks
    rec = w.recorder
    assert rec is not None and rec.kind == "optimizer"
    measured = [r for r in rec.records if r.phase == "measure"]
    assert w.detail.full_every > 1, w.detail.hook_share
    assert detail.CENSUS <= sum(r.full for r in measured) < len(measured)
    rep = w.report
    assert rep is not None and rep.run is not None
    rep.validate()
    assert rep.run["kernels"]["module_hooks_every"] == w.detail.full_every
    items = [s for s in rep.run["syncs"] if s["kind"] == "item"]
    assert items and abs(items[0]["count"] - len(measured) / 10) <= len(measured) / 10 * 0.5
    assert rep.verdict is not None and rep.verdict.bottleneck != "none"


class _Sleepy(torch.utils.data.Dataset[torch.Tensor]):
    """Item i is 32 numbers; every tenth (i % 10 == 3) takes 20 ms to make."""

    def __len__(self) -> int:
        return 10_000

    def __getitem__(self, i: int) -> torch.Tensor:
        if i % 10 == 3:
            time.sleep(0.02)
        return torch.full((32,), float(i % 7))


def test_a_short_training_step_ends_in_runs_and_each_step_keeps_its_loader_wait() -> None:
    """Light training steps that the plan knows are light end as a run (``Watch._opt_post``'s
    short way); each keeps its own wait for the loader, the slow batches on their steps."""
    from torch.utils.data import DataLoader

    torch.manual_seed(0)
    model = small_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(_Sleepy(), batch_size=1)
    steps = 400
    w = Watch(warmup=2, profile_steps=0, stop_after_steps=False, device_types=("meta",))
    runs: list[int] = []
    with w:
        rec = w.recorder
        assert rec is not None
        close = rec.close_run

        def spy(ends: list[int], datas: list[int], overhead_ns: int) -> None:
            runs.append(len(ends))
            close(ends, datas, overhead_ns)

        rec.close_run = spy  # type: ignore[method-assign]
        for i, x in enumerate(loader):
            if i == steps:
                break
            loss = model(x).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert rec.kind == "optimizer" and len(rec.records) == steps
    assert w.detail.full_every > 1 and runs and sum(runs) > steps // 3, (w.detail.hook_share, runs)
    measured = [r for r in rec.records if r.phase == "measure"]
    slow = {r.index for r in measured if r.data_ns > 10_000_000}
    assert slow == {r.index for r in measured if (r.index - 1) % 10 == 3}
    assert all(r.data_ns > 0 for r in measured)
