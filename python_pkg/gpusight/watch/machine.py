"""The report's ``machine`` for a watched run: cheap facts only (the doctor collects the rest).

Nothing here initialises CUDA: GPU facts come from torch only when the run already started
CUDA, and from NVML otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ..machine_facts import build_machine, torch_gpus

_FLAG_READERS: dict[str, Callable[[Any], str | bool | None]] = {
    "float32_matmul_precision": lambda t: t.get_float32_matmul_precision(),
    "matmul.allow_tf32": lambda t: bool(t.backends.cuda.matmul.allow_tf32),
    "cudnn.allow_tf32": lambda t: bool(t.backends.cudnn.allow_tf32),
    "cudnn.benchmark": lambda t: bool(t.backends.cudnn.benchmark),
    "cudnn.deterministic": lambda t: bool(t.backends.cudnn.deterministic),
    "deterministic_algorithms": lambda t: bool(t.are_deterministic_algorithms_enabled()),
    "anomaly_detection": lambda t: bool(t.is_anomaly_enabled()),
    "grad_enabled": lambda t: bool(t.is_grad_enabled()),
}


def torch_flags(torch: Any) -> dict[str, str | bool | None]:
    """torch settings that a diagnosis must leave as found (and that the rules read)."""
    out: dict[str, str | bool | None] = {}
    for key, read in _FLAG_READERS.items():
        try:
            out[key] = read(torch)
        except Exception:
            out[key] = None
    return out


def tf32_matmul(flags: dict[str, Any]) -> bool:
    """Whether float32 matrix products may use TF32, from ``torch_flags``' reading."""
    precision = flags.get("float32_matmul_precision")
    return bool(flags.get("matmul.allow_tf32")) or precision in ("high", "medium")


def visible_gpus() -> list[int | str]:
    """NVML ids of the GPUs this process sees, in torch's order (at most 8)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is None:
        try:
            import pynvml

            pynvml.nvmlInit()
            try:
                n = int(pynvml.nvmlDeviceGetCount())
            finally:
                pynvml.nvmlShutdown()
        except Exception:
            n = 1
        return list(range(min(n, 8)))
    out: list[int | str] = []
    for item in env.split(","):
        item = item.strip()
        if not item:
            break
        if item.isdigit():
            out.append(int(item))
        elif item.startswith("GPU-"):
            out.append(item)
        else:
            break  # MIG or invalid: CUDA stops at the first entry it cannot use
    return out[:8]


def _nvml_gpus() -> list[dict[str, Any]]:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return []
    gpus: list[dict[str, Any]] = []
    try:
        for pos, ident in enumerate(visible_gpus()):
            h = (
                pynvml.nvmlDeviceGetHandleByUUID(ident)
                if isinstance(ident, str)
                else pynvml.nvmlDeviceGetHandleByIndex(ident)
            )
            name = pynvml.nvmlDeviceGetName(h)
            gpus.append(
                {
                    "index": pos,
                    "name": name.decode() if isinstance(name, bytes) else str(name),
                    "memory_total_bytes": int(pynvml.nvmlDeviceGetMemoryInfo(h).total),
                }
            )
    except Exception:
        pass
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    return gpus


def machine_facts(torch: Any) -> dict[str, Any]:
    # torch's devices only where the run started CUDA; NVML's otherwise, also without CUDA (a
    # CPU-only build on a GPU machine leaves those GPUs unused).
    started = bool(torch.cuda.is_available()) and torch.cuda.is_initialized()
    return build_machine(
        torch,
        gpus=torch_gpus(torch) if started else _nvml_gpus(),
        torch_fields={"settings": torch_flags(torch)},
        env={k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING")},
    )
