"""Watch a real training or inference run and say why its GPU idles.

``with gpusight.watch(steps=20) as w: train()`` then ``w.report``; ``%%gpusight`` in a notebook;
``gpusight run script.py`` from a shell. See ``session.py`` for what is instrumented.
"""

from __future__ import annotations

import sys
import types

from .session import StopWatch, Watch


def watch(
    steps: int | None = None,
    warmup: int = 3,
    profile_steps: int = 3,
    stop_after_steps: bool | None = None,
    label: str | None = None,
) -> Watch:
    """A context manager that instruments the code inside it; ``.report`` afterwards.

    With ``steps`` the watched code ends after that many measured steps (a private exception,
    caught by the watch, unwinds it) unless ``stop_after_steps=False``.
    """
    return Watch(
        steps=steps,
        warmup=warmup,
        profile_steps=profile_steps,
        stop_after_steps=stop_after_steps,
        label=label,
    )


__all__ = ["StopWatch", "Watch", "watch"]


class _CallableModule(types.ModuleType):
    """``gpusight.watch(...)`` keeps working once this subpackage is imported.

    ``gpusight/__init__.py`` defines a lazy ``watch()`` function; importing ``gpusight.watch``
    makes Python bind the subpackage to the same attribute of ``gpusight``. Calling the module
    calls :func:`watch`, so both spellings stay valid.
    """

    def __call__(
        self,
        steps: int | None = None,
        warmup: int = 3,
        profile_steps: int = 3,
        stop_after_steps: bool | None = None,
        label: str | None = None,
    ) -> Watch:
        return watch(steps, warmup, profile_steps, stop_after_steps, label)


sys.modules[__name__].__class__ = _CallableModule
