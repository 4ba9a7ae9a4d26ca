"""The report's ``machine`` section for a bench report.

The environment doctor owns the probing; when it offers a machine builder, that is used. Until
then (or when it fails), a minimal machine from the standard library and torch alone.
"""

from __future__ import annotations

import importlib
import os
import platform
from typing import Any

# Names the doctor may export for "facts -> schema machine dict"; the first that exists wins.
_DOCTOR_BUILDERS = ("machine_dict", "machine_info", "machine")


def machine_info() -> dict[str, Any]:
    try:
        doctor = importlib.import_module("gpusight.doctor")
    except ImportError:
        doctor = None
    for name in _DOCTOR_BUILDERS:
        fn = getattr(doctor, name, None) if doctor is not None else None
        if callable(fn):
            try:
                machine = fn()
            except Exception:
                break
            if isinstance(machine, dict):
                return machine
    return minimal_machine()


def minimal_machine() -> dict[str, Any]:
    machine: dict[str, Any] = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "gpus": [],
        "torch": None,
    }
    try:
        import torch
    except ImportError:
        return machine
    info: dict[str, Any] = {
        "version": str(torch.__version__),
        "cuda": torch.version.cuda,
        "cuda_available": False,
        "device_count": 0,
    }
    machine["torch"] = info
    try:
        available = bool(torch.cuda.is_available())
    except Exception:
        available = False
    info["cuda_available"] = available
    if not available:
        return machine
    info["device_count"] = int(torch.cuda.device_count())
    for index in range(info["device_count"]):
        try:
            props = torch.cuda.get_device_properties(index)
        except Exception:
            continue
        machine["gpus"].append(
            {
                "index": index,
                "name": str(props.name),
                "capability": f"{props.major}.{props.minor}",
                "sm_count": int(props.multi_processor_count),
                "memory_total_bytes": int(props.total_memory),
            }
        )
    return machine
