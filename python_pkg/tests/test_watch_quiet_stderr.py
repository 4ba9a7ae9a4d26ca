"""The profiler's own USDT lines stay out of the output; everything else on fd 2 gets through."""

from __future__ import annotations

import os

import pytest
from gpusight.watch.profiler_window import ProfilerWindow
from gpusight.watch.quiet_stderr import without_usdt_lines


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
    with without_usdt_lines():
        os.write(2, b"first\nUSDT:2026 x.cpp:52] profiler_start\nsecond\n")
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "first\nsecond\nafter\n"


def test_fd_restored_when_the_block_raises(capfd: pytest.CaptureFixture[str]) -> None:
    before = os.fstat(2)
    with pytest.raises(RuntimeError), without_usdt_lines():
        os.write(2, b"kept\nUSDT: dropped\n")
        raise RuntimeError("boom")
    after = os.fstat(2)
    assert (before.st_ino, before.st_dev) == (after.st_ino, after.st_dev)
    assert capfd.readouterr().err == "kept\n"
