"""Plain-data facts the probes collect and the rules read.

Nothing here imports torch or pynvml: a rule test builds these by hand (an H200 on PCIe Gen5
x16, a power-capped card, ...) and gets the same judgement a real machine would. A fact that
could not be read is ``None`` with the reason in ``why``/``errors``; probes never judge.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .topology import TopologyFacts

Scalar = str | int | float | bool | None


@dataclass
class TorchDevice:
    """One device as torch sees it (logical index, after CUDA_VISIBLE_DEVICES)."""

    index: int
    name: str
    capability: tuple[int, int] | None = None
    total_memory_bytes: int | None = None
    sm_count: int | None = None
    uuid: str | None = None


@dataclass
class TorchFacts:
    importable: bool
    import_error: str | None = None
    probe_error: str | None = None
    """Set when the probe itself failed: nothing is known about torch, not even importability."""
    version: str | None = None
    cuda: str | None = None
    """``torch.version.cuda``: the CUDA the wheel was built with (and ships a runtime for)."""
    hip: str | None = None
    cudnn: int | None = None
    cuda_available: bool = False
    cuda_error: str | None = None
    """Why CUDA initialisation failed, as torch or the CUDA runtime said it (if it said)."""
    device_count: int = 0
    arch_list: list[str] = field(default_factory=list)
    devices: list[TorchDevice] = field(default_factory=list)
    settings: dict[str, Scalar] = field(default_factory=dict)
    """Flags as found, keyed like ``cuda.matmul.allow_tf32``; None where reading raised."""
    errors: dict[str, str] = field(default_factory=dict)


@dataclass
class GpuProcessFact:
    pid: int
    name: str | None = None
    used_memory_bytes: int | None = None
    kind: str = "compute"


@dataclass
class NvmlGpu:
    """One physical GPU as NVML sees it (NVML ignores CUDA_VISIBLE_DEVICES)."""

    index: int
    name: str
    uuid: str | None = None
    capability: tuple[int, int] | None = None
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    persistence_mode: bool | None = None
    power_limit_w: float | None = None
    power_default_limit_w: float | None = None
    power_draw_w: float | None = None
    temperature_c: float | None = None
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    clock_event_reasons: list[str] | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    pcie_max_gen: int | None = None
    """Highest generation this GPU *in this slot* can run (NVML: device and system)."""
    pcie_max_width: int | None = None
    pcie_gpu_max_gen: int | None = None
    """Highest generation the GPU itself supports, whatever the slot."""
    mig_mode: bool | None = None
    compute_mode: str | None = None
    utilization_pct: float | None = None
    processes: list[GpuProcessFact] | None = None
    errors: dict[str, str] = field(default_factory=dict)
    """field -> why it could not be read (e.g. 'Not Supported')."""


@dataclass
class NvmlFacts:
    available: bool
    why: str | None = None
    driver_version: str | None = None
    cuda_driver_version: tuple[int, int] | None = None
    """Highest CUDA version the driver supports (nvmlSystemGetCudaDriverVersion_v2)."""
    gpus: list[NvmlGpu] = field(default_factory=list)


@dataclass
class SystemFacts:
    platform: str
    python: str
    executable: str
    pid: int
    hostname: str | None = None
    cpu_count: int | None = None
    cpu_affinity: int | None = None
    """CPUs this process may run on (sched_getaffinity)."""
    cpu_quota: float | None = None
    """CPUs' worth of time a cgroup allows (cpu.max), if limited."""
    memory_total_bytes: int | None = None
    shm_bytes: int | None = None
    shm_why: str | None = None
    env: dict[str, str | None] = field(default_factory=dict)


@dataclass
class CudaLibrary:
    soname: str
    path: str


@dataclass
class ToolkitFacts:
    nvcc_path: str | None = None
    nvcc_version: tuple[int, int] | None = None
    nvcc_why: str | None = None
    cudart: list[CudaLibrary] = field(default_factory=list)
    cudart_why: str | None = None


@dataclass
class TensorFlowFacts:
    installed: bool
    version: str | None = None
    gpus: list[str] | None = None
    why: str | None = None


@dataclass
class Facts:
    """Everything the environment rules look at."""

    system: SystemFacts
    torch: TorchFacts
    nvml: NvmlFacts
    toolkit: ToolkitFacts
    tensorflow: TensorFlowFacts
    topology: TopologyFacts | None = None
    """How the GPUs are linked (``probes/topology.py``); None when not probed."""
