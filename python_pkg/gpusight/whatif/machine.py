"""The machine facts a diagnose report carries: cheap ones only (no NVML, no subprocesses)."""

from __future__ import annotations

from typing import Any

import torch

from ..machine_facts import build_machine


def machine_facts() -> dict[str, Any]:
    cudnn_mod: Any = torch.backends.cudnn  # untyped in torch's stubs
    return build_machine(
        torch,
        torch_fields={
            "hip": getattr(torch.version, "hip", None),
            "cudnn": cudnn_mod.version() if cudnn_mod.is_available() else None,
        },
    )
