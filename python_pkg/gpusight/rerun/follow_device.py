"""Host tensors follow a moved model's outputs, as if the script had moved its batches too.

The what-if ``to_device`` moves a CPU model to the GPU from outside; the script's labels, loss
and metrics stay on the host. Copying the outputs back to them costs a host sync a step, which
the real fix (batches on the GPU) does not pay: on the H200 that measured 3.7x where the fix
gave 5.7x. Instead, from the model's output until the script's ``backward`` (or the model's
next call), a torch function mode moves host tensors to the device in any op that meets a
device tensor, which is what ``y.to(device)`` in the script would have done. Host-side uses of
the outputs keep working: ``.numpy()`` / ``np.asarray`` bring a device tensor back, and an
in-place op on a host tensor (``total += loss``) gets its other operands on the host.

The mode is on from the model's output to its next call, except during an optimizer's step
(all on the device: the hooks in ``inject.py`` pause it there). Only the torch ops the script
calls itself pass through it (torch runs each op's insides with the mode off): one Python call
per op. A host tensor is pinned before it is copied, as the fix's ``pin_memory`` would have it:
a copy from pageable memory waits for the GPU, a host sync a step the fix does not pay.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode, _get_current_function_mode
from torch.utils._pytree import tree_map

_TO_HOST: set[Any] = {torch.Tensor.numpy, torch.Tensor.__array__}
_IN_PLACE_DUNDERS = {"__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__"}


def _in_place(func: Any) -> bool:
    name = getattr(func, "__name__", "")
    return (name.endswith("_") and not name.endswith("__")) or name in _IN_PLACE_DUNDERS


def to_device(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``t`` on ``device`` without a host sync: pinned first (a CUDA copy from pageable memory
    waits for the GPU's queue, which the fix's pinned batches do not)."""
    if device.type == "cuda" and not t.is_pinned():
        t = t.pin_memory()
    return t.to(device, non_blocking=True)


class FollowDevice(TorchFunctionMode):
    """While entered: host tensors that meet ``device`` tensors in an op go to ``device``."""

    def __init__(self, device: torch.device) -> None:
        super().__init__()
        self.device = device
        self.kind = device.type
        self.entered = False
        self.moved = 0

    # -- on and off, from hooks outside any op ---------------------------------------------
    def enter(self) -> None:
        if not self.entered:
            self.__enter__()  # type: ignore[no-untyped-call]
            self.entered = True

    def leave(self) -> None:
        """Off, when it is the innermost mode (a mode the script entered since stays on top:
        this one is then left in place, passing ops through, until that one is gone)."""
        if self.entered and _get_current_function_mode() is self:  # type: ignore[no-untyped-call]
            self.__exit__(None, None, None)
            self.entered = False

    # -- each op ------------------------------------------------------------------------------
    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func in _TO_HOST and args and self._on_device(args[0]):
            args = (args[0].cpu(), *args[1:])
        else:
            dev, host = self._devices((args, kwargs))
            if dev and args and self._on_host(args[0]) and _in_place(func):
                # A host tensor changed in place (``total += loss``): the others come to it.
                rest, kwargs = self._map((args[1:], kwargs), self._to_host)
                args = (args[0], *rest)
            elif dev and host:
                args, kwargs = self._map((args, kwargs), self._to_device)
        return func(*args, **kwargs)

    # -- helpers ------------------------------------------------------------------------------
    def _on_device(self, t: Any) -> bool:
        return isinstance(t, torch.Tensor) and t.device.type == self.kind

    @staticmethod
    def _on_host(t: Any) -> bool:
        return isinstance(t, torch.Tensor) and t.device.type == "cpu"

    def _devices(self, tree: Any) -> tuple[bool, bool]:
        """Whether ``tree`` holds a device tensor, and a host tensor that is not 0-dim."""
        found = [False, False]

        def look(t: Any) -> Any:
            if isinstance(t, torch.Tensor):
                if t.device.type == self.kind:
                    found[0] = True
                elif t.device.type == "cpu" and t.dim() > 0:
                    found[1] = True
            return t

        tree_map(look, tree)
        return found[0], found[1]

    def _to_device(self, t: Any) -> Any:
        # A 0-dim host tensor mixes with device tensors as it is (torch allows it).
        if isinstance(t, torch.Tensor) and t.device.type == "cpu" and t.dim() > 0:
            self.moved += 1
            return to_device(t, self.device)
        return t

    def _to_host(self, t: Any) -> Any:
        if isinstance(t, torch.Tensor) and t.device.type == self.kind:
            return t.cpu()
        return t

    @staticmethod
    def _map(tree: tuple[Any, Any], fn: Any) -> tuple[Any, Any]:
        args, kwargs = tree_map(fn, tree)
        return tuple(args), dict(kwargs)
