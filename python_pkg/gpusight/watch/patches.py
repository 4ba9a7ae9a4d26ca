"""Temporary changes to the user's world, each with its undo, undone in reverse order.

docs/architecture.md, principle 2: hooks removed, wrapped functions restored, flags back as
found, also on error or interrupt. Every change the watch makes goes through a
:class:`Patches` so that one ``restore()`` undoes all of them, and an undo that fails does not
stop the others.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_MISSING = object()


class Patches:
    def __init__(self) -> None:
        self._undo: list[tuple[str, Callable[[], None]]] = []
        self.errors: list[str] = []

    def __len__(self) -> int:
        return len(self._undo)

    def add(self, what: str, undo: Callable[[], None]) -> None:
        self._undo.append((what, undo))

    def set_attr(self, owner: Any, name: str, value: Any) -> None:
        """Replace ``owner.name``; restore puts back exactly what was there (or nothing).

        If someone else replaced the attribute after us, theirs is left in place.
        """
        had = name in vars(owner) if isinstance(owner, type) else hasattr(owner, name)
        before = (
            vars(owner)[name] if isinstance(owner, type) and had else getattr(owner, name, _MISSING)
        )
        setattr(owner, name, value)

        def undo() -> None:
            current = (
                vars(owner).get(name, _MISSING)
                if isinstance(owner, type)
                else getattr(owner, name, _MISSING)
            )
            if current is not value:
                self.errors.append(
                    f"{getattr(owner, '__name__', owner)}.{name} was replaced meanwhile; left as is"
                )
                return
            if had:
                setattr(owner, name, before)
            else:
                delattr(owner, name)

        self.add(f"{getattr(owner, '__name__', owner)}.{name}", undo)

    def handle(self, what: str, handle: Any) -> None:
        """A torch ``RemovableHandle`` (hooks)."""
        self.add(what, handle.remove)

    def restore(self) -> None:
        while self._undo:
            what, undo = self._undo.pop()
            try:
                undo()
            except Exception as exc:  # one failed undo must not leave the others in place
                self.errors.append(f"could not restore {what}: {type(exc).__name__}: {exc}")
