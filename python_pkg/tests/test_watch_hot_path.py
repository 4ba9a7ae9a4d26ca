"""The per-step path of the watch: its caches must not change what is counted or where.

The hooks remember the user's line per calling instruction and skip the between-steps work once
it is settled; these tests hold the evidence (sync and copy counts per step and per line, the
profiler window's intervals, the step phases) to what the slow path gave. No timing here: the
cost per step is measured by ``benchmarks/cost/overhead.py --micro``.
"""

from __future__ import annotations

import os
import warnings

import pytest
import torch
from gpusight.watch.recorder import StepRecorder
from gpusight.watch.session import SYNC_MESSAGE, Watch
from torch import nn

HERE = os.path.relpath(__file__)


def _line(marker: str) -> int:
    src = open(__file__, encoding="utf-8").read().splitlines()
    return next(i + 1 for i, t in enumerate(src) if t.rstrip().endswith(marker))


def _internal_helper() -> object:
    """A function whose code lives in torch's folder: what a sync inside torch's Python is."""
    path = os.path.join(os.path.dirname(torch.__file__), "_gpusight_test_helper.py")
    ns: dict[str, object] = {"warnings": warnings, "MSG": SYNC_MESSAGE}
    exec(compile("def sync():\n    warnings.warn(MSG, stacklevel=1)\n", path, "exec"), ns)
    return ns["sync"]


def test_sync_counts_and_lines_hold_when_the_same_lines_repeat() -> None:
    model = nn.Linear(4, 2)
    x = torch.randn(3, 4)
    inside_torch = _internal_helper()
    steps = 10  # 2 of warm-up, 2 profiled, 2 timed by line, then measured ones
    with Watch(warmup=2, profile_steps=1, stop_after_steps=False) as w:
        for _ in range(steps):
            model(x)
            warnings.warn(SYNC_MESSAGE, stacklevel=1)  # SYNC A
            for _ in range(2):
                warnings.warn(SYNC_MESSAGE, stacklevel=1)  # SYNC B
            inside_torch()  # SYNC VIA TORCH
    rec = w.recorder
    assert rec is not None
    # Every step but the last (still open when the loop ended) ended at its forward: 4 syncs
    # each, the first step's in the step before its forward.
    per_step = [r.syncs for r in rec.records]
    assert per_step[1:] == [4] * (len(per_step) - 1)
    by_line = {(a.site.file, a.site.line): a for a in w.collected.syncs.values() if a.site}
    a = by_line[(HERE, _line("# SYNC A"))]
    b = by_line[(HERE, _line("# SYNC B"))]
    via = by_line[(HERE, _line("# SYNC VIA TORCH"))]
    assert (a.count, b.count, via.count) == (steps, 2 * steps, steps)
    assert len(w.collected.syncs) == 3
    # Measured counts: the syncs of measure-phase steps, the last (open) one included.
    measured = sum(r.phase == "measure" for r in [*rec.records, rec.current])
    assert measured >= 4
    assert (a.measured, b.measured, via.measured) == (measured, 2 * measured, measured)
    # The profiler window's sync times name the same lines as the counts.
    window_keys = {key for _, key in rec.window.syncs}
    assert window_keys <= {a.key, b.key, via.key} and window_keys
    assert a.key == f"{HERE}:{a.site.line}"


def test_copies_from_two_lines_of_one_function_stay_apart() -> None:
    x = torch.randn(16, 4)
    y = torch.randn(16, 4)
    with Watch(warmup=1, profile_steps=0, stop_after_steps=False, device_types=("meta",)) as w:
        model = nn.Linear(4, 2)
        for _ in range(6):
            x.to("meta")  # COPY ONE
            y.to("meta", non_blocking=True)  # COPY TWO
            x.to(torch.float64)  # host to host: not a copy to a device
            model(x)
    copies = {(c.kind, c.site.line): c for c in w.collected.copies.values() if c.site}
    one = copies[("pageable_sync", _line("# COPY ONE"))]
    two = copies[("pageable_async", _line("# COPY TWO"))]
    assert (one.count, two.count) == (6, 6)
    assert one.bytes == 6 * x.nbytes
    assert len(w.collected.copies) == 2


def test_after_the_window_steps_skip_the_between_steps_work() -> None:
    model = nn.Linear(4, 2)
    x = torch.randn(3, 4)
    with Watch(warmup=1, profile_steps=2, stop_after_steps=False) as w:
        for _ in range(10):
            model(x)
            warnings.warn(SYNC_MESSAGE, stacklevel=1)
    rec = w.recorder
    assert rec is not None and w.window is not None
    assert w._settled and not rec.recording_window
    phases = [r.phase for r in rec.records]
    assert phases[:4] == ["warmup", "profile_warmup", "profile", "profile"]
    # Without ``steps``, two steps timed by line come before the measured ones.
    assert phases[4:6] == ["lines", "lines"] and w.lines.result is not None
    assert set(phases[6:]) == {"measure"}
    # Intervals only from the window: the forwards of the window's steps, not of later ones.
    window_steps = [r for r in rec.records if r.phase in ("profile_warmup", "profile")]
    last_window_end = max(r.end_ns for r in window_steps)
    assert rec.window.framework and all(t1 <= last_window_end for _, t1 in rec.window.framework)
    assert all(t <= last_window_end for t, _ in rec.window.syncs)


def test_the_profilers_own_syncs_are_not_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    # With CUDA, torch.profiler syncs the device when it starts and stops; on the CPU a sync
    # warning from inside the window's start and stop stands in for that.
    from gpusight.watch import profiler_window

    start, stop = profiler_window.ProfilerWindow.start, profiler_window.ProfilerWindow.stop

    def syncing_start(self: profiler_window.ProfilerWindow) -> bool:
        warnings.warn(SYNC_MESSAGE, stacklevel=1)
        return start(self)

    def syncing_stop(self: profiler_window.ProfilerWindow) -> None:
        if self.started and not self.stopped:
            warnings.warn(SYNC_MESSAGE, stacklevel=1)
        stop(self)

    monkeypatch.setattr(profiler_window.ProfilerWindow, "start", syncing_start)
    monkeypatch.setattr(profiler_window.ProfilerWindow, "stop", syncing_stop)
    model = nn.Linear(4, 2)
    x = torch.randn(3, 4)
    with Watch(warmup=1, profile_steps=2, stop_after_steps=False) as w:
        for _ in range(8):
            model(x)
            warnings.warn(SYNC_MESSAGE, stacklevel=1)  # THE USER'S SYNC
    assert w.window is not None and w.window.stopped
    (agg,) = w.collected.syncs.values()
    assert agg.site is not None and agg.site.line == _line("# THE USER'S SYNC")
    assert agg.count == 8
    rec = w.recorder
    assert rec is not None
    assert [r.syncs for r in rec.records[1:]] == [1] * (len(rec.records) - 1)


def test_steps_with_a_requested_count_stop_and_pass_through() -> None:
    model = nn.Linear(4, 2)
    x = torch.randn(3, 4)
    calls = 0
    with Watch(steps=3, warmup=1, profile_steps=0, stop_after_steps=False) as w:
        for _ in range(12):
            model(x)
            calls += 1
    rec = w.recorder
    assert rec is not None
    assert calls == 12  # not stopped: stop_after_steps=False
    assert rec.measured == 3
    assert w._done and w._tid is None  # the hooks passed the remaining calls straight through
    assert len(rec.records) == 4  # 1 warm-up + 3 measured; nothing recorded after that


def test_recorder_phases_and_kind_priority() -> None:
    rec = StepRecorder(warmup=2, profile_steps=2, steps=None, start_ns=0)
    assert [rec.phase_of(i) for i in range(1, 8)] == [
        "warmup", "warmup", "profile_warmup", "profile", "profile", "measure", "measure",
    ]  # fmt: skip
    no_profile = StepRecorder(warmup=1, profile_steps=0, steps=None, start_ns=0)
    assert [no_profile.phase_of(i) for i in (1, 2, 3)] == ["warmup", "measure", "measure"]
    # Forward ends drive the steps until the first optimizer step: then what came before
    # merges into one first step, and forward ends no longer end steps.
    t = 0
    for _ in range(3):
        t += 10
        assert rec.boundary("forward", t)
        rec.begin_next(t)
    rec.current.syncs = 1
    assert rec.boundary("optimizer", t + 10)
    assert rec.completed == 1 and rec.records[0].phase == "warmup"
    assert rec.records[0].syncs == 1
    rec.begin_next(t + 10)
    assert not rec.boundary("forward", t + 20)
    assert not rec.boundary("backward", t + 20)
    assert rec.boundary("optimizer", t + 30)
    assert rec.kind_counts == {"optimizer": 2, "backward": 1, "forward": 4}
    assert [r.index for r in rec.records] == [1, 2]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_syncs_and_copies_land_on_the_users_lines() -> None:
    # Real sync-debug warnings from inside torch, one of them raised inside the copy wrapper.
    model = nn.Linear(64, 8).cuda().eval()
    host = torch.randn(4, 64)  # pageable
    steps = 16
    with Watch(warmup=2, profile_steps=2, stop_after_steps=False) as w:
        for _ in range(steps):
            batch = host.to("cuda")  # CUDA COPY
            out = model(batch)
            out.sum().item()  # CUDA ITEM
            out.cpu()  # CUDA CPU
    syncs = {a.site.line: a for a in w.collected.syncs.values() if a.site and a.site.file == HERE}
    for marker in ("# CUDA COPY", "# CUDA ITEM", "# CUDA CPU"):
        assert syncs[_line(marker)].count == steps, marker
    assert syncs[_line("# CUDA ITEM")].kind == "item"
    assert all(a.site is not None and a.site.file == HERE for a in w.collected.syncs.values())
    (copy,) = w.collected.copies.values()
    assert copy.site is not None
    assert (copy.site.file, copy.site.line) == (HERE, _line("# CUDA COPY"))
    assert (copy.kind, copy.count) == ("pageable_sync", steps)
    rec = w.recorder
    assert rec is not None
    # Each measured step: this step's copy, the last step's item and cpu.
    measured = [r.syncs for r in rec.records if r.phase == "measure"]
    assert measured and set(measured) == {3}
