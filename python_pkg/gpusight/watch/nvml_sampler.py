"""Sample GPU utilisation, memory, power, SM clock and PCIe traffic in a loop of its own: a
background thread, or (the watch's and the sidebar's way) a sampler process's main thread.

``NvmlSampler(gpus=[0]).start()`` ... ``samples = sampler.stop()``: plain dicts in the report's
``Sample`` shape (``t`` in seconds since ``t0``). Without NVML (no driver, no nvidia-ml-py) it
samples nothing from the GPU, says why in ``reason``, and records the process' CPU % through
psutil when that is installed. The watch and the sidebar's live charts run the loop in a process
of their own (``sampler_process.py``, :meth:`NvmlSampler.run_here`): in a thread, the Python
between NVML calls takes the GIL from the training thread about ten times a sample.

A sample takes well under a millisecond except PCIe throughput, which NVML measures over 20 ms
(sampled every ``pcie_every`` samples).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

Sample = dict[str, float | int | None]

MIN_CPU_WINDOW_S = 0.05
"""The shortest window a CPU % is read over (or half the sampling interval, if shorter). psutil
counts a process' CPU time in clock ticks (10 ms on Linux): one tick over the sub-millisecond
window between priming the counter and the first sample read as 5,497 %. A shorter window
leaves the counter running: that sample has no CPU figure and the next one reads the whole
window."""


def _nvml() -> Any:
    import pynvml

    return pynvml


class NvmlSampler:
    def __init__(
        self,
        gpus: Sequence[int | str] = (0,),
        interval_s: float = 0.1,
        with_cpu: bool = True,
        max_samples: int = 3000,
        pcie_every: int = 5,
        t0: float | None = None,
        labels: Sequence[int] | None = None,
        cpu_pid: int | None = None,
    ) -> None:
        """``gpus``: NVML indices or UUIDs (``GPU-...``). Each sample's ``gpu`` is ``labels[i]``
        when given (the watch passes torch's device indices), else the NVML index (for a UUID,
        its position in ``gpus``). ``cpu_pid``: whose CPU % to sample (this process's by
        default; the watch's sampler process samples its parent's)."""
        self.interval_s = interval_s
        self.max_samples = max_samples
        self.pcie_every = max(1, pcie_every)
        self.t0 = t0
        self._gpus = list(gpus)
        self._labels = list(labels) if labels is not None else None
        self._with_cpu = with_cpu
        self._cpu_pid = cpu_pid
        self._groups: list[list[Sample]] = []  # one group (one sample per GPU) per tick
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._handles: list[tuple[int, Any]] = []
        self._nv: Any = None
        self._proc: Any = None
        self._cpu_at = 0.0  # perf_counter() of the CPU counter's last reading (or priming)
        self._listeners: list[Callable[[list[Sample]], None]] = []
        self.reason: str | None = None
        """Why GPU metrics are missing (None when NVML works)."""
        self.busy_s = 0.0
        """Seconds spent taking samples (the sampler's own cost)."""
        self.links: dict[int | str, tuple[int, int]] = {}
        """Per GPU (as labelled in the samples): the PCIe generation and width its link can run
        at (its maximum: an idle link trains down to save power)."""

    @property
    def available(self) -> bool:
        return bool(self._handles)

    @property
    def samples(self) -> list[Sample]:
        with self._lock:
            return [s for group in self._groups for s in group]

    def subscribe(self, listener: Callable[[list[Sample]], None]) -> None:
        """Call ``listener(new_samples)`` from the sampler thread after each sample."""
        self._listeners.append(listener)

    def _open(self) -> None:
        try:
            nv = _nvml()
            nv.nvmlInit()
        except Exception as exc:
            self.reason = f"no NVML ({type(exc).__name__}: {exc}): GPU timeline not recorded"
            return
        self._nv = nv
        for i, gpu in enumerate(self._gpus):
            try:
                if isinstance(gpu, str):
                    uuid = gpu if gpu.startswith(("GPU-", "MIG-")) else f"GPU-{gpu}"
                    h = nv.nvmlDeviceGetHandleByUUID(uuid)
                else:
                    h = nv.nvmlDeviceGetHandleByIndex(int(gpu))
            except Exception as exc:
                self.reason = f"NVML cannot open GPU {gpu}: {exc}"
                continue
            label = (
                self._labels[i]
                if self._labels is not None
                else (gpu if isinstance(gpu, int) else i)
            )
            self._handles.append((label, h))
            try:
                gen = int(nv.nvmlDeviceGetMaxPcieLinkGeneration(h))
                width = int(nv.nvmlDeviceGetMaxPcieLinkWidth(h))
                self.links[label] = (gen, width)
            except Exception:
                pass  # not PCIe-attached, or not reported: the copy estimate gives a range
        if not self._handles:
            self._close_nvml()

    def _close_nvml(self) -> None:
        if self._nv is not None:
            try:
                self._nv.nvmlShutdown()
            except Exception:
                pass
            self._nv = None

    def _prepare(self) -> bool:
        """Open NVML and the CPU counter; False when there is nothing to sample."""
        if self.t0 is None:
            self.t0 = time.perf_counter()
        self._open()
        if self._with_cpu:
            try:
                import psutil

                self._proc = psutil.Process(self._cpu_pid)
                self._proc.cpu_percent(None)  # primes the counter
                self._cpu_at = time.perf_counter()
            except Exception:
                self._proc = None
        return bool(self._handles) or self._proc is not None

    def start(self) -> NvmlSampler:
        if self._thread is not None:
            return self
        if not self._prepare():
            return self
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="gpusight-nvml", daemon=True)
        self._thread.start()
        return self

    def run_here(self) -> list[Sample]:
        """Sample in the calling thread until :meth:`halt` (the sampler process's loop); then
        :meth:`stop` closes NVML."""
        if self._prepare():
            self._run()
        return self.samples

    def halt(self) -> None:
        self._stop.set()

    def halted(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for :meth:`halt`; whether it came."""
        return self._stop.wait(timeout)

    def stop(self) -> list[Sample]:
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            thread.join(timeout=2.0)
        self._close_nvml()
        self._handles = []
        return self.samples

    def sample_once(self, n: int = 0) -> list[Sample]:
        t = time.perf_counter() - (self.t0 or 0.0)
        out: list[Sample] = []
        cpu = self._read_cpu()
        if not self._handles:
            return [{"t": round(t, 4), "cpu_pct": cpu}]
        for gpu, h in self._handles:
            s: Sample = {"t": round(t, 4), "gpu": gpu, "cpu_pct": cpu}
            s.update(self._read_gpu(h, pcie=n % self.pcie_every == 0))
            out.append(s)
        return out

    def _read_cpu(self) -> float | None:
        """The process' CPU % (summed over cores) since the last reading; None without psutil
        and over too short a window (``MIN_CPU_WINDOW_S``), which leaves the counter running."""
        if self._proc is None:
            return None
        now = time.perf_counter()
        if now - self._cpu_at < min(MIN_CPU_WINDOW_S, self.interval_s / 2):
            return None
        self._cpu_at = now
        try:
            return float(self._proc.cpu_percent(None))
        except Exception:
            return None

    def _read_gpu(self, h: Any, pcie: bool) -> Sample:
        """One GPU's readings; a field NVML cannot read is None."""
        nv = self._nv
        util = _call(nv.nvmlDeviceGetUtilizationRates, h)
        mem = _call(nv.nvmlDeviceGetMemoryInfo, h)
        power = _call(nv.nvmlDeviceGetPowerUsage, h)
        clock = _call(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM)
        s: Sample = {
            "util_pct": float(util.gpu) if util is not None else None,
            "mem_used_bytes": float(mem.used) if mem is not None else None,
            "power_w": power / 1000.0 if power is not None else None,
            "sm_clock_mhz": float(clock) if clock is not None else None,
        }
        if pcie:
            # KB/s over NVML's 20 ms window.
            rx = _call(nv.nvmlDeviceGetPcieThroughput, h, nv.NVML_PCIE_UTIL_RX_BYTES)
            tx = _call(nv.nvmlDeviceGetPcieThroughput, h, nv.NVML_PCIE_UTIL_TX_BYTES)
            s["pcie_rx_bps"] = rx * 1024.0 if rx is not None else None
            s["pcie_tx_bps"] = tx * 1024.0 if tx is not None else None
        return s

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            began = time.perf_counter()
            new = self.sample_once(n)
            with self._lock:
                self._groups.append(new)
                if len(self._groups) * len(new) > self.max_samples:
                    # Keep the whole run at half the resolution rather than only its end.
                    self._groups = self._groups[::2]
            for listener in self._listeners:
                try:
                    listener(new)
                except Exception:
                    pass
            n += 1
            spent = time.perf_counter() - began
            self.busy_s += spent
            self._stop.wait(max(0.0, self.interval_s - spent))


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:
        return None
