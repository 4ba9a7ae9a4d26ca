"""The watch's sampler process: real child processes (this machine has no NVML, so they sample
the parent's CPU %); the GPU path of the child's loop runs against the stand-in NVML module."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from gpusight.jupyter.monitor import to_tick
from gpusight.watch import nvml_sampler, sampler_process
from gpusight.watch.nvml_sampler import NvmlSampler
from gpusight.watch.sampler_process import ProcessSampler, gpu_sampler
from test_watch_nvml_sampler import FakeNvml

PKG = Path(sampler_process.__file__).resolve().parents[2]


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_samples_the_parents_cpu_on_the_parents_clock() -> None:
    t0 = time.perf_counter()
    s = ProcessSampler((0,), interval_s=0.02, t0=t0).start()
    _busy(0.8)  # the child starts in about 0.2 s here; this process is busy all along
    samples = s.stop()
    elapsed = time.perf_counter() - t0
    assert not s.available
    assert s.reason is not None and "NVML" in s.reason
    assert len(samples) >= 5
    ts = [float(x["t"] or 0) for x in samples]
    assert ts == sorted(ts) and 0 < ts[0] and ts[-1] < elapsed
    # The parent's CPU, not the child's (which sleeps between samples, near 0 %). The parent
    # spins on one core; on two cores shared with other jobs it once read 49.7 %.
    busy = [x["cpu_pct"] for x in samples[1:]]
    assert all(c is not None for c in busy)
    assert sorted(float(c or 0) for c in busy)[len(busy) // 2] > 25
    assert s.busy_s > 0
    assert s.stop() == samples  # stopping twice is harmless


def test_the_gpu_path_round_trips_labels_and_links(monkeypatch: pytest.MonkeyPatch) -> None:
    """The child's loop (``_serve``) with a stand-in NVML, its answer read back by the parent."""
    monkeypatch.setattr(nvml_sampler, "_nvml", lambda: FakeNvml())
    r, w = os.pipe()
    monkeypatch.setattr(sys, "stdin", os.fdopen(r))
    config = {
        "gpus": [3, "GPU-abc"],
        "interval_s": 0.005,
        "t0": time.perf_counter(),
        "labels": [0, 1],
        "max_samples": 100,
        "pcie_every": 2,
        "parent": os.getpid(),
    }
    threading.Timer(0.1, lambda: os.write(w, b"stop\n")).start()
    answer = json.dumps(sampler_process._serve(config)).encode()
    os.close(w)

    s = ProcessSampler((3, "GPU-abc"), labels=(0, 1))
    s._read(answer, b"", 0)
    assert s.available and s.reason is None
    assert s.links == {0: (5, 16)}  # GPU 1 reports no PCIe link
    assert {x["gpu"] for x in s.samples} == {0, 1}
    assert any(x.get("pcie_rx_bps") == 1000 * 1024.0 for x in s.samples)


def test_the_monitors_stream_writes_each_sample_as_a_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """The monitor's child loop (``_stream``) with a stand-in NVML: one JSON line a sample, with
    the host's figures, NVML's state on the first; ``hz`` retimes it and ``stop`` ends it."""
    monkeypatch.setattr(nvml_sampler, "_nvml", lambda: FakeNvml())
    r, w = os.pipe()
    monkeypatch.setattr(sys, "stdin", os.fdopen(r))
    out = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(out))
    config = {
        "gpus": [0, 1],
        "interval_s": 0.5,
        "t0": time.perf_counter(),
        "labels": None,
        "max_samples": 8,
        "pcie_every": 1,
        "parent": os.getpid(),
        "stream": True,
    }
    os.write(w, b"hz 100\n")  # from 2 Hz
    threading.Timer(0.8, lambda: os.write(w, b"stop\n")).start()
    sampler_process._stream(config)
    os.close(w)

    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert len(lines) >= 10  # 2 at 2 Hz
    assert lines[0]["available"] is True and lines[0]["reason"] is None
    assert all("available" not in x for x in lines[1:])
    tick = to_tick(lines[0]["samples"], lines[0]["host"])
    assert [g["gpu"] for g in tick["gpus"]] == [0, 1]
    assert tick["gpus"][0]["util_pct"] == 50.0 and tick["gpus"][0]["pcie_rx_bps"] == 1000 * 1024.0
    assert tick["host"]["host_mem_used_bytes"] > 0 and "cpu_pct" in tick["host"]


def test_a_child_that_fails_says_so() -> None:
    s = ProcessSampler((0,), interval_s=0.02)
    s.config["interval_s"] = "soon"  # the child's float() fails
    s.start()
    assert s.stop() == []
    assert s.reason is not None
    assert s.reason.startswith("the GPU sampler process failed") and "soon" in s.reason


def test_stop_answers_while_a_forked_worker_holds_the_pipe() -> None:
    """DataLoader workers are forks: they hold the child's stdin too, so EOF cannot stop it."""
    s = ProcessSampler((0,), interval_s=0.02).start()
    pid = os.fork()
    if pid == 0:  # the "worker": outlives the stop below
        time.sleep(3)
        os._exit(0)
    try:
        time.sleep(0.3)
        t = time.perf_counter()
        s.stop()
        assert time.perf_counter() - t < 2.0
        assert s.reason is not None and "did not answer" not in s.reason
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().split(")")[-1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_the_child_leaves_with_a_parent_that_died_and_ignores_its_ctrl_c() -> None:
    parent = textwrap.dedent(
        f"""
        import os, sys, time
        sys.path.insert(0, {str(PKG)!r})
        from gpusight.watch.sampler_process import ProcessSampler
        s = ProcessSampler((0,), interval_s=0.02).start()
        print(s._proc.pid, os.getsid(0), flush=True)
        time.sleep(0.5)
        os._exit(0)  # killed, in effect: no stop
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", parent], capture_output=True, text=True, timeout=30, check=True
    )
    child, parent_session = (int(x) for x in out.stdout.split())
    assert not _gone(child)
    assert os.getsid(child) != parent_session  # the terminal's Ctrl-C is not sent to it
    deadline = time.time() + 5
    while not _gone(child) and time.time() < deadline:
        time.sleep(0.1)
    assert _gone(child)


def test_the_watch_falls_back_on_the_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    def cannot(self: ProcessSampler) -> ProcessSampler:
        raise OSError("no fork here")

    monkeypatch.setattr(ProcessSampler, "start", cannot)
    s = gpu_sampler((0,), 0.02, time.perf_counter(), labels=[0])
    try:
        assert isinstance(s, NvmlSampler)
        assert s.reason is not None and "no NVML" in s.reason  # NVML's own reason comes first
    finally:
        s.stop()

    monkeypatch.setattr(nvml_sampler, "_nvml", lambda: FakeNvml())
    s = gpu_sampler((0,), 0.02, time.perf_counter(), labels=[0])
    try:
        assert isinstance(s, NvmlSampler) and s.available
        assert s.reason is not None and "as a thread" in s.reason and "no fork here" in s.reason
    finally:
        s.stop()


def test_an_embedded_interpreter_samples_in_a_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvml_sampler, "_nvml", lambda: FakeNvml())
    monkeypatch.setattr(sys, "executable", "")
    s = gpu_sampler((0,), 0.02, time.perf_counter(), labels=[0])
    try:
        assert isinstance(s, NvmlSampler) and s.available
        assert s.reason is not None and "sys.executable is empty" in s.reason
    finally:
        s.stop()


def test_asking_for_the_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sampler_process.ENV, "thread")
    s = gpu_sampler((0,), 0.02, time.perf_counter(), labels=[0])
    try:
        assert isinstance(s, NvmlSampler)
    finally:
        s.stop()
    monkeypatch.delenv(sampler_process.ENV)
    s = gpu_sampler((0,), 0.02, time.perf_counter(), labels=[0])
    try:
        assert isinstance(s, ProcessSampler)
    finally:
        s.stop()


@pytest.mark.gpu
def test_on_a_gpu_the_watch_samples_it_from_its_process() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    from gpusight.watch.session import Watch

    model = torch.nn.Linear(256, 256).cuda()
    x = torch.randn(64, 256, device="cuda")
    with Watch(warmup=2, profile_steps=0, stop_after_steps=False) as w:
        end = time.perf_counter() + 1.5
        while time.perf_counter() < end:
            model(x).sum().backward()
    assert isinstance(w.sampler, ProcessSampler)
    assert w.sampler.available and w.sampler.reason is None
    assert w.sampler.links  # the GPU's PCIe link, read in the child
    timeline = w.report.to_dict()["run"]["timeline"]
    assert len(timeline) >= 5
    assert all(s.get("util_pct") is not None and s["gpu"] == 0 for s in timeline)
    assert timeline[-1]["t"] < 1.5 + 1.0  # on the watch's clock
