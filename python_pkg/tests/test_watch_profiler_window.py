"""The profiler window costs the user's run only its own steps (#20).

Two costs it used to leave behind, each found on the H200 (``benchmarks/watch_cost.py``):
torch.profiler's start imported inductor (4 s inside an inference script's step), and its stop
left CUPTI's callbacks on (every later launch dearer: +32 % on a launch-bound training step).
The CUPTI part needs a GPU to measure; here: the window asks for the teardown through the
environment, respects the user's setting and inductor's CUDA graphs, and gives it back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from gpusight.watch.profiler_window import CUPTI_TEARDOWN, ProfilerWindow

PKG = Path(__file__).resolve().parents[1]


def test_an_inference_watch_does_not_import_inductor(tmp_path: Path) -> None:
    # A fresh interpreter: the test session may have imported inductor already.
    script = tmp_path / "infer.py"
    script.write_text(
        textwrap.dedent(
            """
            import json, sys
            import torch
            import gpusight

            model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()).eval()
            with gpusight.watch(steps=8) as w, torch.inference_mode():
                for _ in range(8):
                    model(torch.randn(4, 16)).sum().item()
            kernels = w.report.run["kernels"]
            print(json.dumps({
                "inductor": "torch._inductor" in sys.modules,
                "window_steps": kernels.get("window_steps"),
                "cpu_op_ms": kernels.get("cpu_op_ms_per_step"),
            }))
            """
        )
    )
    env = dict(os.environ, PYTHONPATH=str(PKG))
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["inductor"] is False
    # The window still profiled: the trace was read back.
    assert got["window_steps"] and got["window_steps"] >= 1
    assert got["cpu_op_ms"] is not None


@pytest.fixture()
def clean_env() -> Iterator[None]:
    before = os.environ.get(CUPTI_TEARDOWN)
    os.environ.pop(CUPTI_TEARDOWN, None)
    yield
    os.environ.pop(CUPTI_TEARDOWN, None)
    if before is not None:
        os.environ[CUPTI_TEARDOWN] = before


def _window_env(cuda: bool) -> tuple[str | None, str | None, bool]:
    """The variable during the window, after it, and whether CUPTI is said to stay on."""
    win = ProfilerWindow(cuda=cuda)
    assert win.start(), win.error
    during = os.environ.get(CUPTI_TEARDOWN)
    win.stop()
    win.restore_env()
    return during, os.environ.get(CUPTI_TEARDOWN), win.cupti_left_on


def test_the_window_asks_for_the_teardown_and_gives_the_environment_back(
    clean_env: None,
) -> None:
    assert _window_env(cuda=True) == ("1", None, False)


def test_without_cuda_the_environment_is_untouched(clean_env: None) -> None:
    assert _window_env(cuda=False) == (None, None, False)


def test_a_users_setting_is_kept_and_its_cost_is_said(clean_env: None) -> None:
    os.environ[CUPTI_TEARDOWN] = "0"
    assert _window_env(cuda=True) == ("0", "0", True)


def test_inductor_cuda_graphs_keep_cupti_up(
    clean_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Stands in for inductor's config module, which is only read where already imported.
    config = types.ModuleType("torch._inductor.config")
    config.triton = types.SimpleNamespace(cudagraphs=True)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch._inductor.config", config)
    assert _window_env(cuda=True) == (None, None, True)


def test_the_start_up_steps_events_are_not_kept() -> None:
    """A real CPU window: what runs before ``record`` (the start-up step) is not in the trace
    that is stopped and read back, what runs after it is, and the clocks align after it."""
    import time

    import torch

    window = ProfilerWindow(cuda=False)
    assert window.start(), window.error
    torch.cumsum(torch.ones(64), 0)  # the start-up step's
    t_record = time.perf_counter_ns()
    window.record()
    torch.cumprod(torch.ones(64), 0)  # a profiled step's
    got = window.trace()
    assert got is not None, window.error
    names = {e.get("name") for e in got[0]["traceEvents"]}
    assert "aten::cumprod" in names and "aten::cumsum" not in names
    assert got[1].perf_ns >= t_record


def test_a_trace_that_cannot_be_written_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real CPU profiler window whose export fails half-way (a full temporary folder): the
    report says why, and neither the trace nor what its writer left beside it stays behind."""
    import torch

    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    window = ProfilerWindow(cuda=False)
    assert window.start()
    torch.randn(64, 64) @ torch.randn(64, 64)
    prof = window._prof
    assert prof is not None

    def full_disk(path: str) -> None:
        Path(path + ".tmp").write_text('{"traceEvents": [')
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(prof, "export_chrome_trace", full_disk)
    assert window.trace() is None
    assert window.error is not None and "No space left" in window.error
    assert list(tmp_path.iterdir()) == []


def _deep_accumulating_run(blocks: int, micro: int) -> tuple[int, list[int]]:
    """A watched loop over a stack of ``blocks`` small blocks (5 modules each), ``micro``
    micro-batches a step: the steps the profiler window analysed, and the modules the global
    hooks saw ``[nested, outermost]``."""
    import torch
    from gpusight.watch import Watch
    from torch import nn

    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(blocks):
        layers += [nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8), nn.LayerNorm(8), nn.Identity()]
    model = nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(2, 8)
    with Watch(steps=3, warmup=3, profile_steps=3) as w:
        for _ in range(14):
            for _ in range(micro):
                (model(x).square().mean() / micro).backward()
            opt.step()
            opt.zero_grad()
    assert w.recorder is not None
    return w.recorder.profile_steps, w._module_calls


def test_steps_of_many_module_calls_profile_fewer_steps() -> None:
    """A trace grows with the ops of its steps: a ConvNeXt-sized stack at 8 micro-batches a
    step (timm_accum on an H100: its watched baseline took 59 s of a 180 s what-if, the
    unwatched control 14 s) is profiled over one step; a small model over the three asked."""
    steps, (nested, outer) = _deep_accumulating_run(blocks=30, micro=8)
    assert outer > 0 and nested == 150 * outer  # every block's modules under each call
    assert steps == 1
    steps, _ = _deep_accumulating_run(blocks=2, micro=1)
    assert steps == 3
