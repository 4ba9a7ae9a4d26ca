"""Facts about the user's torch: build, CUDA availability (and why not), devices, flags.

Only reads. Every flag is read through its getter; nothing is set, so the user's settings are the
same afterwards (a test compares them). torch is imported here and nowhere in rules/.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import Any

from .facts import Scalar, TorchDevice, TorchFacts

#: ``warnings.catch_warnings`` saves and restores the process-wide filter list: two threads
#: inside it at once can restore each other's "ignore everything" and leave it behind
#: (``gpusight.check()`` from several threads). Held around every such block here.
WARNINGS_LOCK = threading.RLock()


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _setting_readers(torch: Any) -> dict[str, Callable[[], Any]]:
    backends = torch.backends
    return {
        # Legacy TF32 switches and their newer fp32_precision counterparts (torch >= 2.9).
        # Mixing the two APIs makes some getters raise; each is read on its own for that reason.
        "cuda.matmul.allow_tf32": lambda: backends.cuda.matmul.allow_tf32,
        "cuda.matmul.fp32_precision": lambda: backends.cuda.matmul.fp32_precision,
        "cuda.fp32_precision": lambda: torch._C._get_fp32_precision_getter("cuda", "all"),
        "fp32_precision": lambda: backends.fp32_precision,
        "float32_matmul_precision": torch.get_float32_matmul_precision,
        "cudnn.allow_tf32": lambda: backends.cudnn.allow_tf32,
        "cudnn.fp32_precision": lambda: backends.cudnn.fp32_precision,
        "cudnn.conv.fp32_precision": lambda: backends.cudnn.conv.fp32_precision,
        "cudnn.enabled": lambda: backends.cudnn.enabled,
        "cudnn.benchmark": lambda: backends.cudnn.benchmark,
        "cudnn.deterministic": lambda: backends.cudnn.deterministic,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled,
        "deterministic_warn_only": torch.is_deterministic_algorithms_warn_only_enabled,
        "anomaly_enabled": torch.is_anomaly_enabled,
        "anomaly_check_nan": torch.is_anomaly_check_nan_enabled,
    }


def read_settings(torch: Any) -> tuple[dict[str, Scalar], dict[str, str]]:
    """Each flag as found; a getter this torch lacks is left out, one that raises is None."""
    values: dict[str, Scalar] = {}
    errors: dict[str, str] = {}
    with WARNINGS_LOCK, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for key, read in _setting_readers(torch).items():
            try:
                value = read()
            except AttributeError:
                continue
            except Exception as exc:
                values[key] = None
                errors[key] = _describe(exc)
                continue
            values[key] = value if isinstance(value, (str, int, float)) else bool(value)
    return values, errors


def _arch_list(torch: Any) -> list[str]:
    # Older torch returns [] from get_arch_list() when CUDA is unavailable; the compiled-in
    # flags still say which kernels the wheel carries, which is what the arch check needs.
    arch: list[str] = list(torch.cuda.get_arch_list())
    if not arch:
        flags = getattr(torch._C, "_cuda_getArchFlags", lambda: None)()
        arch = flags.split() if flags else []
    return arch


def _devices(torch: Any, count: int, errors: dict[str, str]) -> list[TorchDevice]:
    out: list[TorchDevice] = []
    for i in range(count):
        try:
            p = torch.cuda.get_device_properties(i)
        except Exception as exc:
            errors[f"device{i}"] = _describe(exc)
            continue
        uuid = getattr(p, "uuid", None)
        out.append(
            TorchDevice(
                index=i,
                name=str(p.name),
                capability=(int(p.major), int(p.minor)),
                total_memory_bytes=int(p.total_memory),
                sm_count=int(p.multi_processor_count),
                uuid=str(uuid) if uuid is not None else None,
            )
        )
    return out


def _cuda_error(torch: Any, caught: list[warnings.WarningMessage]) -> str | None:
    """Why CUDA is unavailable, in torch's words where it gave any."""
    for w in caught:
        text = str(w.message).strip()
        if "CUDA" in text or "driver" in text.lower():
            return text.splitlines()[0]
    # The runtime warns only on the first failed attempt in a process (a notebook may already
    # have made it); lazy init raises with the reason every time and sets no state on failure.
    try:
        torch.cuda._lazy_init()
    except Exception as exc:
        return _describe(exc)
    return None


def probe() -> TorchFacts:
    try:
        import torch
    except BaseException as exc:  # a broken install can raise OSError, not just ImportError
        if isinstance(exc, KeyboardInterrupt):
            raise
        return TorchFacts(importable=False, import_error=_describe(exc))

    facts = TorchFacts(importable=True, version=str(torch.__version__))
    errors = facts.errors
    facts.cuda = getattr(torch.version, "cuda", None)
    facts.hip = getattr(torch.version, "hip", None)
    try:
        facts.cudnn = torch.backends.cudnn.version()  # type: ignore[no-untyped-call]
    except Exception as exc:
        errors["cudnn"] = _describe(exc)
    gpu_build = facts.cuda is not None or facts.hip is not None
    if gpu_build:
        try:
            with WARNINGS_LOCK, warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                facts.cuda_available = bool(torch.cuda.is_available())
            if not facts.cuda_available:
                facts.cuda_error = _cuda_error(torch, caught)
        except Exception as exc:
            facts.cuda_error = _describe(exc)
        try:
            facts.arch_list = _arch_list(torch)
        except Exception as exc:
            errors["arch_list"] = _describe(exc)
        if facts.cuda_available:
            try:
                facts.device_count = int(torch.cuda.device_count())
            except Exception as exc:
                errors["device_count"] = _describe(exc)
            facts.devices = _devices(torch, facts.device_count, errors)
    facts.settings, setting_errors = read_settings(torch)
    errors.update({f"settings.{k}": v for k, v in setting_errors.items()})
    return facts
