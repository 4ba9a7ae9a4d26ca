"""Probes: collect facts about the environment, one module per source. They never judge.

Each probe catches its own failures and says why a fact is missing, so ``collect()`` always
returns (a machine with no torch, no driver and no nvcc is a valid answer, not an error).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from .facts import (
    Facts,
    NvmlFacts,
    SystemFacts,
    TensorFlowFacts,
    ToolkitFacts,
    TorchFacts,
)

T = TypeVar("T")

__all__ = ["Facts", "collect"]


def _guard(probe: Callable[[], T], fallback: Callable[[str], T]) -> T:
    """A probe bug must cost its own facts, not the report."""
    try:
        return probe()
    except Exception as exc:
        return fallback(f"probe failed: {type(exc).__name__}: {exc}")


def collect() -> Facts:
    import os
    import platform
    import sys

    from . import nvml_info, system_info, tensorflow_info, toolkit_info, topology, torch_info

    return Facts(
        system=_guard(
            system_info.probe,
            lambda why: SystemFacts(
                platform=platform.platform(),
                python=platform.python_version(),
                executable=sys.executable,
                pid=os.getpid(),
                shm_why=why,
            ),
        ),
        # NVML first: its process list is then read before torch could touch the GPU.
        nvml=_guard(nvml_info.probe, lambda why: NvmlFacts(available=False, why=why)),
        torch=_guard(torch_info.probe, lambda why: TorchFacts(importable=False, probe_error=why)),
        toolkit=_guard(toolkit_info.probe, lambda why: ToolkitFacts(nvcc_why=why, cudart_why=why)),
        tensorflow=_guard(
            tensorflow_info.probe, lambda why: TensorFlowFacts(installed=False, why=why)
        ),
        topology=_guard(topology.probe, lambda why: topology.TopologyFacts(False, why)),
    )
