"""The lean watch of a what-if's timed runs (``Watch(lean=True)``, ``gpusight run --lean``):
steps, items and the loader as always; ``Tensor.to`` left as it is, no NVML readings. Real CPU
torch, a real DataLoader."""

from __future__ import annotations

import torch
from gpusight.rerun.driver import ScriptRunner
from gpusight.watch.session import Watch
from torch.utils.data import DataLoader
from watch_support import SlowDataset, small_model


def _train(w: Watch) -> list[bool]:
    """A few steps under ``w``; whether ``Tensor.to`` was the watch's own at each step."""
    model = small_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(SlowDataset(n=16 * 8, sleep_s=0.0), batch_size=8)
    orig = torch.Tensor.to
    wrapped = []
    with w:
        for x, y in loader:
            wrapped.append(torch.Tensor.to is not orig)
            x, y = x.to("cpu"), y.to("cpu")
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    assert torch.Tensor.to is orig  # given back either way
    return wrapped


def test_a_lean_watch_times_the_steps_and_leaves_copies_alone() -> None:
    lean = Watch(steps=None, warmup=2, profile_steps=0, lean=True)
    assert not any(_train(lean))
    run = lean.report.run if lean.report else None
    assert run is not None and run["steps"] >= 10 and run["items_per_step"] == 8
    assert run["step_time_ms"] > 0 and len(run["step_times_ms"]) == run["steps"]
    full = Watch(steps=None, warmup=2, profile_steps=0)
    assert all(_train(full))  # the whole watch records copies


def test_the_what_ifs_unprofiled_runs_are_lean_and_verify_keeps_the_whole_watch() -> None:
    script = "print('no steps')"
    seen: list[list[str]] = []

    class Spy(ScriptRunner):
        def __call__(self, label, changes, profile, timeout_s):  # type: ignore[no-untyped-def]
            import subprocess

            real = subprocess.Popen

            def popen(cmd, *a, **k):  # type: ignore[no-untyped-def]
                seen.append(list(cmd))
                return real(["true"], *a, **k)

            subprocess.Popen = popen  # type: ignore[assignment,misc]
            try:
                return super().__call__(label, changes, profile, timeout_s)
            finally:
                subprocess.Popen = real  # type: ignore[misc]

    Spy(script, [], lean=True)("control", {}, False, 10.0)
    Spy(script, [], lean=True)("baseline", {}, True, 10.0)
    Spy(script, [])("verify", {}, False, 10.0)
    assert ["--lean" in c for c in seen] == [True, False, False]
