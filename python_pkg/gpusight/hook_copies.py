"""Hooks on the user's model (the watch's, a what-if's) that a copy or a save of the model leaves
behind.

A hook registered on a module lives in the module's own hook dicts, so ``copy.deepcopy(model)``
(an EMA or teacher copy, the best model kept) and ``torch.save(model)`` copy it with the model.
A bound method of the watch there makes them copy the whole watch, which cannot be pickled: the
user's deepcopy raised ``TypeError: cannot pickle 'module' object``. A ``WatchHook`` copies as
``unwatched``, a hook that does nothing: the copy is the user's model, not watched; a model
saved mid-run loads with that hook (where gpusight is importable).

``torch.jit.script(model)`` compiles every hook in the module's dicts as TorchScript, and a
``WatchHook`` is not a function it can compile: an export scripted mid-run raised. While the
watch is on, ``torch.jit.script`` scripts the module with the watch's hooks set aside
(``scripting``): the scripted model is the user's, as without the watch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks")


def unwatched(*args: Any, **kwargs: Any) -> None:
    """The hook a copy of a watched model carries: it leaves every call as it is."""
    return None


class WatchHook(functools.partial):  # type: ignore[type-arg]
    """``WatchHook(watch._fwd_pre)``: calls it as a hook (a C-level call, as a bound method's),
    and copies or pickles as ``unwatched``."""

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return unwatched

    def __reduce__(self) -> tuple[Any, ...]:
        return (_unwatched, ())


def _unwatched() -> Any:
    """What a pickled ``WatchHook`` loads as."""
    return unwatched


@contextmanager
def set_aside(module: Any) -> Iterator[None]:
    """The ``WatchHook``s out of ``module`` and its submodules for a while, then back in their
    places (a hook the user adds meanwhile stays, after them)."""
    saved: list[tuple[dict[int, Any], dict[int, Any]]] = []
    for m in module.modules():
        for name in _HOOK_DICTS:
            hooks = getattr(m, name, None)
            ours = [k for k, h in (hooks or {}).items() if isinstance(h, WatchHook)]
            if hooks is not None and ours:
                saved.append((hooks, dict(hooks)))
                for k in ours:
                    del hooks[k]
    try:
        yield
    finally:
        for hooks, before in saved:
            added = {k: v for k, v in hooks.items() if k not in before}
            hooks.clear()
            hooks.update(before)
            hooks.update(added)


def scripting(script: Callable[..., Any]) -> Callable[..., Any]:
    """``torch.jit.script`` that scripts a module without the watch's hooks on it."""

    @functools.wraps(script)
    def wrapped(obj: Any, *args: Any, _frames_up: int = 0, **kwargs: Any) -> Any:
        # One frame more between the caller and torch's script: a class scripted here resolves
        # its names in the caller's frame (``_frames_up``).
        from torch import nn

        if isinstance(obj, nn.Module):
            with set_aside(obj):
                return script(obj, *args, _frames_up=_frames_up + 1, **kwargs)
        return script(obj, *args, _frames_up=_frames_up + 1, **kwargs)

    return wrapped
