"""The host's system-wide CPU % and memory, for the sidebar's monitor.

Here rather than in ``jupyter/monitor.py`` because the monitor's sampler process
(``sampler_process.py``, stream mode) reads them, so that the user's kernel does no ``/proc``
reads per tick; it imports neither IPython nor comm.
"""

from __future__ import annotations

from typing import Any


class HostReader:
    """System-wide CPU % and memory through psutil (None where psutil is missing)."""

    def __init__(self) -> None:
        try:
            import psutil
        except ImportError:
            self._ps: Any = None
            self.reason: str | None = "psutil is not installed: no host CPU or memory figures"
            return
        self._ps = psutil
        self.reason = None
        psutil.cpu_percent(None)  # primes the counter: the next call measures from here

    @property
    def available(self) -> bool:
        return self._ps is not None

    def read(self) -> dict[str, float | None]:
        if self._ps is None:
            return {}
        out: dict[str, float | None] = {}
        try:
            out["host_cpu_pct"] = float(self._ps.cpu_percent(None))
        except Exception:
            out["host_cpu_pct"] = None
        try:
            vm = self._ps.virtual_memory()
            out["host_mem_used_bytes"] = float(vm.total - vm.available)
            out["host_mem_pct"] = float(vm.percent)
        except Exception:
            out["host_mem_used_bytes"] = out["host_mem_pct"] = None
        return out
