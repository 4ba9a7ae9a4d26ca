"""Facts about the host: CPUs, memory, /dev/shm, and the environment variables that matter."""

from __future__ import annotations

import os
import platform
import socket
import sys
from collections.abc import Mapping
from pathlib import Path

from .facts import SystemFacts

# Always reported (None when unset): an empty CUDA_VISIBLE_DEVICES differs from an unset one.
ALWAYS_ENV = ("CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING")
# Reported when set.
WATCHED_ENV = (
    "CUDA_DEVICE_ORDER",
    "NVIDIA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "CUDA_MODULE_LOADING",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUBLAS_WORKSPACE_CONFIG",
    "PYTORCH_CUDA_ALLOC_CONF",
    "PYTORCH_ALLOC_CONF",
    "PYTORCH_NVML_BASED_CUDA_CHECK",
    "TORCH_USE_CUDA_DSA",
    "OMP_NUM_THREADS",
    "NCCL_P2P_DISABLE",
    "NCCL_IB_DISABLE",
)

SHM_PATH = "/dev/shm"


def shm_size(path: str = SHM_PATH) -> tuple[int | None, str | None]:
    """Size of the shared-memory filesystem DataLoader workers pass batches through."""
    try:
        st = os.statvfs(path)
    except FileNotFoundError:
        return None, f"{path} does not exist on this system"
    except OSError as exc:
        return None, f"statvfs({path}) failed: {exc.strerror or exc}"
    return st.f_frsize * st.f_blocks, None


def cgroup_cpu_quota(root: str = "/sys/fs/cgroup") -> float | None:
    """CPUs' worth of time the cgroup allows, or None when unlimited or unknown."""
    try:
        # cgroup v2: "max 100000" (unlimited) or "200000 100000" (2 CPUs)
        quota, period = Path(root, "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        q = int(Path(root, "cpu", "cpu.cfs_quota_us").read_text())
        p = int(Path(root, "cpu", "cpu.cfs_period_us").read_text())
        return None if q <= 0 or p <= 0 else q / p
    except (OSError, ValueError):
        return None


def memory_total() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def watched_env(environ: Mapping[str, str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {name: environ.get(name) for name in ALWAYS_ENV}
    out.update({name: environ[name] for name in WATCHED_ENV if name in environ})
    return out


def probe(environ: Mapping[str, str] | None = None) -> SystemFacts:
    env = os.environ if environ is None else environ
    affinity: int | None
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    try:
        hostname: str | None = socket.gethostname()
    except OSError:
        hostname = None
    shm, shm_why = shm_size()
    return SystemFacts(
        platform=platform.platform(),
        python=platform.python_version(),
        executable=sys.executable,
        pid=os.getpid(),
        hostname=hostname,
        cpu_count=os.cpu_count(),
        cpu_affinity=affinity,
        cpu_quota=cgroup_cpu_quota(),
        memory_total_bytes=memory_total(),
        shm_bytes=shm,
        shm_why=shm_why,
        env=watched_env(env),
    )
