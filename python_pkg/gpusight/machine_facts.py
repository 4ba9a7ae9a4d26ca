"""The report's ``machine`` (schema Machine): every kind of report builds it with ``build_machine``.

A caller passes the fields it read itself (the doctor passes what its probes found); the rest
that cost nothing are read here: the host from the standard library, torch's build and devices
from the ``torch`` module passed (None: torch is not importable). Nothing here initialises
CUDA unless ``torch_gpus`` is asked for on a process that has not started it.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Mapping
from typing import Any

from .report_schema import load_schema


def _properties(definition: str) -> tuple[str, ...]:
    return tuple(load_schema()["definitions"][definition]["properties"])


def _cuda_available(torch: Any) -> bool:
    try:
        return bool(torch.cuda.is_available())
    except Exception:
        return False


def torch_gpus(torch: Any) -> list[dict[str, Any]]:
    """torch's CUDA devices as schema Gpu rows; reading them starts CUDA where it is not yet."""
    if not _cuda_available(torch):
        return []
    gpus: list[dict[str, Any]] = []
    for i in range(torch.cuda.device_count()):
        try:
            p = torch.cuda.get_device_properties(i)
        except Exception:
            continue
        gpus.append(
            {
                "index": i,
                "name": str(p.name),
                "capability": f"{p.major}.{p.minor}",
                "sm_count": int(p.multi_processor_count),
                "memory_total_bytes": int(p.total_memory),
            }
        )
    return gpus


def _torch_info(torch: Any, more: Mapping[str, Any]) -> dict[str, Any]:
    available = _cuda_available(torch)
    info: dict[str, Any] = {
        "version": str(torch.__version__),
        "cuda": torch.version.cuda,
        "cuda_available": available,
        "device_count": int(torch.cuda.device_count()) if available else 0,
        **more,
    }
    return {k: info[k] for k in _properties("TorchInfo") if k in info}


def build_machine(
    torch: Any | None = None,
    /,
    *,
    torch_fields: Mapping[str, Any] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """The Machine dict, in the schema's field order.

    ``fields``: Machine fields as the caller read them, used as given. Of those left out, the
    host's (hostname, platform, python, cpu_count), ``torch`` and ``gpus`` (torch's devices) are
    read now. ``torch_fields``: TorchInfo fields beside the cheap ones (settings, hip, cudnn).
    """
    known = _properties("Machine")
    unknown = sorted(set(fields) - set(known))
    if unknown:
        raise ValueError(f"not fields of the schema's Machine: {', '.join(unknown)}")
    cheap: dict[str, Callable[[], Any]] = {
        "hostname": lambda: platform.node() or None,
        "platform": platform.platform,
        "python": platform.python_version,
        "cpu_count": os.cpu_count,
        "torch": lambda: None if torch is None else _torch_info(torch, torch_fields or {}),
        "gpus": lambda: [] if torch is None else torch_gpus(torch),
    }
    out: dict[str, Any] = {}
    for key in known:
        if key in fields:
            out[key] = fields[key]
        elif key in cheap:
            out[key] = cheap[key]()
    return out
