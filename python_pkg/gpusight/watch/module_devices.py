"""Which parts of a module hold their tensors on the CPU (torch side): read once, at a module's
first outermost call, so that a model left partly on the CPU beside a GPU can be named by its
parts (``rules/split_placement.py``).

A part is the largest submodule whose parameters and buffers, all of them, are on the CPU: a
``head`` of three layers left behind is one part, not three. Modules that hold no tensor (an
activation, a container of nothing) belong to no device and are never a part on their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_PARTS = 8
"""Parts named per module: past a handful the report would list layers, not a mistake."""


@dataclass
class CpuPart:
    path: str
    """Its name inside the module called (``named_modules``), ``""`` for the module itself."""
    cls: str
    params: int
    """Parameter elements in it."""


def _own_devices(module: Any) -> set[str]:
    tensors = [*module.parameters(recurse=False), *module.buffers(recurse=False)]
    return {t.device.type for t in tensors}


def tensor_devices(module: Any) -> dict[int, set[str]]:
    """The device types of each submodule's parameters and buffers, its children's included,
    by ``id`` of the submodule (one pass over the tree, children before their parent)."""
    out: dict[int, set[str]] = {}

    def visit(m: Any) -> set[str]:
        key = id(m)
        if key in out:  # a module shared by two parents is read once
            return out[key]
        devices = _own_devices(m)
        out[key] = devices
        for child in m.children():
            devices |= visit(child)
        return devices

    visit(module)
    return out


def cpu_parts(module: Any, devices: dict[int, set[str]] | None = None) -> list[CpuPart]:
    """The largest submodules of ``module`` whose tensors are all on the CPU, outermost first
    (the module itself where it is all on the CPU); at most ``MAX_PARTS``."""
    devices = tensor_devices(module) if devices is None else devices
    found: list[CpuPart] = []
    stack: list[tuple[str, Any]] = [("", module)]
    while stack and len(found) < MAX_PARTS:
        path, m = stack.pop(0)
        held = devices.get(id(m), set())
        if held == {"cpu"}:
            n = sum(int(p.numel()) for p in m.parameters())
            found.append(CpuPart(path, type(m).__name__, n))
        elif "cpu" in held:
            stack.extend((f"{path}.{name}" if path else name, c) for name, c in m.named_children())
    return found
