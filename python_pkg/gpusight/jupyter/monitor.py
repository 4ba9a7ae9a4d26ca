"""The live monitor behind the sidebar: NVML samples (or the host's CPU and memory) at 2-10 Hz.

``Sampler(hz=5, capacity=3000, on_tick=send).start()`` calls ``on_tick(tick)`` once per tick
and keeps the last ``capacity`` ticks in a ring (``collections.deque``), so an hour at 10 Hz costs
no more memory than the ring holds. A tick is::

    {"t": 12.3,                      # seconds on the sampler's clock (see now())
     "gpus": [{"gpu": 0, "util_pct": 97.0, "mem_used_bytes": ..., "power_w": ...,
               "sm_clock_mhz": ..., "pcie_rx_bps": ..., "pcie_tx_bps": ...}],
     "host": {"cpu_pct": ..., "host_cpu_pct": ..., "host_mem_used_bytes": ..., "host_mem_pct": ...}}

The readings come from the watch's :class:`~gpusight.watch.nvml_sampler.NvmlSampler` (one NVML
reader in the package) and the host figures (psutil), both read in a child process that streams
each tick back as a line (:class:`~gpusight.watch.sampler_process.StreamingSampler`): as a thread
of the kernel the sampler took the GIL from the user's training loop about ten times a tick
(+2.3 % of a launch-bound step on an H200, +0.9 % as a process), while the kernel's reader of
those lines does one blocking read and a parse a tick. Where no process can start, or the child
dies, the same loop runs as a thread here and ``fallback`` says why; ``GPUSIGHT_SAMPLER=thread``
asks for the thread. This module adds the ring and a clock that survives pause and resume.
Without NVML ``gpus`` is empty and ``reason`` says why.

Imports neither IPython nor comm: ``benchmarks/gpu_monitor.py`` runs it in a plain Python.
"""

from __future__ import annotations

import importlib.util
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ..watch.host_reader import HostReader
from ..watch.nvml_sampler import NvmlSampler
from ..watch.sampler_process import StreamingSampler, pcie_every, thread_asked

Tick = dict[str, Any]
Sample = dict[str, float | int | None]

MIN_HZ = 2.0
MAX_HZ = 10.0
MIN_CAPACITY = 60
MAX_CAPACITY = 36_000

_GPU_KEYS = (
    "util_pct",
    "mem_used_bytes",
    "power_w",
    "sm_clock_mhz",
    "pcie_rx_bps",
    "pcie_tx_bps",
)


def clamp_hz(hz: float) -> float:
    """The sidebar's range (schema/plugin.json): 2-10 Hz."""
    return min(MAX_HZ, max(MIN_HZ, float(hz)))


def clamp_capacity(capacity: int) -> int:
    return min(MAX_CAPACITY, max(MIN_CAPACITY, int(capacity)))


def gpu_inventory() -> tuple[list[dict[str, Any]], str | None]:
    """The GPUs NVML sees (index, name, total memory, limits) and, if none, why."""
    from ..probes.nvml_info import probe

    try:
        facts = probe()
    except Exception as exc:  # a probe bug must not stop the monitor: host figures still work
        return [], f"NVML probe failed: {type(exc).__name__}: {exc}"
    if not facts.available:
        return [], facts.why or "NVML is not available"
    gpus = [
        {
            "index": g.index,
            "name": g.name,
            "uuid": g.uuid,
            "memory_total_bytes": g.memory_total_bytes,
            "power_limit_w": g.power_limit_w,
            "sm_clock_max_mhz": g.sm_clock_max_mhz,
        }
        for g in facts.gpus
        if not g.errors.get("handle")
    ]
    return gpus, None if gpus else "NVML sees no GPU on this machine"


def to_tick(group: list[Sample], host: dict[str, float | None]) -> Tick:
    """One NvmlSampler group (one sample per GPU, or one GPU-less sample) as a tick."""
    t = float(group[0]["t"] or 0.0) if group else 0.0
    cpu = group[0].get("cpu_pct") if group else None
    gpus = [
        {"gpu": int(s["gpu"] or 0), **{k: s[k] for k in _GPU_KEYS if k in s}}
        for s in group
        if s.get("gpu") is not None
    ]
    return {"t": t, "gpus": gpus, "host": {"cpu_pct": cpu, **host}}


class Sampler:
    """A bounded, pausable stream of monitor ticks; see the module docstring."""

    def __init__(
        self,
        hz: float = 5.0,
        capacity: int = 3000,
        *,
        on_tick: Callable[[Tick], None] | None = None,
        gpus: list[int] | None = None,
    ) -> None:
        self._hz = clamp_hz(hz)
        self._ring: deque[Tick] = deque(maxlen=clamp_capacity(capacity))
        self.on_tick = on_tick
        self._gpu_filter = gpus
        self._t0 = time.perf_counter()
        self._lock = threading.RLock()
        # Held while a tick is recorded (and on_tick runs): stop() waits on it, outside _lock,
        # so that an on_tick that calls configure() cannot deadlock against it.
        self._tick_lock = threading.Lock()
        self._tick_thread: int | None = None
        # The running sampler: the child process's stream, or (the fallback) the thread.
        self._inner: StreamingSampler | NvmlSampler | None = None
        self._host: HostReader | None = None  # the thread's; the child reads its own
        self._inventory: tuple[list[dict[str, Any]], str | None] | None = None
        self.errors = 0
        """Ticks whose ``on_tick`` raised (the stream goes on; the count says it happened)."""
        self.fallback: str | None = None
        """Why the sampling runs in a thread of this process rather than in a child process
        (None while a process samples, or where ``GPUSIGHT_SAMPLER=thread`` asked for it)."""

    # --- clock and configuration ----------------------------------------------------------

    def now(self) -> float:
        """Seconds on the ticks' clock: cell marks use it, so they line up with the samples."""
        return time.perf_counter() - self._t0

    @property
    def hz(self) -> float:
        return self._hz

    @property
    def capacity(self) -> int:
        return self._ring.maxlen or 0

    def configure(self, hz: float | None = None, capacity: int | None = None) -> None:
        """Change the rate or the ring's size; a running sampler goes on at the new rate.

        Safe from inside ``on_tick``: the sampler is retimed, not restarted (the thread that
        calls ``on_tick`` cannot join itself)."""
        with self._lock:
            if capacity is not None and clamp_capacity(capacity) != self.capacity:
                self._ring = deque(self._ring, maxlen=clamp_capacity(capacity))
            if hz is not None and clamp_hz(hz) != self._hz:
                self._hz = clamp_hz(hz)
                inner = self._inner
                if isinstance(inner, StreamingSampler):
                    inner.retime(self._hz)
                elif inner is not None:
                    inner.interval_s = 1.0 / self._hz
                    inner.pcie_every = pcie_every(self._hz)

    # --- what is measured -----------------------------------------------------------------

    def inventory(self) -> tuple[list[dict[str, Any]], str | None]:
        """(GPUs, reason none are sampled); probed once, NVML is not re-initialised per call."""
        if self._inventory is None:
            gpus, reason = gpu_inventory()
            if self._gpu_filter is not None:
                gpus = [g for g in gpus if g["index"] in self._gpu_filter]
                reason = reason or (None if gpus else "none of the requested GPUs exists")
            self._inventory = (gpus, reason)
        return self._inventory

    @property
    def source(self) -> str:
        """``nvml`` (GPU figures), ``host`` (psutil only) or ``none``."""
        gpus, _ = self.inventory()
        if gpus:
            return "nvml"
        return "host" if importlib.util.find_spec("psutil") is not None else "none"

    @property
    def reason(self) -> str | None:
        """Why there are no GPU figures (None when NVML samples at least one GPU)."""
        inner = self._inner
        if inner is not None and not inner.available and self.inventory()[0]:
            return inner.reason
        return self.inventory()[1]

    # --- running --------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._inner is not None

    @property
    def child_pid(self) -> int | None:
        """The pid of the process that samples, while one does (None for the thread)."""
        inner = self._inner
        return inner.pid if isinstance(inner, StreamingSampler) else None

    def start(self) -> Sampler:
        """Start sampling (again); calling it while running does nothing."""
        with self._lock:
            if self._inner is None:
                self._start_inner()
        return self

    def stop(self) -> None:
        """Stop the sampler and join its thread; the ring keeps what it holds. Safe to call twice.

        Returns once no ``on_tick`` runs any more (a slow one is waited for), and no tick is
        recorded after it. From inside ``on_tick`` it returns at once: the thread ends when
        that call returns."""
        with self._lock:
            inner, self._inner = self._inner, None
        if inner is None:
            return
        if self._tick_thread == threading.get_ident():
            # Called by on_tick on the thread that calls it, which cannot join itself.
            threading.Thread(target=inner.stop, name="gpusight-monitor-stop", daemon=True).start()
            return
        inner.stop()
        with self._tick_lock:  # a tick in flight (a slow on_tick) is over
            pass

    def _start_inner(self) -> None:
        gpus = [g["index"] for g in self.inventory()[0]]
        if thread_asked():
            self.fallback = None  # asked for
            self._start_thread(gpus)
            return
        child = StreamingSampler(
            gpus,
            hz=self._hz,
            t0=self._t0,  # the ticks' times on this clock (perf_counter is system-wide)
            max_samples=max(8, 2 * len(gpus)),
            on_exit=lambda why: self._child_ended(child, gpus, why),
        )
        child.subscribe(self._listener(child))
        self._inner = child
        try:
            child.start()
        except OSError as exc:
            self._start_thread(gpus)
            self.fallback = f"no process could start ({exc}): sampling in a thread of the kernel"
            return
        self.fallback = None

    def _child_ended(self, child: StreamingSampler, gpus: list[int], why: str) -> None:
        """The sampler process ended unasked (on its reader's thread): go on in a thread."""
        with self._lock:
            if self._inner is not child:  # stopped meanwhile: that was the end asked for
                return
            self._start_thread(gpus)
            # Set once the thread is in place: whoever reads it sees the sampler it speaks of.
            self.fallback = f"the sampler process ended ({why}): sampling in a thread of the kernel"

    def _start_thread(self, gpus: list[int]) -> None:
        self._host = HostReader()
        inner = NvmlSampler(
            gpus=gpus,
            interval_s=1.0 / self._hz,
            with_cpu=True,
            # The inner list is only a by-product here (this ring is the history): keep it tiny.
            max_samples=max(8, 2 * len(gpus)),
            pcie_every=pcie_every(self._hz),
            t0=self._t0,
        )
        inner.subscribe(self._listener(inner))
        self._inner = inner
        inner.start()

    def _listener(self, inner: StreamingSampler | NvmlSampler) -> Callable[..., None]:
        def on_group(group: list[Sample], host: dict[str, float | None] | None = None) -> None:
            with self._tick_lock:
                if self._inner is not inner:  # stopped (or restarted) meanwhile: not ours
                    return
                self._tick_thread = threading.get_ident()
                try:
                    self.record(group, host)
                finally:
                    self._tick_thread = None

        return on_group

    def record(self, group: list[Sample], host: dict[str, float | None] | None = None) -> Tick:
        """Add one NvmlSampler group to the ring (the reader or sampler thread calls this every
        tick); ``host``: the host figures the sampler process read with it, else read here."""
        if host is None:
            host = self._host.read() if self._host is not None else {}
        tick = to_tick(group, host)
        self._ring.append(tick)
        callback = self.on_tick
        if callback is not None:
            try:
                callback(tick)
            except Exception:
                self.errors += 1
        return tick

    # --- reading the ring -----------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._ring)

    def ticks(self, since: float | None = None) -> list[Tick]:
        """The ring's ticks, oldest first; with ``since``, only those after that time."""
        ticks = list(self._ring)  # one C-level copy: safe while the thread appends
        if since is None:
            return ticks
        return [t for t in ticks if t["t"] > since]

    def samples(self) -> list[Sample]:
        """The ring as the report's flat ``Sample`` rows (one per GPU per tick)."""
        out: list[Sample] = []
        for tick in self.ticks():
            cpu = tick["host"].get("cpu_pct")
            if not tick["gpus"]:
                out.append({"t": tick["t"], "cpu_pct": cpu})
            for g in tick["gpus"]:
                out.append({"t": tick["t"], **g, "cpu_pct": cpu})
        return out

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
