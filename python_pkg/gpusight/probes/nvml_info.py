"""Facts from NVML (nvidia-ml-py): driver, and per GPU power, clocks, PCIe, MIG, processes.

NVML sees every GPU on the host whatever CUDA_VISIBLE_DEVICES says, and works without
creating a CUDA context. Each field is read on its own: an old driver or a GPU without
the feature ("Not Supported") loses that field, not the report.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .facts import GpuProcessFact, NvmlFacts, NvmlGpu

# nvmlClocksEventReason* bits (the same values as the older nvmlClocksThrottleReason*).
CLOCK_EVENT_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}

COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}

# NVML_ERROR_* codes we explain in words.
_LIBRARY_NOT_FOUND = 12
_DRIVER_NOT_LOADED = 9
_NO_PERMISSION = 4
_LIB_RM_VERSION_MISMATCH = 18


def decode_clock_reasons(mask: int) -> list[str]:
    """Bitmask from nvmlDeviceGetCurrentClocksEventReasons -> names; unknown bits kept as hex."""
    names = [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]
    rest = mask & ~sum(CLOCK_EVENT_REASONS)
    bit = 1
    while rest:
        if rest & bit:
            names.append(f"0x{bit:x}")
            rest &= ~bit
        bit <<= 1
    return names


def decode_cuda_version(value: int) -> tuple[int, int]:
    """NVML's CUDA version integer (1000 * major + 10 * minor) -> (major, minor)."""
    return value // 1000, (value % 1000) // 10


def init_failure(code: int | None, text: str) -> str:
    """Why NVML could not start, with what to do about it."""
    if code == _LIBRARY_NOT_FOUND:
        return (
            "NVML library libnvidia-ml.so.1 not found: no NVIDIA driver is installed here, "
            "or this container was started without GPU access (docker run --gpus all)"
        )
    if code == _DRIVER_NOT_LOADED:
        return "the NVIDIA kernel driver is not loaded (check `dmesg`; reboot after installing it)"
    if code == _LIB_RM_VERSION_MISMATCH:
        return (
            "NVML and the kernel driver are different versions (the driver was updated "
            "without a reboot): reboot, or reload the nvidia kernel modules"
        )
    if code == _NO_PERMISSION:
        return "no permission to open /dev/nvidia* (add the user to the video group)"
    return f"NVML failed to initialise: {text}"


def _reader(pynvml: Any, errors: dict[str, str]) -> Callable[..., Any]:
    def read(key: str, *calls: tuple[str, tuple[Any, ...]]) -> Any:
        """First of the named pynvml calls that works (newer API first); None if none does."""
        last = "not in this nvidia-ml-py"
        for name, args in calls:
            fn = getattr(pynvml, name, None)
            if fn is None:
                continue
            try:
                return fn(*args)
            except pynvml.NVMLError as exc:
                # "Function Not Found" (driver older than this nvidia-ml-py) or a versioned
                # struct the driver rejects: the older call may still answer.
                last = str(exc)
            except Exception as exc:  # NVMLLibraryMismatchError from unversioned wrappers
                last = f"{type(exc).__name__}: {exc}"
        errors[key] = last
        return None

    return read


def _processes(pynvml: Any, h: Any, read: Callable[..., Any]) -> list[GpuProcessFact] | None:
    out: list[GpuProcessFact] = []
    ok = False
    for kind, base in (("compute", "Compute"), ("graphics", "Graphics")):
        calls = (
            (f"nvmlDeviceGet{base}RunningProcesses", (h,)),
            (f"nvmlDeviceGet{base}RunningProcesses_v2", (h,)),
        )
        procs = read(f"processes.{kind}", *calls)
        if procs is None:
            continue
        ok = True
        for p in procs:
            if any(q.pid == p.pid for q in out):
                continue
            name = None
            try:
                name = pynvml.nvmlSystemGetProcessName(p.pid)
            except Exception:  # another container's pid, or no permission: the name is optional
                pass
            used = getattr(p, "usedGpuMemory", None)
            out.append(
                GpuProcessFact(
                    pid=int(p.pid),
                    name=str(name) if name else None,
                    used_memory_bytes=int(used) if used is not None else None,
                    kind=kind,
                )
            )
    return out if ok else None


def _gpu(pynvml: Any, index: int) -> NvmlGpu:
    h = pynvml.nvmlDeviceGetHandleByIndex(index)
    errors: dict[str, str] = {}
    read = _reader(pynvml, errors)
    sm = pynvml.NVML_CLOCK_SM
    temp_sensor = pynvml.NVML_TEMPERATURE_GPU

    gpu = NvmlGpu(index=index, name=str(read("name", ("nvmlDeviceGetName", (h,))) or "?"))
    gpu.errors = errors
    gpu.uuid = read("uuid", ("nvmlDeviceGetUUID", (h,)))
    cap = read("capability", ("nvmlDeviceGetCudaComputeCapability", (h,)))
    gpu.capability = (int(cap[0]), int(cap[1])) if cap else None
    mem = read("memory", ("nvmlDeviceGetMemoryInfo", (h,)))
    if mem is not None:
        gpu.memory_total_bytes, gpu.memory_used_bytes = int(mem.total), int(mem.used)
    pm = read("persistence_mode", ("nvmlDeviceGetPersistenceMode", (h,)))
    gpu.persistence_mode = None if pm is None else pm == 1
    # Milliwatts. The enforced limit is the one in force (the lowest of all set limits).
    limit = read(
        "power_limit",
        ("nvmlDeviceGetEnforcedPowerLimit", (h,)),
        ("nvmlDeviceGetPowerManagementLimit", (h,)),
    )
    default = read("power_default_limit", ("nvmlDeviceGetPowerManagementDefaultLimit", (h,)))
    draw = read("power_draw", ("nvmlDeviceGetPowerUsage", (h,)))
    gpu.power_limit_w = limit / 1000 if limit is not None else None
    gpu.power_default_limit_w = default / 1000 if default is not None else None
    gpu.power_draw_w = draw / 1000 if draw is not None else None
    temp = read(
        "temperature",
        ("nvmlDeviceGetTemperatureV", (h, temp_sensor)),
        ("nvmlDeviceGetTemperature", (h, temp_sensor)),
    )
    gpu.temperature_c = float(temp) if temp is not None else None
    clock = read("sm_clock", ("nvmlDeviceGetClockInfo", (h, sm)))
    clock_max = read("sm_clock_max", ("nvmlDeviceGetMaxClockInfo", (h, sm)))
    gpu.sm_clock_mhz = float(clock) if clock is not None else None
    gpu.sm_clock_max_mhz = float(clock_max) if clock_max is not None else None
    reasons = read(
        "clock_event_reasons",
        ("nvmlDeviceGetCurrentClocksEventReasons", (h,)),
        ("nvmlDeviceGetCurrentClocksThrottleReasons", (h,)),
    )
    gpu.clock_event_reasons = decode_clock_reasons(int(reasons)) if reasons is not None else None
    gpu.pcie_gen = read("pcie_gen", ("nvmlDeviceGetCurrPcieLinkGeneration", (h,)))
    gpu.pcie_width = read("pcie_width", ("nvmlDeviceGetCurrPcieLinkWidth", (h,)))
    gpu.pcie_max_gen = read("pcie_max_gen", ("nvmlDeviceGetMaxPcieLinkGeneration", (h,)))
    gpu.pcie_max_width = read("pcie_max_width", ("nvmlDeviceGetMaxPcieLinkWidth", (h,)))
    gpu.pcie_gpu_max_gen = read("pcie_gpu_max_gen", ("nvmlDeviceGetGpuMaxPcieLinkGeneration", (h,)))
    mig = read("mig_mode", ("nvmlDeviceGetMigMode", (h,)))
    gpu.mig_mode = None if mig is None else mig[0] == pynvml.NVML_DEVICE_MIG_ENABLE
    mode = read("compute_mode", ("nvmlDeviceGetComputeMode", (h,)))
    gpu.compute_mode = None if mode is None else COMPUTE_MODES.get(int(mode), f"mode {mode}")
    util = read("utilization", ("nvmlDeviceGetUtilizationRates", (h,)))
    gpu.utilization_pct = float(util.gpu) if util is not None else None
    gpu.processes = _processes(pynvml, h, read)
    return gpu


def probe() -> NvmlFacts:
    try:
        import pynvml
    except ImportError:
        return NvmlFacts(
            available=False, why="nvidia-ml-py is not installed (pip install nvidia-ml-py)"
        )
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return NvmlFacts(available=False, why=init_failure(getattr(exc, "value", None), str(exc)))
    except Exception as exc:
        return NvmlFacts(available=False, why=f"NVML failed to initialise: {exc}")
    try:
        facts = NvmlFacts(available=True)
        sys_errors: dict[str, str] = {}
        read = _reader(pynvml, sys_errors)
        facts.driver_version = read("driver", ("nvmlSystemGetDriverVersion", ()))
        cuda = read(
            "cuda_driver",
            ("nvmlSystemGetCudaDriverVersion_v2", ()),
            ("nvmlSystemGetCudaDriverVersion", ()),
        )
        facts.cuda_driver_version = decode_cuda_version(int(cuda)) if cuda else None
        try:
            count = int(pynvml.nvmlDeviceGetCount())
        except Exception as exc:
            facts.why = f"NVML could not count GPUs: {exc}"
            return facts
        for i in range(count):
            try:
                facts.gpus.append(_gpu(pynvml, i))
            except Exception as exc:  # a lost GPU ("GPU is lost") should not hide the others
                facts.gpus.append(NvmlGpu(index=i, name="?", errors={"handle": str(exc)}))
        return facts
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
