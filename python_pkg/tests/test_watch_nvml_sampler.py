"""The NVML sampler: without NVML (this machine) it says why and samples the host's CPU;
its GPU path runs against a stand-in NVML module with pynvml's call signatures."""

from __future__ import annotations

import sys
import time
from types import SimpleNamespace
from typing import Any

import pytest
from gpusight.watch import nvml_sampler
from gpusight.watch.nvml_sampler import NvmlSampler


def test_without_nvml_samples_cpu_and_says_why() -> None:
    s = NvmlSampler((0,), interval_s=0.02).start()
    time.sleep(0.15)
    samples = s.stop()
    assert not s.available
    assert s.reason is not None and "NVML" in s.reason
    assert samples and all(set(x) == {"t", "cpu_pct"} for x in samples)
    assert [x["t"] for x in samples] == sorted(x["t"] for x in samples)
    assert s.stop() == samples  # stopping twice is harmless


class FakeNvml:
    """pynvml's names and return shapes; GPU 1 fails its power reading."""

    NVML_CLOCK_SM = 1
    NVML_PCIE_UTIL_TX_BYTES = 0
    NVML_PCIE_UTIL_RX_BYTES = 1

    def __init__(self) -> None:
        self.inits = 0

    def nvmlInit(self) -> None:
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.inits -= 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> int:
        assert uuid.startswith("GPU-")
        return 1

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        return SimpleNamespace(gpu=50 + h, memory=10)

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        return SimpleNamespace(used=(h + 1) * 2**30, total=80 * 2**30)

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        if h == 1:
            raise RuntimeError("not supported")
        return 350_000

    def nvmlDeviceGetClockInfo(self, h: int, kind: int) -> int:
        return 1980

    def nvmlDeviceGetPcieThroughput(self, h: int, counter: int) -> int:
        return 1000 if counter == self.NVML_PCIE_UTIL_RX_BYTES else 10

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: int) -> int:
        if h == 1:
            raise RuntimeError("not supported")  # a GPU not on PCIe (an SXM module's C2C)
        return 5

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: int) -> int:
        return 16


def test_gpu_samples_with_labels_and_downsampling(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml()
    monkeypatch.setattr(nvml_sampler, "_nvml", lambda: fake)
    s = NvmlSampler((3, "GPU-abc"), interval_s=0.001, labels=(0, 1), max_samples=20, pcie_every=2)
    s.start()
    time.sleep(0.2)
    samples = s.stop()
    assert fake.inits == 0  # NVML shut down again
    assert s.available is False and s.reason is None
    assert len(samples) <= 20 + 2 and len(samples) % 2 == 0
    gpu0 = [x for x in samples if x["gpu"] == 0]
    gpu1 = [x for x in samples if x["gpu"] == 1]
    assert len(gpu0) == len(gpu1)  # downsampling kept both GPUs of each tick
    first = samples[0]
    assert first["util_pct"] == 53.0 and first["mem_used_bytes"] == 4 * 2**30
    assert first["power_w"] == 350.0 and first["sm_clock_mhz"] == 1980.0
    assert first["pcie_rx_bps"] == 1000 * 1024.0 and first["pcie_tx_bps"] == 10 * 1024.0
    assert gpu1[0]["power_w"] is None  # an unreadable field, not a failed sample
    assert s.links == {0: (5, 16)}  # GPU 1 reports no link: left out, not guessed
    # downsampling halves the resolution across the whole run, not only its start
    assert samples[-1]["t"] > 0.1


def test_listener_gets_each_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvml_sampler, "_nvml", FakeNvml)
    got: list[list[dict[str, Any]]] = []
    s = NvmlSampler((0,), interval_s=0.01)
    s.subscribe(got.append)
    s.start()
    time.sleep(0.08)
    s.stop()
    assert got and all(len(group) == 1 and group[0]["gpu"] == 0 for group in got)


class TickedProcess:
    """psutil.Process's cpu_percent(None) as psutil computes it: CPU time counted in 10 ms clock
    ticks, over the wall time since the previous call; the process is always busy."""

    def __init__(self, clock: list[float]) -> None:
        self.clock = clock
        self.last: float | None = None

    def cpu_percent(self, interval: None = None) -> float:
        now, last, self.last = self.clock[0], self.last, self.clock[0]
        if last is None:
            return 0.0  # priming
        ticks = max(1, round((now - last) / 0.01))  # one tick at least: it ran
        return 100.0 * ticks * 0.01 / (now - last)


def _no_nvml() -> Any:
    raise ImportError("no pynvml")


def test_cpu_is_never_read_over_the_priming_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first sample came a fraction of a millisecond after the counter was primed: one
    10 ms clock tick over 0.18 ms read as 5,497 % (issue #36). It has no CPU figure now."""
    clock = [100.0]
    monkeypatch.setattr(nvml_sampler.time, "perf_counter", lambda: clock[0])
    proc = TickedProcess(clock)
    monkeypatch.setitem(sys.modules, "psutil", SimpleNamespace(Process=lambda pid=None: proc))
    monkeypatch.setattr(nvml_sampler, "_nvml", _no_nvml)
    s = NvmlSampler((0,), interval_s=0.1, t0=100.0)
    assert s._prepare()  # primes the counter at t = 100 s
    clock[0] += 0.00018
    first = s.sample_once(0)
    assert first == [{"t": 0.0002, "cpu_pct": None}]
    readings = []
    for n in range(1, 4):
        clock[0] += 0.1
        readings.append(s.sample_once(n)[0]["cpu_pct"])
    # Each later sample reads its whole window (the first one's included), a busy core's 100 %.
    assert readings[0] == pytest.approx(100.0, rel=0.05)
    assert all(r is not None and r <= 105.0 for r in readings)
