"""A what-if ends cleanly however it ends: SIGTERM to gpusight stops its re-runs (and their
DataLoader workers) and removes its scratch folders, and ``--budget`` is a hard limit over every
run, the baseline's included."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SLOW_LOOP = """import sys, time
import torch
from torch.utils.data import DataLoader, Dataset

class Slow(Dataset):
    def __len__(self):
        return 100000
    def __getitem__(self, i):
        time.sleep(0.01)
        return torch.randn(8)

open(sys.argv[1], "w").write("started")
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x in DataLoader(Slow(), batch_size=4, num_workers=2):
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
"""

SLOW_START = """import time
time.sleep(40)
import torch
model = torch.nn.Linear(8, 2)
for _ in range(100):
    model(torch.randn(4, 8)).sum().backward()
"""


def _gpusight() -> str:
    return str(Path(sys.executable).parent / "gpusight")


def _processes_running(marker: str) -> list[int]:
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmd:
            out.append(int(pid))
    return out


def _ours(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.startswith(("gpusight", "pymp-"))]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_ends_the_what_if_and_everything_it_started(tmp_path: Path, sig: int) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    script = project / f"slow_loop_{sig}_{os.getpid()}.py"  # a name no other run has
    script.write_text(SLOW_LOOP)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    started = tmp_path / "started"
    env = {**os.environ, "TMPDIR": str(scratch)}
    proc = subprocess.Popen(
        [_gpusight(), "run", "--what-if", "--budget", "120", script.name, str(started)],
        cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + 90
    while not started.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert started.exists(), "the baseline run never started"
    time.sleep(2.0)  # its DataLoader workers are up
    assert len(_processes_running(script.name)) >= 2
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err.decode()[-2000:]
    time.sleep(0.5)
    assert _processes_running(script.name) == []
    assert _ours(scratch) == []


@pytest.mark.timeout(120)
def test_the_budget_is_a_hard_limit_on_the_baseline_too(tmp_path: Path) -> None:
    name = f"slow_start_{os.getpid()}.py"  # a name no other run has
    (tmp_path / name).write_text(SLOW_START)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    t0 = time.monotonic()
    done = subprocess.run(
        [_gpusight(), "run", "--what-if", "--budget", "10", name],
        cwd=tmp_path, env={**os.environ, "TMPDIR": str(scratch)},
        capture_output=True, text=True, timeout=100,
    )  # fmt: skip
    wall = time.monotonic() - t0
    assert done.returncode == 1
    assert "budget ran out (--budget 10 s)" in done.stderr
    assert wall < 25, wall  # 10 s of budget, then the run is stopped (SIGINT, then SIGTERM)
    assert _processes_running(name) == []
    assert _ours(scratch) == []


STUBBORN = """import signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C ignored
signal.signal(signal.SIGTERM, signal.SIG_IGN)
time.sleep(120)
"""


@pytest.mark.timeout(120)
def test_a_run_that_ignores_ctrl_c_and_sigterm_is_killed_within_the_budget(
    tmp_path: Path,
) -> None:
    name = f"stubborn_{os.getpid()}.py"
    (tmp_path / name).write_text(STUBBORN)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    t0 = time.monotonic()
    done = subprocess.run(
        [_gpusight(), "run", "--what-if", "--budget", "10", name],
        cwd=tmp_path, env={**os.environ, "TMPDIR": str(scratch)},
        capture_output=True, text=True, timeout=100,
    )  # fmt: skip
    wall = time.monotonic() - t0
    assert done.returncode == 1
    assert "budget ran out (--budget 10 s)" in done.stderr
    # 10 s of budget, a quarter of it for Ctrl-C, half that for SIGTERM, then SIGKILL (it took
    # 20 s with a fixed 10 s + 3 s).
    assert wall < 15, wall
    assert _processes_running(name) == []
    assert _ours(scratch) == []
