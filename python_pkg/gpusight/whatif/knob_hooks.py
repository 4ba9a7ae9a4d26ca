"""The kernel's hold on a copy of the user's model, as a re-run's model hooks hold the script's
(``knobs.base.Target``): a knob that takes effect at the model's calls (``Knob.local_hooks``) is
applied to the copy by its own ``prepare`` and ``before``, so both drivers make the same change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ..hook_copies import WatchHook
from ..knobs import owners
from ..knobs.base import After, Knob
from ..knobs.tensors import batch_len, map_tensors, tensors_of


class KnobHooks:
    """``knobs.base.Target`` and ``Record`` for one arm's copy of the model."""

    def __init__(self, changes: dict[str, Any]) -> None:
        self.changes = changes
        self.device: Any = None
        self.relaid = False
        self.batch: int | None = None
        self.capturing = False
        self.notes: list[str] = []
        self.hits: dict[str, int] = {}
        self._undo: list[Callable[[], None]] = []
        self._calls: list[list[After]] = []
        self.knobs: list[Knob] = sorted(
            (k for k in owners(changes) if k.local_hooks), key=lambda k: k.order
        )

    # Target --------------------------------------------------------------------------------
    @property
    def torch(self) -> Any:
        return torch

    @property
    def inj(self) -> KnobHooks:
        return self

    @property
    def map_tensors(self) -> Callable[[Any, Callable[[Any], Any]], Any]:
        return map_tensors

    @property
    def tensors_of(self) -> Callable[[Any], list[Any]]:
        return tensors_of

    @property
    def batch_len(self) -> Callable[[Any], int | None]:
        return batch_len

    # Record --------------------------------------------------------------------------------
    def hit(self, what: str) -> None:
        self.hits[what] = self.hits.get(what, 0) + 1

    def on_undo(self, fn: Callable[[], None]) -> None:
        self._undo.append(fn)

    # the copy ------------------------------------------------------------------------------
    def attach(self, model: nn.Module) -> None:
        """Prepare the copy and hook its calls (nothing where no knob acts on the model)."""
        if not self.knobs:
            return
        for knob in self.knobs:
            knob.prepare(self, model)
        pre = model.register_forward_pre_hook(WatchHook(self._pre), with_kwargs=True)
        post = model.register_forward_hook(
            WatchHook(self._post), with_kwargs=True, always_call=True
        )
        self.on_undo(pre.remove)
        self.on_undo(post.remove)

    def _pre(self, module: nn.Module, args: Any, kwargs: Any) -> tuple[Any, Any]:
        (args, kwargs), leaves = self._enter(module, (args, kwargs))
        self._calls.append(leaves)
        return args, kwargs

    def _enter(self, module: nn.Module, call: Any) -> tuple[Any, list[After]]:
        leaves = []
        for knob in self.knobs:
            call, after = knob.before(self, module, call)
            if after is not None:
                leaves.append(after)
        return call, leaves

    def call(self, model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``model(*args, **kwargs)`` inside the knobs' ``before`` and its ``after``, the model
        itself not hooked: a forward timed in turn with and without the change on the user's
        own model (``diagnose_inference``; the knobs it takes have no ``prepare``)."""
        (args, kwargs), leaves = self._enter(model, (args, kwargs))
        output: Any = None
        try:
            output = model(*args, **kwargs)
        finally:
            for after in reversed(leaves):
                output = after(output)
        return output

    def _post(self, module: nn.Module, args: Any, kwargs: Any, output: Any) -> Any:
        leaves = self._calls.pop() if self._calls else []
        for after in reversed(leaves):
            output = after(output)
        return output

    def close(self) -> None:
        while self._undo:
            self._undo.pop()()
