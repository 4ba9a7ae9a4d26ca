"""The profiler's own chatter stays out of the output; everything else on fd 2 gets through."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from gpusight.watch.profiler_window import ProfilerWindow
from gpusight.watch.quiet_stderr import without_profiler_chatter


def test_real_profiler_start_stop_prints_no_usdt_lines(capfd: pytest.CaptureFixture[str]) -> None:
    import torch

    before = os.fstat(2)
    window = ProfilerWindow(cuda=False)
    assert window.start(), window.error
    torch.ones(8) @ torch.ones(8)
    window.stop()
    assert window.error is None
    after = os.fstat(2)
    assert (before.st_ino, before.st_dev) == (after.st_ino, after.st_dev)  # fd 2 restored
    assert "USDT" not in capfd.readouterr().err
    assert window.trace() is not None  # the trace is still read back


def test_other_lines_are_passed_on_in_order(capfd: pytest.CaptureFixture[str]) -> None:
    with without_profiler_chatter():
        os.write(2, b"first\nUSDT:2026 x.cpp:52] profiler_start\nsecond\n")
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "first\nsecond\nafter\n"


def test_fd_restored_when_the_block_raises(capfd: pytest.CaptureFixture[str]) -> None:
    before = os.fstat(2)
    with pytest.raises(RuntimeError), without_profiler_chatter():
        os.write(2, b"kept\nUSDT: dropped\n")
        raise RuntimeError("boom")
    after = os.fstat(2)
    assert (before.st_ino, before.st_dev) == (after.st_ino, after.st_dev)
    assert capfd.readouterr().err == "kept\n"


def test_kinetos_complaint_about_another_thread_is_dropped(
    capfd: pytest.CaptureFixture[str],
) -> None:
    with without_profiler_chatter():
        os.write(2, b"ERROR: External init callback must run in same thread as registerClient ")
        os.write(2, b"(1041319616 != 1615014784)\nERROR: anything else\n")
    assert capfd.readouterr().err == "ERROR: anything else\n"


def test_a_watch_in_a_worker_thread_prints_nothing_and_still_profiles() -> None:
    # A fresh interpreter: kineto complains only on the process's first profiler start, and
    # only from a thread other than the one that loaded torch.
    script = textwrap.dedent(
        """
        import json, threading, torch, gpusight
        out = {}
        def run():
            model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Linear(32, 4))
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            with gpusight.watch(steps=10) as w:
                for _ in range(40):
                    model(torch.randn(16, 32)).sum().backward()
                    opt.step()
                    opt.zero_grad()
            out["kernels"] = w.report.to_dict()["run"]["kernels"]
        t = threading.Thread(target=run)
        t.start()
        t.join()
        print(json.dumps(out))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True
    )
    assert "External init callback" not in done.stderr
    kernels = json.loads(done.stdout.strip().splitlines()[-1])["kernels"]
    assert kernels["window_steps"] >= 1
    assert kernels["cpu_op_ms_per_step"] > 0  # the window saw the thread's ops
