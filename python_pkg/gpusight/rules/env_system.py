"""Environment rules for the process and machine: /dev/shm, CUDA_VISIBLE_DEVICES,
CUDA_LAUNCH_BLOCKING.
"""

from __future__ import annotations

from ..fixes import fix
from ..probes.facts import Facts
from ..report import Finding, Impact
from .env_checks import EnvironmentResult, _ev
from .env_versions import _GIB, fmt_bytes

# Below this /dev/shm is too small for DataLoader workers (Docker's default is 64 MB).
SHM_MIN_BYTES = 1 << 30


def visible_devices_hide_all(value: str | None, gpu_count: int | None) -> bool:
    """Does CUDA_VISIBLE_DEVICES leave CUDA with no device at all?

    CUDA reads the list up to the first entry it cannot use: '' and '-1' hide everything, and
    so does a first entry that is neither an index nor a GPU-/MIG- UUID, or an index past the
    last GPU.
    """
    if value is None:
        return False
    first = value.split(",")[0].strip()
    if not first:
        return True
    if first.startswith(("GPU-", "MIG-")):
        return False
    try:
        index = int(first)
    except ValueError:
        return True
    return index < 0 or (gpu_count is not None and index >= gpu_count)


def launch_blocking_on(value: str | None) -> bool:
    """CUDA reads CUDA_LAUNCH_BLOCKING as a number; anything non-zero blocks."""
    try:
        return value is not None and int(value.strip()) != 0
    except ValueError:
        return False


def _system_rules(facts: Facts, out: EnvironmentResult) -> None:
    s = facts.system
    cpu = f"{s.cpu_count} CPUs"
    if s.cpu_affinity is not None and s.cpu_affinity != s.cpu_count:
        cpu += f", {s.cpu_affinity} usable by this process"
    if s.cpu_quota is not None:
        cpu += f", cgroup quota {s.cpu_quota:g} CPUs"
    out.check("system.cpu", "CPUs", "info", cpu)
    out.check("system.memory", "memory", "info", fmt_bytes(s.memory_total_bytes))
    if s.shm_bytes is None:
        out.check("system.shm", "/dev/shm", "not_checked", str(s.shm_why))
    elif s.shm_bytes < SHM_MIN_BYTES:
        size = "16g"
        if s.memory_total_bytes is not None and s.memory_total_bytes < 32 * _GIB:
            size = f"{max(1, s.memory_total_bytes // _GIB // 2)}g"
        out.check(
            "system.shm",
            "/dev/shm",
            "warn",
            fmt_bytes(s.shm_bytes),
            finding=Finding(
                id="env.shm_small",
                severity="warn",
                title=f"/dev/shm is only {fmt_bytes(s.shm_bytes)}: DataLoader workers will fail",
                detail=(
                    "DataLoader workers (num_workers > 0) hand every batch to the main process "
                    "through shared memory in /dev/shm. Docker's default of 64 MB fills with a "
                    "few batches and workers die with 'bus error' or 'No space left on device'; "
                    "the usual workaround, num_workers=0, then starves the GPU."
                ),
                evidence=[
                    _ev("/dev/shm size", s.shm_bytes, "bytes"),
                    _ev("CPUs", s.cpu_count),
                    _ev("memory", s.memory_total_bytes, "bytes"),
                ],
                impact=Impact(basis="none", text="Parallel data loading fails or is turned off."),
                fix=fix(
                    f"Give the container a bigger /dev/shm (--shm-size={size}) or the host's "
                    "(--ipc=host).",
                    "docker.shm_size",
                    size=size,
                ),
            ),
        )
    else:
        out.check("system.shm", "/dev/shm", "pass", fmt_bytes(s.shm_bytes))

    value = s.env.get("CUDA_LAUNCH_BLOCKING")
    if launch_blocking_on(value):
        gpu = facts.torch.cuda_available
        out.check(
            "env.cuda_launch_blocking",
            "CUDA_LAUNCH_BLOCKING",
            "fail",
            str(value),
            finding=launch_blocking_finding(str(value), bool(gpu)),
        )
    elif value is None:
        out.check("env.cuda_launch_blocking", "CUDA_LAUNCH_BLOCKING", "pass", "unset")
    else:
        out.check("env.cuda_launch_blocking", "CUDA_LAUNCH_BLOCKING", "pass", f"{value} (off)")


def launch_blocking_finding(value: str, gpu: bool) -> Finding:
    """``env.launch_blocking``: CUDA_LAUNCH_BLOCKING set to a value that blocks."""
    return Finding(
        id="env.launch_blocking",
        severity="critical" if gpu else "warn",
        title=f"CUDA_LAUNCH_BLOCKING={value}: every kernel launch waits for the GPU",
        detail=(
            "With it set, the CPU waits for each kernel to finish before launching the "
            "next, so the GPU idles while Python prepares every op. It is a debugging "
            "aid for locating CUDA errors, not for runs that should be fast."
        ),
        evidence=[_ev("CUDA_LAUNCH_BLOCKING", value)],
        impact=Impact(
            basis="estimated",
            text="Often several times slower for models with many small kernels.",
        ),
        fix=fix("Unset it, and restart the process or kernel.", "env.launch_blocking"),
    )
