"""Environment rules: facts -> the checklist (``Check`` rows) and findings with catalogue ids.

Pure functions of plain data (``probes.facts``); nothing here imports torch or pynvml, so a test
can hand in an H200 on PCIe Gen5 x16 with a lowered power limit and get the real judgement.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..fixes import fix
from ..probes.facts import Facts, NvmlGpu, Scalar
from ..report import Check, CheckStatus, Evidence, Finding, Fix, Impact, Severity, Verdict

# Below this /dev/shm is too small for DataLoader workers (Docker's default is 64 MB).
SHM_MIN_BYTES = 1 << 30
# A power limit under this share of the default is a deliberate cap, not rounding.
POWER_CAP_RATIO = 0.9
# Utilisation at which a GPU counts as busy (its PCIe link should then be at full speed).
BUSY_UTIL_PCT = 20.0

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


@dataclass
class EnvironmentResult:
    checks: list[Check] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def check(
        self,
        id: str,
        label: str,
        status: CheckStatus,
        value: str,
        detail: str | None = None,
        finding: Finding | None = None,
    ) -> None:
        if finding is not None:
            self.findings.append(finding)
        self.checks.append(
            Check(id, label, status, value, detail, finding.id if finding is not None else None)
        )


# --- small pure helpers (tested on their own) ---------------------------------------------------


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


def _first_precision(settings: Mapping[str, Scalar], keys: Sequence[str]) -> bool | None:
    # torch >= 2.9 fp32_precision: the op's own value, else its backend's, else the global
    # one; 'none' means inherit. 'tf32' and 'bf16' both let float32 use Tensor Cores.
    for key in keys:
        v = settings.get(key)
        if isinstance(v, str) and v != "none":
            return v != "ieee"
    return None


def tf32_matmul(settings: Mapping[str, Scalar]) -> bool | None:
    """Do float32 matmuls (cuBLAS) use TF32 Tensor Cores under these settings?"""
    new = _first_precision(
        settings, ("cuda.matmul.fp32_precision", "cuda.fp32_precision", "fp32_precision")
    )
    if new is not None:
        return new
    legacy = settings.get("cuda.matmul.allow_tf32")
    if isinstance(legacy, bool):
        return legacy
    precision = settings.get("float32_matmul_precision")
    return precision != "highest" if isinstance(precision, str) else None


def tf32_cudnn(settings: Mapping[str, Scalar]) -> bool | None:
    """Do float32 convolutions (cuDNN) use TF32?"""
    new = _first_precision(
        settings, ("cudnn.conv.fp32_precision", "cudnn.fp32_precision", "fp32_precision")
    )
    if new is not None:
        return new
    legacy = settings.get("cudnn.allow_tf32")
    return legacy if isinstance(legacy, bool) else None


# --- the rules ------------------------------------------------------------------------------------


NOT_CHECKED = "not checked"


def _ev(label: str, value: Scalar, unit: str | None = None) -> Evidence:
    return Evidence(label=label, value=value, unit=unit)


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


def _torch_rules(facts: Facts, out: EnvironmentResult) -> None:
    t = facts.torch
    py = facts.system.executable
    index = index_for_driver(facts.nvml.cuda_driver_version)
    if t.probe_error:
        out.check("torch.import", "torch", "not_checked", t.probe_error)
        return
    if not t.importable:
        out.check(
            "torch.import",
            "torch",
            "fail",
            f"not importable ({t.import_error})",
            finding=Finding(
                id="env.no_torch",
                severity="critical",
                title="torch cannot be imported in this Python",
                detail=(
                    f"`import torch` fails in {py}. torch may be installed in another "
                    "environment than the one this kernel or command runs in."
                ),
                evidence=[
                    _ev("import error", t.import_error),
                    _ev("python", py),
                    _ev("driver supports CUDA up to", _driver_cuda(facts)),
                ],
                impact=Impact(basis="none", text="Nothing runs at all."),
                fix=fix(
                    f"Install torch into this interpreter ({py}); the {index} index matches "
                    + (
                        f"a driver supporting CUDA {vstr(facts.nvml.cuda_driver_version)}."
                        if facts.nvml.cuda_driver_version
                        else "a recent driver; use the cpu index on a machine without a GPU."
                    ),
                    "torch.install",
                    python=py,
                    index=index,
                ),
            ),
        )
        return
    out.check("torch.import", "torch", "pass", str(t.version))
    if t.cuda:
        out.check("torch.build", "torch build", "pass", f"CUDA {t.cuda}")
    elif t.hip:
        out.check("torch.build", "torch build", "pass", f"ROCm (HIP {t.hip})")
    else:
        gpus = facts.nvml.gpus
        seen = (
            f"NVML sees {len(gpus)} NVIDIA GPU(s) here: {', '.join(g.name for g in gpus)}"
            if facts.nvml.available
            else f"No NVIDIA GPU is visible here either: {facts.nvml.why}"
        )
        out.check(
            "torch.build",
            "torch build",
            "fail",
            "CPU only",
            finding=Finding(
                id="env.cpu_only_build",
                severity="critical",
                title=f"torch {t.version} is a CPU-only build: it cannot use any GPU",
                detail=(
                    "torch.version.cuda and torch.version.hip are both None, so "
                    f"torch.cuda.is_available() is always False. {seen}."
                ),
                evidence=[
                    _ev("torch", t.version),
                    _ev("torch.version.cuda", None),
                    _ev("NVIDIA GPUs (NVML)", len(gpus) if facts.nvml.available else NOT_CHECKED),
                    _ev("driver supports CUDA up to", _driver_cuda(facts)),
                ],
                impact=Impact(basis="none", text="Nothing runs on a GPU."),
                fix=fix(
                    "Install a CUDA build of torch in its place"
                    + (
                        f" ({index} fits this driver)."
                        if facts.nvml.cuda_driver_version
                        else "; with no NVIDIA driver on this machine it will help only where "
                        "a GPU and driver are present."
                    ),
                    "torch.install_cuda",
                    python=py,
                    index=index,
                ),
            ),
        )
    if t.cudnn:
        out.check("cudnn.version", "cuDNN", "info", cudnn_version(t.cudnn))
    else:
        out.check(
            "cudnn.version",
            "cuDNN",
            "not_checked",
            "not in this build" if not t.cuda else "not available",
            t.errors.get("cudnn"),
        )


def _cuda_rules(facts: Facts, out: EnvironmentResult) -> None:
    t, nv, sysf = facts.torch, facts.nvml, facts.system
    cvd = sysf.env.get("CUDA_VISIBLE_DEVICES")
    nvml_count = len(nv.gpus) if nv.available else None
    hides_all = visible_devices_hide_all(cvd, nvml_count)
    build = parse_version(t.cuda)
    driver = nv.cuda_driver_version
    compat = driver_support(driver, build) if driver and build else None
    py = sysf.executable

    # NVML and the driver.
    if nv.available:
        out.check("nvml", "NVML", "pass", f"{len(nv.gpus)} NVIDIA GPU(s)")
    else:
        out.check("nvml", "NVML", "not_checked", str(nv.why))
        out.notes.append(f"GPU details not checked: {nv.why}")

    # CUDA_VISIBLE_DEVICES.
    cuda_build_down = t.importable and bool(t.cuda) and not t.cuda_available
    if cvd is None:
        out.check("env.cuda_visible_devices", "CUDA_VISIBLE_DEVICES", "pass", "unset (all GPUs)")
    elif hides_all:
        severity: Severity = "critical" if cuda_build_down else "warn"
        devices = ",".join(str(i) for i in range(nvml_count or 1))
        out.check(
            "env.cuda_visible_devices",
            "CUDA_VISIBLE_DEVICES",
            "fail",
            repr(cvd),
            finding=Finding(
                id="env.visible_devices",
                severity=severity,
                title=f"CUDA_VISIBLE_DEVICES={cvd!r} hides every GPU from CUDA",
                detail=(
                    "CUDA only sees the devices this variable lists, read up to the first entry "
                    "it cannot use: an empty value, -1, or an index past the last GPU leaves "
                    "none. NVML (nvidia-smi) ignores it, which is why the GPUs still show there."
                ),
                evidence=[
                    _ev("CUDA_VISIBLE_DEVICES", cvd),
                    _ev("NVIDIA GPUs on the host (NVML)", nvml_count),
                    _ev("torch.cuda.is_available()", t.cuda_available if t.importable else None),
                ],
                fix=fix(
                    "Unset CUDA_VISIBLE_DEVICES, or list the GPUs to use, before CUDA starts.",
                    "env.visible_devices",
                    devices=devices,
                ),
            ),
        )
    else:
        listed = [x for x in cvd.split(",") if x.strip()]
        note = f"{len(listed)} of {nvml_count} GPU(s) visible" if nvml_count else "set"
        out.check("env.cuda_visible_devices", "CUDA_VISIBLE_DEVICES", "info", f"{cvd} ({note})")

    # Driver version against the build.
    if nv.available and nv.driver_version:
        value = f"{nv.driver_version} (CUDA up to {vstr(driver)})"
        if compat == "too_old":
            pass  # reported with the availability check below
        elif compat == "minor_compat":
            out.check(
                "driver.version",
                "NVIDIA driver",
                "pass",
                value,
                f"older than the build's CUDA {t.cuda}, but the same major: CUDA minor-version "
                "compatibility runs it (PTX JIT excepted)",
            )
        else:
            out.check("driver.version", "NVIDIA driver", "pass", value)
    else:
        out.check(
            "driver.version",
            "NVIDIA driver",
            "not_checked",
            "needs NVML (not available)" if not nv.available else "NVML gave no driver version",
        )

    if not t.importable or not (t.cuda or t.hip):
        reason = "torch is not importable" if not t.importable else "CPU-only build"
        out.check(
            "cuda.available",
            "torch.cuda.is_available()",
            "fail" if t.importable else "not_checked",
            f"no ({reason})",
        )
        if t.importable:
            out.checks[-1].finding_id = "env.cpu_only_build"
        return

    too_old_msg = bool(t.cuda_error and "too old" in t.cuda_error.lower())
    if t.cuda_available:
        names = ", ".join(f"{d.name}" for d in t.devices) or "?"
        out.check(
            "cuda.available",
            "torch.cuda.is_available()",
            "pass",
            f"yes: {t.device_count} device(s): {names}",
        )
    elif hides_all:
        out.check(
            "cuda.available",
            "torch.cuda.is_available()",
            "fail",
            "no: CUDA_VISIBLE_DEVICES hides every GPU",
        )
        out.checks[-1].finding_id = "env.visible_devices"
    elif t.cuda and (compat == "too_old" or too_old_msg):
        finding = _driver_too_old(facts, build, driver, py)
        out.check("cuda.available", "torch.cuda.is_available()", "fail", "no: driver too old")
        out.check(
            "driver.version",
            "NVIDIA driver",
            "fail",
            f"{nv.driver_version or '?'} (CUDA up to {vstr(driver)})",
            finding=finding,
        )
    else:
        out.check(
            "cuda.available",
            "torch.cuda.is_available()",
            "fail",
            f"no: {_unavailable_reason(facts)}",
            finding=_cuda_unavailable(facts),
        )

    if t.cuda and t.cuda_available and compat == "too_old":
        # Unusual (a driver shim or a forward-compat package), but say it.
        out.check(
            "driver.version",
            "NVIDIA driver",
            "warn",
            f"{nv.driver_version} (CUDA up to {vstr(driver)})",
            f"older than torch's CUDA {t.cuda}, yet CUDA initialised (cuda-compat package?)",
        )

    # Devices and kernels for them.
    if t.devices:
        out.check(
            "cuda.devices",
            "CUDA devices",
            "info",
            "; ".join(f"{d.index}: {d.name} (cc {vstr(d.capability)})" for d in t.devices),
        )
    _arch_rules(facts, compat, driver, build, py, out)


def _driver_too_old(
    facts: Facts,
    build: tuple[int, int] | None,
    driver: tuple[int, int] | None,
    py: str,
    ptx_entry: str | None = None,
) -> Finding:
    t, nv = facts.torch, facts.nvml
    index = index_for_driver(driver)
    if ptx_entry:
        why = (
            f"The driver supports CUDA {vstr(driver)}, older than this build's CUDA {t.cuda}. "
            "Minor-version compatibility lets the build's native kernels run, but this GPU has "
            f"only {ptx_entry} PTX in the build, and an older driver cannot JIT-compile PTX "
            "from a newer toolkit, so kernels fail to load."
        )
    elif build and build[0] >= 11:
        why = (
            f"The driver supports CUDA up to {vstr(driver)}; this torch was built with CUDA "
            f"{t.cuda}. Since CUDA 11 a driver runs any build of its own major version "
            "(minor-version compatibility), but not a newer major."
        )
    else:
        why = (
            f"The driver supports CUDA up to {vstr(driver)}; this torch was built with CUDA "
            f"{t.cuda}, which before CUDA 11 needs a driver of that exact version or newer."
        )
    if t.cuda_error:
        why += f" torch said: {t.cuda_error}"
    branch = DRIVER_BRANCH_FOR_MAJOR.get(build[0], "?") if build else "?"
    return Finding(
        id="env.driver_too_old",
        severity="critical",
        title=(
            f"The NVIDIA driver ({nv.driver_version or '?'}, CUDA {vstr(driver)}) is too old "
            f"for torch built with CUDA {t.cuda}"
        ),
        detail=why,
        evidence=[
            _ev("driver version", nv.driver_version),
            _ev("driver supports CUDA up to", vstr(driver) if driver else None),
            _ev("torch.version.cuda", t.cuda),
            _ev("torch.cuda.is_available()", t.cuda_available),
        ]
        + ([_ev("kernels for this GPU", ptx_entry)] if ptx_entry else []),
        impact=Impact(basis="none", text="CUDA cannot run: the GPU stays unused."),
        fix=fix(
            f"Install torch built for CUDA <= {vstr(driver)} (the {index} index), or update "
            f"the driver to a branch supporting CUDA {t.cuda} (R{branch} or newer for CUDA "
            f"{build[0] if build else '?'}.x).",
            "torch.install_cuda",
            python=py,
            index=index,
        ),
    )


def _unavailable_reason(facts: Facts) -> str:
    t, nv = facts.torch, facts.nvml
    if t.hip:
        return t.cuda_error or "ROCm found no usable GPU"
    if not nv.available:
        return f"no NVIDIA driver ({nv.why})"
    if not nv.gpus:
        return "the driver is loaded but reports no GPU"
    prohibited = [g for g in nv.gpus if g.compute_mode == "prohibited"]
    if prohibited and len(prohibited) == len(nv.gpus):
        return "every GPU is in compute mode 'prohibited'"
    return t.cuda_error or "CUDA failed to initialise (no reason given)"


def _cuda_unavailable(facts: Facts) -> Finding:
    t, nv = facts.torch, facts.nvml
    reason = _unavailable_reason(facts)
    if t.hip:
        text = (
            "Check that /dev/kfd and /dev/dri are accessible (docker: --device=/dev/kfd "
            "--device=/dev/dri, user in the video/render groups) and HIP_VISIBLE_DEVICES."
        )
    elif not nv.available:
        text = (
            "Install the NVIDIA driver (then `nvidia-smi` must list the GPU); in a container, "
            "start it with GPU access: docker run --gpus all (NVIDIA Container Toolkit)."
        )
    elif not nv.gpus:
        text = "Check `nvidia-smi` and `dmesg` for the GPU; a reboot after a driver update helps."
    else:
        text = (
            "NVML sees the GPU but the CUDA runtime cannot use it. Common causes: /dev/nvidia-uvm "
            "missing (run `nvidia-modprobe -u -c=0` or reboot), a container without "
            "--gpus, compute mode 'prohibited', or a GPU in a bad state (nvidia-smi -q)."
        )
    return Finding(
        id="env.cuda_unavailable",
        severity="critical",
        title=f"CUDA is unavailable to torch: {reason}",
        detail=f"torch {t.version} (CUDA {t.cuda or '-'}, HIP {t.hip or '-'}) finds no usable GPU.",
        evidence=[
            _ev("torch.cuda.is_available()", False),
            _ev("torch says", t.cuda_error),
            _ev("NVML", "available" if nv.available else nv.why),
            _ev("NVIDIA GPUs (NVML)", len(nv.gpus) if nv.available else None),
            _ev("driver version", nv.driver_version),
        ],
        impact=Impact(basis="none", text="Nothing runs on the GPU."),
        fix=Fix(text=text, language="text"),
    )


def _arch_rules(
    facts: Facts,
    compat: str | None,
    driver: tuple[int, int] | None,
    build: tuple[int, int] | None,
    py: str,
    out: EnvironmentResult,
) -> None:
    t = facts.torch
    if t.hip:
        out.check("cuda.arch", "kernels for the GPU", "not_checked", "ROCm build (gfx targets)")
        return
    caps = _gpu_caps(facts)
    arch = t.arch_list
    if not caps:
        out.check("cuda.arch", "kernels for the GPU", "not_checked", "no GPU capability known")
        return
    if not arch:
        out.check("cuda.arch", "kernels for the GPU", "not_checked", "torch reports no arch list")
        return
    arch_text = " ".join(arch)
    seen: set[tuple[int, int]] = set()
    for name, cap, idx in caps:
        if cap in seen:
            continue
        seen.add(cap)
        kind, entry = arch_support(cap, arch)
        cc = vstr(cap)
        if kind == "sass":
            out.check(
                f"cuda.arch.{cap[0]}{cap[1]}",
                f"kernels for {name}",
                "pass",
                f"{entry} native kernels for cc {cc}",
            )
        elif kind == "ptx":
            if compat == "minor_compat":
                out.check(
                    f"cuda.arch.{cap[0]}{cap[1]}",
                    f"kernels for {name}",
                    "fail",
                    f"only {entry} PTX, and the driver is older than the build",
                    finding=_driver_too_old(facts, build, driver, py, ptx_entry=entry),
                )
                continue
            out.check(
                f"cuda.arch.{cap[0]}{cap[1]}",
                f"kernels for {name}",
                "warn",
                f"no native kernels for cc {cc}; {entry} PTX is JIT-compiled",
                "The driver compiles the PTX for this GPU on first use: minutes at start-up "
                "(cached in ~/.nv/ComputeCache), and the code may be slower than native kernels.",
            )
        else:
            index = "cu128" if cap[0] >= 10 else index_for_driver(driver)
            out.check(
                f"cuda.arch.{cap[0]}{cap[1]}",
                f"kernels for {name}",
                "fail",
                f"none for cc {cc} (build has: {arch_text})",
                finding=Finding(
                    id="env.arch_unsupported",
                    severity="critical",
                    title=f"This torch has no kernels for {name} (compute capability {cc})",
                    detail=(
                        f"The build carries {arch_text}. A native sm_XY kernel runs only on "
                        "GPUs of the same major version X with minor >= Y, and compute_XY PTX "
                        f"can be JIT-compiled for capability X.Y or newer: none covers {cc}."
                    ),
                    evidence=[
                        _ev("GPU", name),
                        _ev("compute capability", cc),
                        _ev("torch.cuda.get_arch_list()", arch_text),
                        _ev("torch", t.version),
                    ],
                    impact=Impact(basis="none", text="Kernels fail to launch on this GPU."),
                    fix=fix(
                        f"Install a torch build that includes sm_{cap[0]}{cap[1]} (newer GPUs "
                        "need newer CUDA builds, e.g. Blackwell needs CUDA 12.8+).",
                        "torch.install_cuda",
                        python=py,
                        index=index,
                    ),
                    gpu_index=idx if facts.torch.devices else None,
                ),
            )


def _toolkit_rules(facts: Facts, out: EnvironmentResult) -> None:
    tk, t = facts.toolkit, facts.torch
    build = parse_version(t.cuda) if t.importable else None
    if tk.nvcc_version is None:
        out.check("toolkit.nvcc", "nvcc", "not_checked", str(tk.nvcc_why))
    elif build is None:
        out.check(
            "toolkit.nvcc",
            "nvcc",
            "info",
            f"{vstr(tk.nvcc_version)} at {tk.nvcc_path}",
            "torch has no CUDA build to compare it with",
        )
    elif tk.nvcc_version == build:
        out.check("toolkit.nvcc", "nvcc", "pass", f"{vstr(tk.nvcc_version)} at {tk.nvcc_path}")
    else:
        major_differs = tk.nvcc_version[0] != build[0]
        consequence = (
            "torch.utils.cpp_extension refuses to build CUDA extensions across major versions"
            if major_differs
            else "extension builds warn about the minor-version difference but work"
        )
        out.check(
            "toolkit.nvcc",
            "nvcc",
            "info",
            f"{vstr(tk.nvcc_version)} at {tk.nvcc_path} (torch: CUDA {t.cuda})",
            finding=Finding(
                id="env.toolkit_mismatch",
                severity="info",
                title=(
                    f"The system CUDA toolkit ({vstr(tk.nvcc_version)}) differs from torch's "
                    f"CUDA ({t.cuda}): matters only for compiling extensions"
                ),
                detail=(
                    "torch ships its own CUDA runtime and libraries, so training does not use "
                    f"the system toolkit at all. nvcc matters only when compiling CUDA "
                    f"extensions (flash-attn, apex, custom ops): {consequence}."
                ),
                evidence=[
                    _ev("nvcc", vstr(tk.nvcc_version)),
                    _ev("nvcc path", tk.nvcc_path),
                    _ev("torch.version.cuda", t.cuda),
                    _ev(
                        "libcudart (ldconfig)",
                        ", ".join(lib.soname for lib in tk.cudart) or None,
                    ),
                ],
                fix=fix(
                    "Nothing to do unless you compile extensions; then point CUDA_HOME at a "
                    f"toolkit {t.cuda}.",
                    "toolkit.cuda_home",
                    version=str(t.cuda),
                ),
            ),
        )
    if tk.cudart_why:
        out.check("toolkit.cudart", "libcudart (ldconfig)", "not_checked", tk.cudart_why)
    else:
        libs = ", ".join(f"{lib.soname} ({lib.path})" for lib in tk.cudart) or "none"
        out.check(
            "toolkit.cudart",
            "libcudart (ldconfig)",
            "info",
            libs,
            "torch uses the CUDA runtime it ships with, not these",
        )


def _gpu_rules(facts: Facts, out: EnvironmentResult) -> None:
    own_pid = facts.system.pid
    for g in facts.nvml.gpus:
        _one_gpu(g, own_pid, out)


def _one_gpu(g: NvmlGpu, own_pid: int, out: EnvironmentResult) -> None:
    p = f"gpu{g.index}"
    label = f"GPU {g.index}"
    i = g.index
    reasons = g.clock_event_reasons or []
    busy = (
        g.utilization_pct >= BUSY_UTIL_PCT
        if g.utilization_pct is not None
        else (g.clock_event_reasons is not None and "gpu_idle" not in reasons)
    )

    out.check(
        f"{p}.name",
        label,
        "info",
        f"{g.name}, cc {vstr(g.capability)}" + (f", {g.uuid}" if g.uuid else ""),
    )
    if g.memory_total_bytes is not None:
        out.check(
            f"{p}.memory",
            f"{label} memory",
            "info",
            f"{fmt_bytes(g.memory_total_bytes)} total, {fmt_bytes(g.memory_used_bytes)} used",
        )
    if g.persistence_mode is not None:
        out.check(
            f"{p}.persistence",
            f"{label} persistence mode",
            "pass" if g.persistence_mode else "info",
            "on" if g.persistence_mode else "off",
            None
            if g.persistence_mode
            else "with it off the driver unloads between jobs, and each CUDA start pays for "
            "reinitialising the GPU (seconds); `sudo nvidia-smi -pm 1` keeps it loaded",
        )

    # Power.
    capped = (
        g.power_limit_w is not None
        and g.power_default_limit_w is not None
        and g.power_limit_w < POWER_CAP_RATIO * g.power_default_limit_w
    )
    brake = "hw_power_brake_slowdown" in reasons
    if g.power_limit_w is None:
        out.check(
            f"{p}.power", f"{label} power limit", "not_checked", g.errors.get("power_limit", "?")
        )
    else:
        value = f"{g.power_limit_w:.0f} W limit"
        if g.power_default_limit_w is not None:
            value += f" (default {g.power_default_limit_w:.0f} W)"
        if g.power_draw_w is not None:
            value += f", drawing {g.power_draw_w:.0f} W"
        finding = None
        if capped or brake:
            ev = [
                _ev("power limit", g.power_limit_w, "W"),
                _ev("default power limit", g.power_default_limit_w, "W"),
                _ev("power draw", g.power_draw_w, "W"),
                _ev("clock event reasons", ", ".join(reasons) or None),
            ]
            if capped:
                assert g.power_default_limit_w is not None
                ratio = g.power_limit_w / g.power_default_limit_w
                title = (
                    f"GPU {i} ({g.name}) is power-capped at {g.power_limit_w:.0f} W, "
                    f"{ratio:.0%} of its {g.power_default_limit_w:.0f} W default"
                )
                detail = (
                    "Under load the GPU lowers its clocks to stay under the limit; compute-bound "
                    "work slows roughly with the clock. Someone (or a cluster policy) set it "
                    "with nvidia-smi -pl."
                )
                the_fix = fix(
                    "Restore the default limit if the cap was not deliberate.",
                    "nvidia.power_limit",
                    index=i,
                    watts=int(g.power_default_limit_w),
                )
                impact_text = f"Up to {1 - ratio:.0%} less sustained clock on power-bound work."
            else:
                title = f"GPU {i} ({g.name}): the external power brake is slowing its clocks"
                detail = (
                    "NVML reports HW power brake slowdown: the system (power supply or chassis) "
                    "asserted a signal that cuts the GPU's clocks hard."
                )
                the_fix = fix(
                    "Check the server's power supplies and BMC event log.",
                    "nvidia.watch_throttle",
                    index=i,
                )
                impact_text = "Clocks are cut while the brake is asserted."
            finding = Finding(
                id="env.power_capped",
                severity="warn",
                title=title,
                detail=detail,
                evidence=ev,
                impact=Impact(basis="estimated", text=impact_text),
                fix=the_fix,
                gpu_index=i,
            )
        elif "sw_power_cap" in reasons:
            value += "; at the limit now (normal under full load)"
        out.check(
            f"{p}.power",
            f"{label} power limit",
            "warn" if finding else "pass",
            value,
            finding=finding,
        )

    # Clocks and temperature.
    thermal = [
        r for r in reasons if r in ("sw_thermal_slowdown", "hw_thermal_slowdown", "hw_slowdown")
    ]
    if g.clock_event_reasons is None:
        out.check(
            f"{p}.clocks",
            f"{label} clocks",
            "not_checked",
            g.errors.get("clock_event_reasons", "?"),
        )
    else:
        clock = (
            f"SM {g.sm_clock_mhz:.0f} of {g.sm_clock_max_mhz:.0f} MHz"
            if g.sm_clock_mhz is not None and g.sm_clock_max_mhz is not None
            else "SM clock ?"
        )
        value = f"{clock}; reasons: {', '.join(reasons) or 'none'}"
        finding = None
        if thermal:
            finding = Finding(
                id="env.thermal_throttle",
                severity="warn",
                title=f"GPU {i} ({g.name}) is slowing its clocks for heat"
                + (f" at {g.temperature_c:.0f} C" if g.temperature_c is not None else ""),
                detail=(
                    "NVML reports "
                    + ", ".join(thermal)
                    + ": the GPU runs below its clocks to protect itself"
                    + (
                        " (hw_slowdown can also mean the power brake or a power excursion)"
                        if "hw_slowdown" in thermal
                        else ""
                    )
                    + ". Check cooling: airflow, fan or liquid-loop failures, inlet temperature."
                ),
                evidence=[
                    _ev("temperature", g.temperature_c, "C"),
                    _ev("SM clock", g.sm_clock_mhz, "MHz"),
                    _ev("SM clock max", g.sm_clock_max_mhz, "MHz"),
                    _ev("clock event reasons", ", ".join(reasons)),
                ],
                impact=Impact(
                    basis="estimated",
                    text="Throughput falls with the clock while the slowdown lasts.",
                ),
                fix=fix(
                    "Fix the cooling, then watch the reasons under load.",
                    "nvidia.watch_throttle",
                    index=i,
                ),
                gpu_index=i,
            )
        out.check(
            f"{p}.clocks",
            f"{label} clocks",
            "warn" if finding else "pass",
            value,
            "gpu_idle and applications_clocks_setting are not problems: the GPU had no work, or "
            "clocks were pinned on purpose"
            if {"gpu_idle", "applications_clocks_setting"} & set(reasons)
            else None,
            finding=finding,
        )
    if g.temperature_c is not None:
        out.check(f"{p}.temperature", f"{label} temperature", "info", f"{g.temperature_c:.0f} C")

    _pcie_rules(g, busy, out)

    # MIG and compute mode.
    if g.mig_mode is None:
        out.check(f"{p}.mig", f"{label} MIG", "info", "not supported on this GPU")
    elif g.mig_mode:
        out.check(
            f"{p}.mig",
            f"{label} MIG",
            "warn",
            "on",
            finding=Finding(
                id="env.mig_enabled",
                severity="warn",
                title=f"GPU {i} ({g.name}) is split by MIG: a process gets one slice of it",
                detail=(
                    "With MIG on, each CUDA process sees one GPU instance: a fixed share of the "
                    "SMs and memory (1/7 for the smallest). A job that expects the whole GPU "
                    "runs on a fraction of it. Fine if that was the plan."
                ),
                evidence=[_ev("MIG mode", "enabled"), _ev("GPU", g.name)],
                impact=Impact(
                    basis="estimated", text="At most the instance's share of SMs and memory."
                ),
                fix=fix(
                    "Ask for a larger instance, or disable MIG for whole-GPU jobs.",
                    "nvidia.mig_disable",
                    index=i,
                ),
                gpu_index=i,
            ),
        )
    else:
        out.check(f"{p}.mig", f"{label} MIG", "pass", "off")
    if g.compute_mode is not None:
        status: CheckStatus = {"default": "pass", "prohibited": "fail"}.get(  # type: ignore[assignment]
            g.compute_mode, "info"
        )
        out.check(f"{p}.compute_mode", f"{label} compute mode", status, g.compute_mode)

    # Other processes.
    if g.processes is None:
        out.check(
            f"{p}.processes",
            f"{label} processes",
            "not_checked",
            g.errors.get("processes.compute", "?"),
        )
    else:
        others = [q for q in g.processes if q.pid != own_pid]
        if not others:
            out.check(f"{p}.processes", f"{label} processes", "pass", "none besides this one")
        else:
            held = sum(q.used_memory_bytes or 0 for q in others)
            exclusive = g.compute_mode == "exclusive_process"
            out.check(
                f"{p}.processes",
                f"{label} processes",
                "warn",
                f"{len(others)} other(s), {fmt_bytes(held)}",
                finding=Finding(
                    id="env.other_processes",
                    severity="critical" if exclusive else "warn",
                    title=(
                        f"{len(others)} other process(es) on GPU {i} ({g.name}) hold "
                        f"{fmt_bytes(held)}"
                    ),
                    detail=(
                        (
                            "The GPU is in exclusive-process mode: while another process holds "
                            "it, this one cannot create a CUDA context. "
                            if exclusive
                            else "They time-share the SMs with your job and hold memory it "
                            "cannot use. "
                        )
                        + f"This process (pid {own_pid}) is left out; NVML shows host pids, so "
                        "inside a container this process may still appear under its host pid."
                    ),
                    evidence=[
                        _ev(
                            f"pid {q.pid}" + (f" {q.name}" if q.name else ""),
                            q.used_memory_bytes,
                            "bytes",
                        )
                        for q in others
                    ],
                    impact=Impact(
                        basis="estimated",
                        text="Shared SMs and memory bandwidth while they compute.",
                    ),
                    fix=fix(
                        "Stop them, or move to a free GPU (CUDA_VISIBLE_DEVICES).",
                        "nvidia.list_processes",
                        index=i,
                    ),
                    gpu_index=i,
                ),
            )


def _pcie_rules(g: NvmlGpu, busy: bool, out: EnvironmentResult) -> None:
    p = f"gpu{g.index}.pcie"
    label = f"GPU {g.index} PCIe link"
    if g.pcie_gen is None or g.pcie_width is None:
        out.check(
            p, label, "not_checked", g.errors.get("pcie_gen") or g.errors.get("pcie_width", "?")
        )
        return
    now = pcie_gbps(g.pcie_gen, g.pcie_width)
    full = pcie_gbps(g.pcie_max_gen, g.pcie_max_width)
    value = f"Gen{g.pcie_gen} x{g.pcie_width}"
    if now is not None:
        value += f", {now:g} GB/s per direction"
    narrow = g.pcie_max_width is not None and g.pcie_width < g.pcie_max_width
    slow_gen = g.pcie_max_gen is not None and g.pcie_gen < g.pcie_max_gen
    slot_limited = (
        g.pcie_gpu_max_gen is not None
        and g.pcie_max_gen is not None
        and g.pcie_max_gen < g.pcie_gpu_max_gen
    )
    if narrow or (slow_gen and busy):
        why = []
        if narrow:
            why.append(
                f"the link trained at x{g.pcie_width} of x{g.pcie_max_width} lanes (a GPU does "
                "not narrow its link to save power: a bad seat, riser, or slot wiring)"
            )
        if slow_gen and busy:
            why.append(
                f"it runs Gen{g.pcie_gen} of Gen{g.pcie_max_gen} while busy "
                f"({g.utilization_pct if g.utilization_pct is not None else '?'} % utilisation)"
            )
        ratio = now / full if now and full else None
        out.check(
            p,
            label,
            "warn",
            value + f" (max Gen{g.pcie_max_gen} x{g.pcie_max_width})",
            finding=Finding(
                id="env.pcie_degraded",
                severity="warn",
                title=(
                    f"GPU {g.index}'s PCIe link runs at Gen{g.pcie_gen} x{g.pcie_width}, below "
                    f"its Gen{g.pcie_max_gen} x{g.pcie_max_width}"
                ),
                detail="; ".join(why) + ". Host-device copies are limited to the link's speed.",
                evidence=[
                    _ev("current", f"Gen{g.pcie_gen} x{g.pcie_width}"),
                    _ev("max", f"Gen{g.pcie_max_gen} x{g.pcie_max_width}"),
                    _ev("theoretical now", now, "GB/s"),
                    _ev("theoretical at max", full, "GB/s"),
                    _ev("utilisation", g.utilization_pct, "%"),
                ],
                impact=Impact(
                    basis="estimated",
                    text=(
                        f"Copies between host and GPU at most {ratio:.0%} of full link speed."
                        if ratio
                        else "Copies between host and GPU are slower than the link allows."
                    ),
                ),
                fix=fix(
                    "Reseat the GPU or riser, check the BIOS slot settings (link speed, "
                    "bifurcation), then read the link again under load.",
                    "nvidia.pcie_link",
                    index=g.index,
                ),
                gpu_index=g.index,
            ),
        )
        return
    detail = None
    if slow_gen:
        detail = (
            f"Gen{g.pcie_gen} now, Gen{g.pcie_max_gen} possible: an idle GPU drops its link to a "
            "lower generation to save power and speeds up when copies start, so this is "
            "expected at rest"
        )
        value += f" now, idle (max Gen{g.pcie_max_gen} x{g.pcie_max_width}"
        value += f": {full:g} GB/s)" if full is not None else ")"
    if slot_limited:
        out.check(
            p,
            label,
            "info",
            value,
            finding=Finding(
                id="env.pcie_degraded",
                severity="info",
                title=(
                    f"GPU {g.index} supports PCIe Gen{g.pcie_gpu_max_gen} but its slot allows "
                    f"Gen{g.pcie_max_gen}"
                ),
                detail=(
                    "The slot or platform limits the link below what the GPU can do; host-device "
                    "copies top out at the slot's speed." + (f" {detail}." if detail else "")
                ),
                evidence=[
                    _ev("GPU max generation", g.pcie_gpu_max_gen),
                    _ev("link max generation", g.pcie_max_gen),
                    _ev("theoretical at link max", full, "GB/s"),
                ],
                impact=Impact(basis="estimated", text="Lower ceiling for host-device copies."),
                fix=fix(
                    "Use a slot of the GPU's generation if copies matter to the job.",
                    "nvidia.pcie_link",
                    index=g.index,
                ),
                gpu_index=g.index,
            ),
        )
        return
    out.check(p, label, "info" if slow_gen else "pass", value, detail)


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
            finding=Finding(
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
            ),
        )
    elif value is None:
        out.check("env.cuda_launch_blocking", "CUDA_LAUNCH_BLOCKING", "pass", "unset")
    else:
        out.check("env.cuda_launch_blocking", "CUDA_LAUNCH_BLOCKING", "pass", f"{value} (off)")


def _settings_rules(facts: Facts, out: EnvironmentResult) -> None:
    t = facts.torch
    if not t.importable:
        for cid, label in (
            ("torch.tf32", "TF32"),
            ("torch.cudnn_benchmark", "cudnn.benchmark"),
            ("torch.deterministic", "deterministic algorithms"),
            ("torch.anomaly", "autograd anomaly detection"),
        ):
            out.check(cid, label, "not_checked", "torch is not importable")
        return
    s = t.settings
    for key, err in sorted(t.errors.items()):
        if key.startswith("settings."):
            out.notes.append(f"torch setting {key.removeprefix('settings.')} unreadable: {err}")
    matmul, conv = tf32_matmul(s), tf32_cudnn(s)
    ampere = [(n, c, i) for n, c, i in _gpu_caps(facts) if c >= (8, 0)]
    state = f"matmul {_onoff(matmul)}, cuDNN {_onoff(conv)}"
    state_ev = [
        _ev("matmul TF32 (cuBLAS)", matmul),
        _ev("torch.get_float32_matmul_precision()", s.get("float32_matmul_precision")),
        _ev("torch.backends.cuda.matmul.allow_tf32", s.get("cuda.matmul.allow_tf32")),
        _ev("torch.backends.cudnn.allow_tf32", s.get("cudnn.allow_tf32")),
    ]
    if "cuda.matmul.fp32_precision" in s:
        state_ev.append(
            _ev("torch.backends.cuda.matmul.fp32_precision", s.get("cuda.matmul.fp32_precision"))
        )
    if matmul is False or conv is False:
        if ampere:
            name, cap, idx = ampere[0]
            what = " and ".join(
                w
                for w, off in (("matmuls", matmul is False), ("convolutions", conv is False))
                if off
            )
            out.check(
                "torch.tf32",
                "TF32",
                "warn",
                state,
                finding=Finding(
                    id="cfg.tf32_disabled",
                    severity="warn",
                    title=f"TF32 is off for float32 {what} on {name} (sm_{cap[0]}{cap[1]})",
                    detail=(
                        "On compute capability 8.0 and newer, float32 matmuls and convolutions "
                        "can run on Tensor Cores in TF32. torch leaves it off for matmuls by "
                        "default, so float32 models run on the much slower CUDA-core path. "
                        "Irrelevant for work already in bf16/fp16 (autocast)."
                    ),
                    evidence=[*state_ev, _ev("GPU", name), _ev("compute capability", vstr(cap))],
                    impact=Impact(
                        basis="estimated",
                        text=(
                            "Float32 matmul throughput rises several-fold with TF32 (spec "
                            "sheets: A100 156 vs 19.5 TFLOPS, H100/H200 ~495 vs ~67)."
                        ),
                    ),
                    fix=fix(
                        "Allow TF32 once at start-up (results differ from float32 in the "
                        "last bits).",
                        "torch.enable_tf32",
                    ),
                    gpu_index=idx if t.devices else None,
                ),
            )
        else:
            out.check(
                "torch.tf32",
                "TF32",
                "info",
                state,
                "TF32 needs a GPU of compute capability 8.0 or newer; none found, so it makes "
                "no difference here",
            )
    else:
        out.check("torch.tf32", "TF32", "pass", state)

    bench = s.get("cudnn.benchmark")
    gpu = bool(_gpu_caps(facts)) and t.cuda_available
    if bench is False and gpu:
        out.check(
            "torch.cudnn_benchmark",
            "cudnn.benchmark",
            "info",
            "off",
            finding=Finding(
                id="cfg.cudnn_benchmark_off",
                severity="info",
                title="cudnn.benchmark is off: convolutions use cuDNN's heuristic algorithm",
                detail=(
                    "For convolutional models with fixed input shapes, letting cuDNN time its "
                    "algorithms once often finds a faster one. No effect on models without "
                    "convolutions; costly when shapes change every step."
                ),
                evidence=[_ev("torch.backends.cudnn.benchmark", False)],
                impact=Impact(basis="none", text="Depends on the model: measure it."),
                fix=fix("Turn it on for fixed-shape convnets.", "torch.cudnn_benchmark"),
            ),
        )
    else:
        out.check(
            "torch.cudnn_benchmark",
            "cudnn.benchmark",
            "pass" if bench else "info",
            _onoff(bench if isinstance(bench, bool) else None),
            None if bench or gpu else "only matters for convolutions on a GPU",
        )

    det = s.get("deterministic_algorithms") is True or s.get("cudnn.deterministic") is True
    if det:
        out.check(
            "torch.deterministic",
            "deterministic algorithms",
            "warn",
            "on",
            finding=Finding(
                id="cfg.deterministic",
                severity="warn",
                title="Deterministic algorithms are forced on",
                detail=(
                    "torch.use_deterministic_algorithms(True) or cudnn.deterministic=True swaps "
                    "fast kernels (atomics-based scatter/index_add, cuDNN autotuned "
                    "convolutions) for slower reproducible ones, and makes some ops raise."
                ),
                evidence=[
                    _ev(
                        "torch.are_deterministic_algorithms_enabled()",
                        s.get("deterministic_algorithms"),
                    ),
                    _ev("warn_only", s.get("deterministic_warn_only")),
                    _ev("torch.backends.cudnn.deterministic", s.get("cudnn.deterministic")),
                ],
                impact=Impact(basis="none", text="Model-dependent: measure it."),
                fix=fix(
                    "Keep determinism for runs that must reproduce; turn it off otherwise.",
                    "torch.deterministic_off",
                ),
            ),
        )
    else:
        out.check("torch.deterministic", "deterministic algorithms", "pass", "off")

    if s.get("anomaly_enabled") is True:
        out.check(
            "torch.anomaly",
            "autograd anomaly detection",
            "warn",
            "on",
            finding=Finding(
                id="cfg.anomaly_detection",
                severity="warn",
                title="Autograd anomaly detection is on",
                detail=(
                    "torch.autograd.set_detect_anomaly(True) records a Python traceback for "
                    "every op in the forward pass and checks every backward result for NaN: "
                    "a debugging mode that slows training many times over."
                ),
                evidence=[
                    _ev("torch.is_anomaly_enabled()", True),
                    _ev("check_nan", s.get("anomaly_check_nan")),
                ],
                impact=Impact(basis="estimated", text="Often several times slower per step."),
                fix=fix("Turn it off outside debugging.", "torch.anomaly_off"),
            ),
        )
    else:
        out.check("torch.anomaly", "autograd anomaly detection", "pass", "off")


def _onoff(v: bool | None) -> str:
    return "?" if v is None else ("on" if v else "off")


def _tensorflow_rules(facts: Facts, out: EnvironmentResult) -> None:
    tf = facts.tensorflow
    if not tf.installed:
        out.check("tensorflow.gpus", "TensorFlow", "not_checked", str(tf.why))
    elif tf.gpus is None:
        out.check("tensorflow.gpus", "TensorFlow", "not_checked", str(tf.why))
    else:
        torch_n = facts.torch.device_count if facts.torch.cuda_available else 0
        status: CheckStatus = "warn" if torch_n and not tf.gpus else "info"
        out.check(
            "tensorflow.gpus",
            "TensorFlow",
            status,
            f"{tf.version}: {len(tf.gpus)} GPU(s)",
            "TensorFlow sees no GPU although torch does: its CUDA libraries do not match"
            if status == "warn"
            else None,
        )


def evaluate(facts: Facts) -> EnvironmentResult:
    """Walk the environment checklist over ``facts``."""
    out = EnvironmentResult()
    _torch_rules(facts, out)
    _cuda_rules(facts, out)
    _toolkit_rules(facts, out)
    _gpu_rules(facts, out)
    _system_rules(facts, out)
    _settings_rules(facts, out)
    _tensorflow_rules(facts, out)
    if facts.toolkit.nvcc_why:
        out.notes.append(f"nvcc not checked: {facts.toolkit.nvcc_why}")
    return out


def verdict(facts: Facts, findings: Sequence[Finding]) -> Verdict:
    """'environment' when anything critical stands in the way, else 'none'; one sentence."""
    critical = [f for f in findings if f.severity == "critical"]
    warns = [f for f in findings if f.severity == "warn"]
    if critical:
        more = f" (and {len(critical) - 1} more critical problem(s))" if len(critical) > 1 else ""
        return Verdict(
            bottleneck="environment",
            gpu_busy_pct=None,
            summary=f"Not ready: {critical[0].title}{more}.",
        )
    t = facts.torch
    names = ", ".join(d.name for d in t.devices) or "no GPU"
    where = f"torch {t.version} (CUDA {t.cuda or t.hip}) sees {t.device_count} GPU(s): {names}"
    if warns:
        return Verdict(
            bottleneck="none",
            gpu_busy_pct=None,
            summary=f"Usable: {where}, with {len(warns)} warning(s), first: {warns[0].title}.",
        )
    return Verdict(
        bottleneck="none",
        gpu_busy_pct=None,
        summary=f"Ready: {where}, and nothing in the environment holds it back.",
    )
