"""One NVML session held around work that starts and stops NVML several times.

NVML counts its initialisations: ``nvmlShutdown`` tears the library down only when the count
falls to zero. The NVML probe, the topology probe and each GPU benchmark call ``nvmlInit`` and
``nvmlShutdown`` themselves; inside this session those calls only move the count, so NVML starts
once, not once per caller, and every caller reads what it read before.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def nvml_session() -> Iterator[bool]:
    """NVML initialised for the block (True), or not available (False: the callers inside find
    that out and say why themselves)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no nvidia-ml-py, no driver: nothing to hold
        yield False
        return
    try:
        yield True
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
