"""Environment rules for the torch build: importable, CUDA build, CUDA available, driver new
enough, kernels for this GPU, the system CUDA toolkit.
"""

from __future__ import annotations

from ..fixes import fix
from ..probes.facts import Facts
from ..report import Finding, Fix, Impact, Severity
from .env_checks import NOT_CHECKED, EnvironmentResult, _ev
from .env_system import visible_devices_hide_all
from .env_versions import (
    DRIVER_BRANCH_FOR_MAJOR,
    _driver_cuda,
    _gpu_caps,
    arch_support,
    cudnn_version,
    driver_support,
    index_for_driver,
    parse_version,
    vstr,
)


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
                    _ev("torch.version.cuda", "None (no CUDA in this build)"),
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
