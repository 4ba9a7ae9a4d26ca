"""The benchmarked GPU as NVML sees it: PCIe link, and SM clock, power and clock-event reasons
sampled while a benchmark loads the device.

A benchmark below its datasheet rate is only half a fact: the GPU's own account of why its clocks
are where they are (``sw_power_cap``: held at the power limit; ``hw_slowdown``,
``*_thermal_slowdown``: protection) is the other half. Everything here is optional: without
pynvml or a driver, or for a device NVML cannot match, the readings are None and the benchmarks
run as before.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from ..probes.nvml_info import decode_clock_reasons

# Reasons that mean "held below the boost clock by a limit" (gpu_idle only means no work).
LIMIT_REASONS = (
    "sw_power_cap",
    "hw_slowdown",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
)


def handle_for(pynvml: Any, index: int) -> Any:
    """The NVML handle of torch's device ``index``: by UUID, then PCI bus id, then index (only
    when CUDA_VISIBLE_DEVICES cannot have renumbered the devices)."""
    import torch

    props = torch.cuda.get_device_properties(index)
    uuid = getattr(props, "uuid", None)
    if uuid is not None:
        text = str(uuid)
        for cand in (text, f"GPU-{text}"):
            try:
                return pynvml.nvmlDeviceGetHandleByUUID(cand)
            except Exception:
                continue
    bus = getattr(props, "pci_bus_id", None)
    if bus is not None:
        dom = int(getattr(props, "pci_domain_id", 0) or 0)
        dev = int(getattr(props, "pci_device_id", 0) or 0)
        bus_id = f"{dom:08X}:{int(bus):02X}:{dev:02X}.0"
        for fn_name in ("nvmlDeviceGetHandleByPciBusId_v2", "nvmlDeviceGetHandleByPciBusId"):
            fn = getattr(pynvml, fn_name, None)
            if fn is None:
                continue
            try:
                return fn(bus_id)
            except Exception:
                continue
    if not os.environ.get("CUDA_VISIBLE_DEVICES"):
        return pynvml.nvmlDeviceGetHandleByIndex(index)
    return None


@dataclass(frozen=True)
class ClockSample:
    t: float  # time.perf_counter()
    sm_mhz: float | None
    power_w: float | None
    reasons: int | None
    temperature_c: float | None


@dataclass
class ClockSummary:
    """What the samples taken under load say: medians, extremes, and every reason seen."""

    samples: int
    sm_clock_mhz: float | None
    sm_clock_min_mhz: float | None
    sm_clock_max_mhz: float | None  # the GPU's maximum SM clock (NVML), not the largest sample
    power_w: float | None
    power_max_w: float | None
    power_limit_w: float | None
    power_source: str | None
    temperature_c: float | None
    reasons: list[str] = field(default_factory=list)

    @property
    def limits(self) -> list[str]:
        return [r for r in self.reasons if r in LIMIT_REASONS]

    def params(self) -> dict[str, Any]:
        """Benchmark params (scalars): the GPU's state while the benchmark was timed."""
        return {
            "sm_clock_mhz": _round(self.sm_clock_mhz),
            "sm_clock_min_mhz": _round(self.sm_clock_min_mhz),
            "sm_clock_max_mhz": _round(self.sm_clock_max_mhz),
            "power_w": _round(self.power_w),
            "power_limit_w": _round(self.power_limit_w),
            "power_source": self.power_source,
            "temperature_c": _round(self.temperature_c),
            "clock_events": ", ".join(self.reasons) if self.reasons else "none",
            "nvml_samples": self.samples,
            "gpu_state": self.describe(),
        }

    def describe(self) -> str:
        """One phrase for a report: 'power-capped at 700 W (sw_power_cap): SM clock 1,755 of
        1,980 MHz, 695 W, 62 °C'."""
        parts: list[str] = []
        if self.sm_clock_mhz is not None:
            top = f" of {self.sm_clock_max_mhz:,.0f}" if self.sm_clock_max_mhz else ""
            parts.append(f"SM clock {self.sm_clock_mhz:,.0f}{top} MHz")
        if self.power_w is not None:
            parts.append(f"{self.power_w:,.0f} W")
        if self.temperature_c is not None:
            parts.append(f"{self.temperature_c:.0f} °C")
        state = ", ".join(parts) or "no NVML readings"
        limits = self.limits
        if "sw_power_cap" in limits and self.power_limit_w:
            head = f"power-capped at {self.power_limit_w:,.0f} W ({', '.join(limits)})"
        elif limits:
            head = f"clocks held down ({', '.join(limits)})"
        elif self.samples:
            head = "no clock limit reported"
        else:
            return state
        return f"{head}: {state}"


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


class GpuNvml:
    """NVML for one torch device, or nothing (no pynvml, no driver, no match): then every
    reading is None and ``why`` says why."""

    def __init__(self, index: int) -> None:
        self.handle: Any = None
        self.pynvml: Any = None
        self.why: str | None = None
        self.samples: list[ClockSample] = []
        self._power_field: bool | None = None  # instant power readable as a field value?
        try:
            import pynvml

            pynvml.nvmlInit()
            self.pynvml = pynvml
            self.handle = handle_for(pynvml, index)
            if self.handle is None:
                self.why = "no NVML device matches this CUDA device"
        except Exception as exc:
            self.handle = None
            self.why = f"NVML unavailable: {type(exc).__name__}: {exc}"[:200]

    def _int(self, name: str, *args: Any) -> int | None:
        if self.handle is None:
            return None
        fn = getattr(self.pynvml, name, None)
        if fn is None:
            return None
        try:
            return int(fn(self.handle, *args))
        except Exception:
            return None

    def pcie(self) -> tuple[int | None, int | None]:
        gen = self._int("nvmlDeviceGetCurrPcieLinkGeneration")
        width = self._int("nvmlDeviceGetCurrPcieLinkWidth")
        return (gen or None), (width or None)

    def pcie_max(self) -> tuple[int | None, int | None]:
        gen = self._int("nvmlDeviceGetMaxPcieLinkGeneration")
        width = self._int("nvmlDeviceGetMaxPcieLinkWidth")
        return (gen or None), (width or None)

    def _power_mw(self) -> int | None:
        """Instantaneous power where the driver has the field: nvmlDeviceGetPowerUsage averages
        over one second on Ampere and newer, too slow for a benchmark of a second."""
        p = self.pynvml
        if self._power_field is not False:
            try:
                value = p.nvmlDeviceGetFieldValues(self.handle, [p.NVML_FI_DEV_POWER_INSTANT])[0]
                if int(value.nvmlReturn) == 0:
                    self._power_field = True
                    return int(value.value.uiVal)
            except Exception:
                pass
            self._power_field = False
        return self._int("nvmlDeviceGetPowerUsage")

    def sample(self) -> ClockSample | None:
        """Read SM clock, power, clock-event reasons and temperature now; kept for summary()."""
        if self.handle is None:
            return None
        p = self.pynvml
        sm = self._int("nvmlDeviceGetClockInfo", p.NVML_CLOCK_SM)
        mw = self._power_mw()
        reasons = self._int("nvmlDeviceGetCurrentClocksEventReasons")
        if reasons is None:
            reasons = self._int("nvmlDeviceGetCurrentClocksThrottleReasons")
        temp = self._int("nvmlDeviceGetTemperatureV", p.NVML_TEMPERATURE_GPU)
        if temp is None:
            temp = self._int("nvmlDeviceGetTemperature", p.NVML_TEMPERATURE_GPU)
        s = ClockSample(
            t=time.perf_counter(),
            sm_mhz=float(sm) if sm is not None else None,
            power_w=mw / 1000 if mw is not None else None,
            reasons=reasons,
            temperature_c=float(temp) if temp is not None else None,
        )
        self.samples.append(s)
        return s

    def reset(self) -> None:
        self.samples = []

    def summary(self, since: float | None = None, until: float | None = None) -> ClockSummary:
        """Medians (max for temperature) of the samples taken within [since, until]
        (``time.perf_counter()``; None: unbounded)."""
        picked = [
            s
            for s in list(self.samples)
            if (since is None or s.t >= since) and (until is None or s.t <= until)
        ]
        sms = [s.sm_mhz for s in picked if s.sm_mhz is not None]
        watts = [s.power_w for s in picked if s.power_w is not None]
        temps = [s.temperature_c for s in picked if s.temperature_c is not None]
        mask = 0
        for s in picked:
            mask |= s.reasons or 0
        limit_mw = self._int("nvmlDeviceGetEnforcedPowerLimit")
        top = self._int("nvmlDeviceGetMaxClockInfo", self.pynvml.NVML_CLOCK_SM) if picked else None
        source = None
        if watts:
            source = "instant" if self._power_field else "1 s average (nvmlDeviceGetPowerUsage)"
        return ClockSummary(
            samples=len(picked),
            sm_clock_mhz=statistics.median(sms) if sms else None,
            sm_clock_min_mhz=min(sms) if sms else None,
            sm_clock_max_mhz=float(top) if top else None,
            power_w=statistics.median(watts) if watts else None,
            power_max_w=max(watts) if watts else None,
            power_limit_w=limit_mw / 1000 if limit_mw else None,
            power_source=source,
            temperature_c=max(temps) if temps else None,
            reasons=decode_clock_reasons(mask) if picked else [],
        )

    def close(self) -> None:
        if self.pynvml is not None:
            try:
                self.pynvml.nvmlShutdown()  # reference counted: others' NVML stays open
            except Exception:
                pass
            self.pynvml = None
            self.handle = None
