"""Hooks on the user's model (the watch's, a what-if's) that a copy or a save of the model leaves
behind.

A hook registered on a module lives in the module's own hook dicts, so ``copy.deepcopy(model)``
(an EMA or teacher copy, the best model kept) and ``torch.save(model)`` copy it with the model.
A bound method of the watch there makes them copy the whole watch, which cannot be pickled: the
user's deepcopy raised ``TypeError: cannot pickle 'module' object``. A ``WatchHook`` copies as
``unwatched``, a hook that does nothing: the copy is the user's model, not watched; a model
saved mid-run loads with that hook (where gpusight is importable).
"""

from __future__ import annotations

import functools
from typing import Any


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
