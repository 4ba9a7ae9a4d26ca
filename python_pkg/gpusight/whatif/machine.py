"""The machine facts a diagnose report carries: cheap ones only (no NVML, no subprocesses)."""

from __future__ import annotations

import os
import platform
from typing import Any

import torch


def machine_facts() -> dict[str, Any]:
    cuda = torch.cuda.is_available()
    gpus: list[dict[str, Any]] = []
    if cuda:
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            gpus.append(
                {
                    "index": i,
                    "name": props.name,
                    "capability": f"{props.major}.{props.minor}",
                    "sm_count": props.multi_processor_count,
                    "memory_total_bytes": int(props.total_memory),
                }
            )
    cudnn_mod: Any = torch.backends.cudnn  # untyped in torch's stubs
    cudnn = cudnn_mod.version() if cudnn_mod.is_available() else None
    return {
        "hostname": platform.node() or None,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "torch": {
            "version": torch.__version__,
            "cuda": torch.version.cuda,
            "hip": getattr(torch.version, "hip", None),
            "cudnn": cudnn,
            "cuda_available": cuda,
            "device_count": torch.cuda.device_count() if cuda else 0,
        },
        "gpus": gpus,
    }
