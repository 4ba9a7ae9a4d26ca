"""The report's ``machine`` section for a bench report.

The environment doctor owns the probing: its ``machine(probes.collect())`` is used. Should that
fail (a probe bug must not cost the benchmarks), a minimal machine from the standard library and
torch alone. A caller that already ran the doctor passes its machine to ``build_report`` instead.
"""

from __future__ import annotations

import os
import platform
from typing import Any


def machine_info() -> dict[str, Any]:
    try:
        from .. import doctor, probes

        return doctor.machine(probes.collect())
    except Exception:
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
