"""Probes: collect facts about the environment, one module per source. They never judge.

Each probe catches its own failures and says why a fact is missing, so ``collect()`` always
returns (a machine with no torch, no driver and no nvcc is a valid answer, not an error).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

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


def collect(*, concurrent: bool = True) -> Facts:
    """Every probe's facts. The system and NVML probes run first (NVML's process list and the
    GPU's idle readings before torch could touch the GPU); then, with ``concurrent``, the probes
    that wait on child processes or the driver (toolkit, TensorFlow asked in a child, topology)
    run in threads beside the torch probe, which may import torch and start CUDA. Without it
    each runs after the other; the facts are the same either way. One NVML session spans the
    NVML and topology probes."""
    import os
    import platform
    import sys

    from . import nvml_info, system_info, tensorflow_info, toolkit_info, topology, torch_info
    from .background import Background
    from .nvml_session import nvml_session

    system = _guard(
        system_info.probe,
        lambda why: SystemFacts(
            platform=platform.platform(),
            python=platform.python_version(),
            executable=sys.executable,
            pid=os.getpid(),
            shm_why=why,
        ),
    )
    side: dict[str, Callable[[], Any]] = {
        "toolkit": lambda: _guard(
            toolkit_info.probe, lambda why: ToolkitFacts(nvcc_why=why, cudart_why=why)
        ),
        "tensorflow": lambda: _guard(
            tensorflow_info.probe, lambda why: TensorFlowFacts(installed=False, why=why)
        ),
        "topology": lambda: _guard(topology.probe, lambda why: topology.TopologyFacts(False, why)),
    }
    # A TensorFlow the user imported is asked in this process: that stays on this thread.
    threaded = [k for k in side if concurrent and (k != "tensorflow" or tensorflow_info.in_child())]
    with nvml_session():
        nvml = _guard(nvml_info.probe, lambda why: NvmlFacts(available=False, why=why))
        started = {k: Background(side[k], f"gpusight-probe-{k}") for k in threaded}
        torch = _guard(torch_info.probe, lambda why: TorchFacts(importable=False, probe_error=why))
        done = {k: started[k].result() if k in started else side[k]() for k in side}
    return Facts(
        system=system,
        nvml=nvml,
        torch=torch,
        toolkit=done["toolkit"],
        tensorflow=done["tensorflow"],
        topology=done["topology"],
    )
