"""gpusight.watch on real CPU training loops: steps, data wait, source lines, restore."""

from __future__ import annotations

import os
import signal
import statistics
import sys
import warnings
from collections.abc import Iterator

import gpusight
import pytest
import torch
from gpusight.watch.calibration import UNSEEN_FACTOR, UNSEEN_FACTOR_FORWARD
from gpusight.watch.host_lines import STEPS as LINE_STEPS
from gpusight.watch.report_builder import NOTED_OVERHEAD_PCT
from gpusight.watch.session import SYNC_MESSAGE, Watch, classify_copy, non_blocking_arg, sync_kind
from thread_support import one_thread  # noqa: F401 (autouse: one torch thread)
from torch import nn
from torch.utils.data import DataLoader
from watch_support import SlowDataset, module_hooks, small_model, snapshot, train


def test_slow_dataset_data_wait_share() -> None:
    batch = 2
    ds = SlowDataset()
    loader = DataLoader(ds, batch_size=batch)
    before = snapshot()
    with gpusight.watch(steps=6, warmup=1, profile_steps=2) as w:
        for _ in train(loader, small_model()):
            pass
    assert snapshot() == before
    rep = w.report
    assert rep is not None
    rep.validate()
    run = rep.run
    assert run is not None and run["steps"] == 6
    # Truth: what __getitem__ really took per batch (the sleep plus a randn), measured by the
    # dataset itself. The loader adds collate and its own bookkeeping on top: a few ms at most.
    truth_ms = statistics.fmean(ds.spent) * batch * 1000
    data = run["breakdown_ms"]["data_wait"]
    assert truth_ms <= data * 1.02 + 0.5
    assert data <= truth_ms * 1.15 + 3.0
    share = data / run["step_time_ms"]
    assert share == pytest.approx(truth_ms / run["step_time_ms"], abs=0.12)
    assert share > 0.5
    assert rep.verdict.bottleneck == "input_pipeline"
    assert rep.verdict.gpu_busy_pct is None
    assert rep.finding_ids[0] == "load.input_bound"
    f = rep.finding("load.input_bound")
    assert f is not None
    assert {e.label: e.value for e in f.evidence}["num_workers"] == 0
    assert run["kernels"]["step_mode"] == "optimizer"
    assert run["overhead_pct"] is not None and run["overhead_pct"] < 3.0
    # The hooks' own time, and the figure calibrated against the script's clock (x2: the hooks
    # run cache-cold between a step's launches); a note says so only once it is >= 1 %.
    seen = run["kernels"]["overhead_seen_pct"]
    assert 0 < seen and run["overhead_pct"] == pytest.approx(UNSEEN_FACTOR * seen, abs=0.002)
    noted = any(n.startswith("watching cost about") for n in rep.notes)
    assert noted == (run["overhead_pct"] >= NOTED_OVERHEAD_PCT)
    assert sum(run["breakdown_ms"].values()) == pytest.approx(run["step_time_ms"], rel=1e-3)
    # the profiler window ran on the CPU and was read back; the hooks' data waits land within
    # microseconds of the DataLoader's own profiler ranges: the two clocks are aligned
    assert run["kernels"]["window_steps"] == 2
    assert run["kernels"]["alignment_error_us"] < 500


def test_model_left_on_cpu_while_cuda_available(monkeypatch: pytest.MonkeyPatch) -> None:
    # This machine has no GPU; torch saying CUDA is available is the one thing faked here, to
    # drive the CPU-model path (the run itself is real and never touches CUDA).
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    model = small_model()
    x = torch.randn(16, 32)
    y = torch.zeros(16, dtype=torch.long)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    # Fifty measured steps (of well under a millisecond each): over three, and once over ten,
    # one pause of this 2-core machine outside the model's calls read the model's share of the
    # step, and the finding's severity, lower.
    with Watch(steps=50, warmup=1, profile_steps=0) as w:
        while True:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    rep = w.report
    assert rep is not None
    rep.validate()
    assert rep.verdict.bottleneck == "device_placement"
    assert rep.finding_ids[0] == "code.cpu_model"
    f = rep.finding("code.cpu_model")
    assert f is not None and f.severity == "critical" and "model.to(device)" in (f.fix.code or "")
    assert any("never started CUDA" in n for n in rep.notes)


def test_steps_end_the_block_and_count() -> None:
    model = small_model()
    x = torch.randn(8, 32)
    y = torch.zeros(8, dtype=torch.long)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    done = 0
    with Watch(steps=4, warmup=2, profile_steps=1) as w:
        while True:  # would run forever: the watch ends it
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            done += 1
    # warmup, profiler start-up, profiled, measured, the one whose FLOPs are counted, those
    # timed by line; the last ends inside opt.step()
    assert done == 2 + 1 + 1 + 4 + 1 + LINE_STEPS - 1
    assert w.report is not None and w.report.run is not None
    assert w.report.run["steps"] == 4 and w.report.run["warmup_steps"] == 2
    assert "stopped after the 4 measured steps asked for" in w.report.notes


def test_the_profiled_calls_are_tagged_with_their_phase() -> None:
    model = small_model()
    x, y = torch.randn(8, 32), torch.zeros(8, dtype=torch.long)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with Watch(steps=3, warmup=1, profile_steps=2) as w:
        while True:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    rec = w.recorder
    assert rec is not None
    window = rec.window
    # One phase per framework interval, in the order the calls ran: forward, backward, step.
    phases = window.framework_phases
    assert len(window.framework) == len(phases) >= 6
    cycle = ["forward", "backward", "optimizer"]
    first = cycle.index(phases[0])
    assert phases == [cycle[(first + i) % 3] for i in range(len(phases))]


def test_steps_without_optimizer_and_inference() -> None:
    model = small_model()
    x = torch.randn(8, 32)
    with Watch(steps=3, warmup=1, profile_steps=0) as w:
        while True:
            model(x).sum().backward()
            with torch.no_grad():
                for p in model.parameters():
                    p -= 0.01 * p.grad  # type: ignore[operator]
    assert w.report is not None and w.report.run is not None
    assert w.report.run["kernels"]["step_mode"] == "backward"

    with Watch(steps=5, warmup=1, profile_steps=0) as w2, torch.no_grad():
        while True:
            model(x[:1])
    rep = w2.report
    assert rep is not None and rep.run is not None
    assert rep.run["kernels"]["step_mode"] == "forward" and rep.run["steps"] == 5
    assert "infer.unbatched" in rep.finding_ids
    # Steps that a model call ends keep the module hooks on every step: their cost from
    # outside is a larger multiple of what the clocks see (calibration.py) than training's.
    kern, seen = rep.run["kernels"], rep.run["kernels"]["overhead_seen_pct"]
    assert kern["overhead_unseen_factor"] == UNSEEN_FACTOR_FORWARD > UNSEEN_FACTOR
    # Both figures are rounded to 3 decimals: the seen one's rounding, times the factor, too.
    rounding = UNSEEN_FACTOR_FORWARD * 0.0005 + 0.0005
    assert rep.run["overhead_pct"] == pytest.approx(UNSEEN_FACTOR_FORWARD * seen, abs=rounding)
    assert w.report.run["kernels"]["overhead_unseen_factor"] == UNSEEN_FACTOR


def test_inference_whose_hooks_were_sampled_takes_trainings_unseen_factor() -> None:
    """The forward factor was measured with the hooks on every step; light steps end from a
    call shim, shaped as training's light steps are."""
    model = small_model().eval()
    x = torch.randn(1, 32)
    with Watch(warmup=2, profile_steps=0, stop_after_steps=False) as w, torch.no_grad():
        for _ in range(300):
            model(x)
    rep = w.report
    assert rep is not None and rep.run is not None
    kern = rep.run["kernels"]
    assert kern["step_mode"] == "forward" and kern["module_hooks_every"] > 1
    assert kern["overhead_unseen_factor"] == UNSEEN_FACTOR


def test_hooks_leave_inner_modules_after_warmup() -> None:
    from torch.nn.modules import module as m

    model = small_model()
    x = torch.randn(4, 32)
    y = torch.zeros(4, dtype=torch.long)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    seen: list[tuple[int, int]] = []
    with Watch(steps=3, warmup=2, profile_steps=0):
        while True:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            seen.append((len(m._global_forward_pre_hooks), module_hooks(model)))
            opt.step()  # ends the step
    assert seen[0] == (1, 0)  # global while warming up
    assert seen[-2] == (0, 2)  # then only the outermost module: one pre-hook, one hook
    # The step after the measured ones, whose FLOPs are counted: FlopCounterMode's module
    # tracker holds a global pre-hook of its own. Then the steps timed by line.
    assert seen[-1 - LINE_STEPS] == (1, 2)
    assert seen[-1] == (0, 2)
    assert module_hooks(model) == 0


def test_sync_and_pageable_copy_lines_are_the_users() -> None:
    model = small_model()
    x = torch.randn(4, 32)
    shown: list[str] = []

    def log_loss() -> None:
        # On CUDA, sync-debug mode raises this warning from inside torch for `.item()`; on the
        # CPU the same warning goes through the same handler when issued here.
        warnings.warn(SYNC_MESSAGE, stacklevel=1)  # SYNC LINE

    showwarning = warnings.showwarning
    warnings.showwarning = lambda *a, **k: shown.append(str(a[0]))  # type: ignore[assignment]
    try:
        # "meta" stands in for an accelerator: a real tensor copy to another device type.
        with Watch(steps=3, warmup=1, profile_steps=1, device_types=("meta",)) as w:
            while True:
                batch = x.to("meta", non_blocking=True)  # PAGEABLE LINE
                x.to("meta")
                model(batch.to("cpu") if batch.is_meta and False else x).sum().backward()
                log_loss()
    finally:
        warnings.showwarning = showwarning
    assert shown == []  # the sync warnings were counted, not printed
    rep = w.report
    assert rep is not None
    rep.validate()
    src = open(__file__, encoding="utf-8").read().splitlines()
    sync_line = next(i + 1 for i, t in enumerate(src) if t.endswith("# SYNC LINE"))
    copy_line = next(i + 1 for i, t in enumerate(src) if t.endswith("# PAGEABLE LINE"))
    here = os.path.relpath(__file__)
    f = rep.finding("code.host_sync")
    assert f is not None
    s = next(e.source for e in f.evidence if e.source is not None)
    assert (s.file, s.line, s.count) == (here, sync_line, 3)
    f = rep.finding("code.pageable_copy")
    assert f is not None
    c = next(e.source for e in f.evidence if e.source is not None)
    assert (c.file, c.line, c.count) == (here, copy_line, 3)
    assert rep.run is not None and rep.run["syncs"][0]["source"]["line"] == sync_line


def test_copy_classification() -> None:
    assert classify_copy(src_pinned=False, non_blocking=True) == "pageable_async"
    assert classify_copy(src_pinned=False, non_blocking=False) == "pageable_sync"
    assert classify_copy(src_pinned=True, non_blocking=False) == "pinned_sync"
    assert classify_copy(src_pinned=True, non_blocking=True) == "pinned_async"
    assert non_blocking_arg(("cuda", None, True), {}) is True
    assert non_blocking_arg((torch.float16,), {"non_blocking": True}) is True
    assert non_blocking_arg(("cuda",), {}) is False
    assert sync_kind("total += loss.item()") == "item"
    assert sync_kind("idx = mask.nonzero()") == "nonzero"
    assert sync_kind("if (x > 0).any():") == "bool"


class _Source:
    """A host tensor's stand-in as ``record_copy`` sees it: CPU torch cannot pin memory."""

    asked = 0

    def __init__(self, pinned: bool) -> None:
        self.pinned = pinned
        self.nbytes = 1024

    def is_pinned(self) -> bool:
        _Source.asked += 1
        return self.pinned


def test_a_copy_line_asks_is_pinned_rarely_once_its_sources_are_known_and_a_mixed_line_always() -> (
    None
):
    def copy_line(w: Watch, src: _Source) -> None:
        w.record_copy(src, False, 0, 10, sys._getframe())  # one line, as in a to_device helper

    def helper_line(w: Watch, src: _Source) -> None:
        w.record_copy(src, False, 0, 10, sys._getframe())

    with Watch(warmup=0, profile_steps=0, stop_after_steps=False) as w:
        _Source.asked = 0
        for _ in range(200):
            copy_line(w, _Source(pinned=False))
        steady = _Source.asked
        _Source.asked = 0
        for i in range(200):  # a helper that copies a pinned batch and a pageable extra
            helper_line(w, _Source(pinned=i % 2 == 0))
        mixed = _Source.asked
        counts = sorted((k[0], a.count) for k, a in w.collected.copies.items())
        # The first line's sources turn pinned: seen at its next check, within 17 copies.
        for _ in range(40):
            copy_line(w, _Source(pinned=True))
        late = sum(a.count for k, a in w.collected.copies.items() if k[0] == "pinned_sync") - 100
    # 32 learning copies, then every 17th; and every copy of a line that showed both kinds.
    assert steady == 32 + len(range(34, 200, 17))
    assert mixed == 200
    # Each line's copies by kind: 200 pageable; 100 pageable and 100 pinned.
    assert counts == [("pageable_sync", 100), ("pageable_sync", 200), ("pinned_sync", 100)]
    assert 40 - 17 < late <= 40


def _step_then(fail_at: int, exc: BaseException) -> Iterator[int]:
    model = small_model()
    x = torch.randn(4, 32)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for i in range(100):
        if i == fail_at:
            raise exc
        model(x).sum().backward()
        opt.step()
        yield i


@pytest.mark.parametrize("exc", [ValueError("bad batch"), KeyboardInterrupt()])
def test_restored_after_error_and_interrupt(exc: BaseException) -> None:
    before = snapshot()
    w = Watch(warmup=1, profile_steps=2)
    with pytest.raises(type(exc)):
        with w:
            for _ in _step_then(3, exc):  # fails inside the profiler window
                pass
    assert snapshot() == before
    assert w.report is not None
    w.report.validate()
    assert any(
        ("interrupted" if isinstance(exc, KeyboardInterrupt) else "raised ValueError") in n
        for n in w.report.notes
    )


def test_restored_after_ctrl_c_inside_forward() -> None:
    before = snapshot()

    class Boom(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.calls = 0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.calls += 1
            if self.calls == 6:
                os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C, delivered mid-forward
            return torch.as_tensor(self.lin(x))

    model = Boom()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(KeyboardInterrupt), Watch(warmup=2, profile_steps=2):
        for _ in range(50):
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
    assert snapshot() == before
    assert module_hooks(model) == 0


def test_one_watch_at_a_time_and_workers_pass_through() -> None:
    ds = SlowDataset(n=16, sleep_s=0.001)
    loader = DataLoader(ds, batch_size=4, num_workers=1)
    with Watch(warmup=0, profile_steps=0) as w:
        with pytest.raises(RuntimeError, match="already running"):
            Watch().start()
        for _ in train(loader, small_model()):
            pass
    rep = w.report
    assert rep is not None and rep.run is not None and rep.run["steps"] == 4
    f_loader = next(iter(w.collected.loaders.values()))
    assert f_loader.num_workers == 1 and f_loader.batch_size == 4


def test_gpusight_watch_stays_callable() -> None:
    import gpusight.watch as watch_module

    assert callable(gpusight.watch) and callable(watch_module)
    assert isinstance(gpusight.watch(steps=1), Watch)
    assert "gpusight.watch" in sys.modules


def test_a_short_step_says_what_watching_cost() -> None:
    # A step of a few hundred microseconds: the hooks are a visible share of it, and the report
    # says so in a note with the calibrated figure (not only the hooks' own time).
    model = nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(4, 8), torch.randn(4, 2)
    with gpusight.watch(steps=30, warmup=2, profile_steps=0) as w:
        for _ in range(40):
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    rep = w.report
    assert rep is not None and rep.run is not None
    pct = rep.run["overhead_pct"]
    assert pct >= NOTED_OVERHEAD_PCT
    note = next(n for n in rep.notes if n.startswith("watching cost about"))
    # The note's figure is the unrounded one (68.6 % for a run's 68.650): within its rounding.
    said = float(note.removeprefix("watching cost about ").split(" %", 1)[0])
    assert said == pytest.approx(pct, abs=0.051)
    assert "calibrated against the script's own clock" in note


def test_a_run_without_steps_is_measured_up_to_a_bound_and_then_left_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every measured step keeps its record: a long run of short steps grew without bound. The
    # watch measures MAX_MEASURED steps, takes its hooks off the model and lets the run go on.
    from gpusight.watch import recorder

    monkeypatch.setattr(recorder, "MAX_MEASURED", 12)
    model = small_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(8, 32)
    ran = 0
    with Watch(warmup=2, profile_steps=0) as w:
        for _ in range(40):
            model(x).sum().backward()
            opt.step()
            opt.zero_grad()
            ran += 1
            # Once the steps after the cap (its FLOPs counted, then those timed by line) ended.
            done = w.flops.result is not None and w.lines.result is not None
            if w.recorder is not None and w.recorder.capped and done:
                assert not model._forward_hooks and not model._forward_pre_hooks
    assert ran == 40  # the script ran to its end
    rec, rep = w.recorder, w.report
    assert rec is not None and rep is not None and rep.run is not None
    assert rec.measured == 12 and len(rec.records) <= 2 + 12 + 1  # no record past the bound
    assert rep.run["steps"] == 12 and w.outcome == "completed"
    assert any(n.startswith("measured the first 12 steps") for n in rep.notes)
    rep.validate()
