"""build_machine: the one builder of the report's machine, for every kind of report."""

from __future__ import annotations

import os
import platform
from types import SimpleNamespace
from typing import Any

import pytest
from gpusight.machine_facts import build_machine, torch_gpus
from gpusight.report import Report
from gpusight.report_schema import load_schema


def _fake_torch(available: bool, fail_on: int | None = None) -> Any:
    def props(i: int) -> Any:
        if i == fail_on:
            raise RuntimeError("no such device")
        return SimpleNamespace(
            name=f"GPU {i}", major=9, minor=0, multi_processor_count=132, total_memory=1 << 30
        )

    cuda = SimpleNamespace(
        is_available=lambda: available,
        device_count=lambda: 2,
        get_device_properties=props,
    )
    return SimpleNamespace(__version__="2.9.0", version=SimpleNamespace(cuda="12.8"), cuda=cuda)


def test_without_torch_the_host_alone() -> None:
    m = build_machine(None)
    assert m == {
        "hostname": platform.node() or None,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "torch": None,
        "gpus": [],
    }
    Report(kind="watch", machine=m).validate()


def test_torch_build_and_devices_in_the_schema_order() -> None:
    m = build_machine(_fake_torch(True, fail_on=1), torch_fields={"settings": {"x": True}})
    assert m["torch"] == {
        "version": "2.9.0",
        "cuda": "12.8",
        "cuda_available": True,
        "device_count": 2,
        "settings": {"x": True},
    }
    # A device whose properties cannot be read is left out.
    assert [g["index"] for g in m["gpus"]] == [0]
    machine_order = list(load_schema()["definitions"]["Machine"]["properties"])
    assert list(m) == [k for k in machine_order if k in m]
    Report(kind="watch", machine=m).validate()


def test_no_cuda_no_devices() -> None:
    torch = _fake_torch(False)
    assert torch_gpus(torch) == []
    assert build_machine(torch)["torch"]["device_count"] == 0


def test_fields_the_caller_read_win_and_others_are_not_read() -> None:
    m = build_machine(None, hostname="node7", cpu_count=None, gpus=[], env={"A": "1"})
    assert m["hostname"] == "node7" and m["cpu_count"] is None and m["env"] == {"A": "1"}
    assert list(m)[-2:] == ["gpus", "env"]


def test_a_field_outside_the_schema_is_refused() -> None:
    with pytest.raises(ValueError, match="cpus"):
        build_machine(None, cpus=4)
