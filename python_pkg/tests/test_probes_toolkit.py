"""Toolkit probe: nvcc and ldconfig on this machine (CUDA 13.0 toolkit, no driver)."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
from gpusight.probes import toolkit_info

NVCC_OUT = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2024 NVIDIA Corporation
Built on Tue_Oct_29_23:50:19_PDT_2024
Cuda compilation tools, release 12.6, V12.6.85
Build cuda_12.6.r12.6/compiler.35059454_0
"""
LDCONFIG_OUT = """1234 libs found in cache `/etc/ld.so.cache'
\tlibcudnn.so.9 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcudnn.so.9
\tlibcudart.so.12 (libc6,x86-64) => /usr/local/cuda-12.6/lib64/libcudart.so.12
\tlibcudart.so (libc6,x86-64) => /usr/local/cuda-12.6/lib64/libcudart.so
"""


def test_parsers() -> None:
    assert toolkit_info.parse_nvcc_version(NVCC_OUT) == (12, 6)
    assert toolkit_info.parse_nvcc_version("no version here") is None
    libs = toolkit_info.parse_ldconfig(LDCONFIG_OUT)
    assert [(lib.soname, lib.path) for lib in libs] == [
        ("libcudart.so.12", "/usr/local/cuda-12.6/lib64/libcudart.so.12"),
        ("libcudart.so", "/usr/local/cuda-12.6/lib64/libcudart.so"),
    ]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on PATH")
def test_real_nvcc() -> None:
    facts = toolkit_info.probe()
    assert facts.nvcc_version is not None and facts.nvcc_why is None
    assert facts.nvcc_path is not None and os.path.isfile(facts.nvcc_path)


def test_no_nvcc_says_why() -> None:
    path, version, why = toolkit_info.probe_nvcc(["/no/such/nvcc"])
    assert (path, version) == (None, None)
    assert why is not None and why.startswith("nvcc not found")


def test_candidates_follow_cpp_extension_order(tmp_path: Path) -> None:
    env = {"CUDA_HOME": str(tmp_path / "cuda-12.8"), "PATH": str(tmp_path)}
    cands = toolkit_info.nvcc_candidates(env)
    assert cands[0] == str(tmp_path / "cuda-12.8" / "bin" / "nvcc")
    assert cands[-1] == "/usr/local/cuda/bin/nvcc"


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_nvcc_that_fails_is_reported(tmp_path: Path) -> None:
    nvcc = _script(tmp_path / "nvcc", "echo 'libfoo missing' >&2\nexit 3\n")
    path, version, why = toolkit_info.probe_nvcc([str(nvcc)])
    assert path == str(nvcc) and version is None
    assert why is not None and "exited with 3" in why and "libfoo missing" in why


def test_nvcc_from_cuda_home_wins(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    _script(tmp_path / "bin" / "nvcc", f"cat <<'EOF'\n{NVCC_OUT}EOF\n")
    facts = toolkit_info.probe({"CUDA_HOME": str(tmp_path), "PATH": ""})
    assert facts.nvcc_path == str(tmp_path / "bin" / "nvcc")
    assert facts.nvcc_version == (12, 6)


def test_real_ldconfig() -> None:
    libs, why = toolkit_info.probe_cudart()
    if why is not None:
        assert "ldconfig" in why
    else:
        assert all(lib.soname.startswith("libcudart.so") for lib in libs)
    _, why_missing = toolkit_info.probe_cudart("/no/such/ldconfig")
    assert why_missing == "/no/such/ldconfig not found"
