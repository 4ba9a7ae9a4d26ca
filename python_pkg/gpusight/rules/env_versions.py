"""Version, architecture and link arithmetic on the probed facts: CUDA versions, sm_XY
architectures, driver branches, PCIe bandwidth, the torch wheel index for a driver. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..probes.facts import Facts
from .env_checks import NOT_CHECKED

# Per-lane signalling rate (GT/s) by PCIe generation and the share left after line encoding:
# Gen1/2 use 8b/10b, Gen3-5 128b/130b; Gen6 runs PAM4 in FLIT mode (242 of 256 bytes payload).
PCIE_GT_S = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}


PCIE_EFFICIENCY = {1: 8 / 10, 2: 8 / 10, 3: 128 / 130, 4: 128 / 130, 5: 128 / 130, 6: 242 / 256}


# PyTorch wheel indexes, newest first: (CUDA major, minor, index name).
TORCH_CUDA_INDEXES = (
    (13, 0, "cu130"),
    (12, 9, "cu129"),
    (12, 8, "cu128"),
    (12, 6, "cu126"),
    (12, 4, "cu124"),
    (12, 1, "cu121"),
    (11, 8, "cu118"),
)


DEFAULT_INDEX = "cu128"


# Oldest driver branch of each CUDA major (minor-version compatibility starts there).
DRIVER_BRANCH_FOR_MAJOR = {11: "450", 12: "525", 13: "580"}


_ARCH = re.compile(r"^(sm|compute)_(\d+)([af]?)$")


_GIB = 1 << 30


def parse_version(text: str | None) -> tuple[int, int] | None:
    """'12.8' / '12.8.1' -> (12, 8)."""
    if not text:
        return None
    m = re.match(r"^\s*(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def vstr(v: tuple[int, int] | None) -> str:
    return f"{v[0]}.{v[1]}" if v else "?"


def fmt_bytes(n: int | None) -> str:
    if n is None:
        return "?"
    if n >= _GIB:
        return f"{n / _GIB:.1f} GiB"
    return f"{n / (1 << 20):.0f} MiB"


def cudnn_version(v: int) -> str:
    """torch.backends.cudnn.version(): 8902 is 8.9.2 (x1000 until cuDNN 8), 91002 is 9.10.2."""
    if v >= 10000:
        return f"{v // 10000}.{v // 100 % 100}.{v % 100}"
    return f"{v // 1000}.{v % 1000 // 100}.{v % 100}"


def parse_arch(entry: str) -> tuple[str, tuple[int, int], str] | None:
    """'sm_90a' -> ('sm', (9, 0), 'a'); 'compute_120' -> ('compute', (12, 0), '')."""
    m = _ARCH.match(entry)
    if not m:
        return None
    n = int(m.group(2))
    return m.group(1), (n // 10, n % 10), m.group(3)


def arch_support(cap: tuple[int, int], arch_list: Iterable[str]) -> tuple[str | None, str | None]:
    """How a build's kernels reach a GPU of compute capability ``cap``.

    ('sass', entry): native kernels. A cubin for sm_XY runs on X.Z for Z >= Y (same major
    only); 'a' (arch-specific) cubins run on exactly X.Y, 'f' (family) on the same major.
    ('ptx', entry): only PTX the driver must JIT-compile. compute_XY PTX compiles for any GPU of
    capability >= X.Y, newer majors included; 'a'/'f' PTX only for its own arch/family.
    (None, None): no kernels for this GPU at all.
    """
    ptx: str | None = None
    for entry in arch_list:
        parsed = parse_arch(entry)
        if parsed is None:
            continue
        kind, (major, minor), suffix = parsed
        same_major = cap[0] == major and cap[1] >= minor
        if suffix == "a":
            fits = cap == (major, minor)
        elif suffix == "f" or kind == "sm":
            fits = same_major
        else:
            fits = cap >= (major, minor)
        if fits and kind == "sm":
            return "sass", entry
        if fits and ptx is None:
            ptx = entry
    return ("ptx", ptx) if ptx else (None, None)


def driver_support(driver: tuple[int, int], build: tuple[int, int]) -> str:
    """'ok', 'minor_compat' or 'too_old' for a torch built with CUDA ``build``.

    Since CUDA 11, a program built with CUDA X.y runs on any driver of the same major X
    (minor-version compatibility), except that PTX it carries cannot be JIT-compiled by the
    older driver. Before 11 the driver had to support the exact version or newer.
    """
    if driver >= build:
        return "ok"
    if build[0] >= 11 and driver[0] == build[0]:
        return "minor_compat"
    return "too_old"


def pcie_gbps(gen: int | None, width: int | None) -> float | None:
    """Theoretical bandwidth of one direction of a PCIe link, after encoding, in GB/s."""
    if not gen or not width or gen not in PCIE_GT_S:
        return None
    return round(PCIE_GT_S[gen] * PCIE_EFFICIENCY[gen] * width / 8, 2)


def index_for_driver(driver_cuda: tuple[int, int] | None) -> str:
    """The newest PyTorch wheel index a driver supporting ``driver_cuda`` can run."""
    if driver_cuda is None:
        return DEFAULT_INDEX
    for major, minor, name in TORCH_CUDA_INDEXES:
        if (major, minor) <= driver_cuda:
            return name
    return TORCH_CUDA_INDEXES[-1][2]


def _driver_cuda(facts: Facts) -> str:
    nv = facts.nvml
    if not nv.available:
        return NOT_CHECKED
    return vstr(nv.cuda_driver_version) if nv.cuda_driver_version else "unknown"


def _gpu_caps(facts: Facts) -> list[tuple[str, tuple[int, int], int | None]]:
    """(name, capability, gpu index) of the GPUs the build would run on: torch's view when CUDA
    works, NVML's otherwise (NVML works when CUDA does not, e.g. with a too-old driver)."""
    if facts.torch.devices:
        return [(d.name, d.capability, d.index) for d in facts.torch.devices if d.capability]
    return [(g.name, g.capability, g.index) for g in facts.nvml.gpus if g.capability]
