"""System probe on this machine: CPUs, memory, /dev/shm, the environment variables that matter."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from gpusight.probes import system_info


def test_counts_match_the_os() -> None:
    facts = system_info.probe()
    assert facts.cpu_count == os.cpu_count()
    assert facts.cpu_affinity == len(os.sched_getaffinity(0))
    assert facts.pid == os.getpid()
    assert facts.memory_total_bytes is not None and facts.memory_total_bytes > 0


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm on this system")
def test_shm_is_statvfs_size() -> None:
    st = os.statvfs("/dev/shm")
    assert system_info.probe().shm_bytes == st.f_frsize * st.f_blocks


def test_missing_shm_says_why() -> None:
    size, why = system_info.shm_size("/no/such/dir")
    assert size is None and why == "/no/such/dir does not exist on this system"


def test_empty_visible_devices_differs_from_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    monkeypatch.delenv("CUDA_LAUNCH_BLOCKING", raising=False)
    env = system_info.probe().env
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    assert env["CUDA_LAUNCH_BLOCKING"] is None
    assert env["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert system_info.probe().env["CUDA_VISIBLE_DEVICES"] is None


def test_unset_watched_variables_are_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    assert "CUDA_DEVICE_ORDER" not in system_info.probe().env


def test_cgroup_quota(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert system_info.cgroup_cpu_quota(str(tmp_path)) == 1.5
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert system_info.cgroup_cpu_quota(str(tmp_path)) is None
    (tmp_path / "cpu.max").unlink()
    v1 = tmp_path / "cpu"
    v1.mkdir()
    (v1 / "cpu.cfs_quota_us").write_text("400000\n")
    (v1 / "cpu.cfs_period_us").write_text("100000\n")
    assert system_info.cgroup_cpu_quota(str(tmp_path)) == 4.0
    (v1 / "cpu.cfs_quota_us").write_text("-1\n")
    assert system_info.cgroup_cpu_quota(str(tmp_path)) is None
