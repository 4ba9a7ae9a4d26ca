"""Facts about a system CUDA toolkit: ``nvcc --version`` and the libcudart ``ldconfig`` knows.

torch wheels carry their own CUDA runtime, so these matter only for compiling CUDA extensions.
nvcc is looked up the way torch.utils.cpp_extension does (CUDA_HOME, CUDA_PATH, PATH,
/usr/local/cuda), so the version reported is the one an extension build would use.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from .facts import CudaLibrary, ToolkitFacts

TIMEOUT_S = 15
_NVCC_RELEASE = re.compile(r"release (\d+)\.(\d+)")
_LDCONFIG_LINE = re.compile(r"^\s*(libcudart\.so\S*)\s+\(([^)]*)\)\s+=>\s+(\S+)")


def nvcc_candidates(env: Mapping[str, str]) -> list[str]:
    out: list[str] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(var):
            out.append(str(Path(env[var], "bin", "nvcc")))
    found = shutil.which("nvcc", path=env.get("PATH", os.defpath))
    if found:
        out.append(found)
    out.append("/usr/local/cuda/bin/nvcc")
    return out


def parse_nvcc_version(text: str) -> tuple[int, int] | None:
    m = _NVCC_RELEASE.search(text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def parse_ldconfig(text: str) -> list[CudaLibrary]:
    return [
        CudaLibrary(soname=m.group(1), path=m.group(3))
        for line in text.splitlines()
        if (m := _LDCONFIG_LINE.match(line))
    ]


def _run(argv: Sequence[str]) -> tuple[str | None, str | None]:
    """(stdout, None) or (None, why)."""
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    except FileNotFoundError:
        return None, f"{argv[0]} not found"
    except subprocess.TimeoutExpired:
        return None, f"`{' '.join(argv)}` did not answer within {TIMEOUT_S} s"
    except OSError as exc:
        return None, f"`{' '.join(argv)}` could not run: {exc.strerror or exc}"
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
        return None, f"`{' '.join(argv)}` exited with {done.returncode}: {tail[0]}"
    return done.stdout, None


def probe_nvcc(candidates: Sequence[str]) -> tuple[str | None, tuple[int, int] | None, str | None]:
    """(path, (major, minor), why-not)."""
    existing = [c for c in candidates if os.path.isfile(c) and os.access(c, os.X_OK)]
    if not existing:
        return None, None, "nvcc not found (no CUDA toolkit on PATH, CUDA_HOME or /usr/local/cuda)"
    path = existing[0]
    out, why = _run([path, "--version"])
    if out is None:
        return path, None, why
    version = parse_nvcc_version(out)
    return path, version, None if version else f"could not read a release from `{path} --version`"


def probe_cudart(ldconfig: str | None = None) -> tuple[list[CudaLibrary], str | None]:
    exe = ldconfig or shutil.which("ldconfig")
    if exe is None:
        exe = next((p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.path.isfile(p)), None)
    if exe is None:
        return [], "ldconfig not found (not a glibc Linux system?)"
    out, why = _run([exe, "-p"])
    if out is None:
        return [], why
    return parse_ldconfig(out), None


def probe(environ: Mapping[str, str] | None = None) -> ToolkitFacts:
    env = os.environ if environ is None else environ
    path, version, nvcc_why = probe_nvcc(nvcc_candidates(env))
    libs, cudart_why = probe_cudart()
    return ToolkitFacts(
        nvcc_path=path, nvcc_version=version, nvcc_why=nvcc_why, cudart=libs, cudart_why=cudart_why
    )
