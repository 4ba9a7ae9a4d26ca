"""Run a callback once a module is imported, whenever the script imports it.

A re-run's knobs patch a framework's own switch (``TrainingArguments``, Lightning's ``Trainer``,
``Accelerator``), and the watch times a framework's checkpoint saving, without importing the
framework themselves: a script that never uses it pays nothing, and one that does gets the patch
before its first line that uses it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

Callback = Callable[[ModuleType], None]


class _Finder(importlib.abc.MetaPathFinder):
    """The one finder: every callback for a module runs after its one import."""

    def __init__(self) -> None:
        self.callbacks: dict[str, list[Callback]] = {}
        self.busy: set[str] = set()

    def find_spec(
        self, fullname: str, path: Any = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        callbacks = self.callbacks.get(fullname)
        if not callbacks or fullname in self.busy:
            return None
        self.busy.add(fullname)
        try:  # the spec the rest of the import system finds
            spec = importlib.util.find_spec(fullname)
        finally:
            self.busy.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Loader(spec.loader, list(callbacks))
        return spec


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: Any, callbacks: list[Callback]) -> None:
        self.inner = inner
        self.callbacks = callbacks

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)  # type: ignore[no-any-return]

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        module.__loader__ = self.inner  # what the module would have had
        for callback in self.callbacks:
            _call(callback, module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _call(callback: Callback, module: ModuleType) -> None:
    try:
        callback(module)
    except Exception:  # a patch that does not fit this version leaves the import intact
        pass


_FINDER = _Finder()


def after_import(callbacks: dict[str, Callback]) -> Callable[[], None]:
    """Call ``callbacks[name](module)`` once each module ``name`` is imported (now, for one
    imported already). Returns what takes the callbacks that are still waiting out again."""
    waiting: list[tuple[str, Callback]] = []
    for name, callback in callbacks.items():
        module = sys.modules.get(name)
        if module is not None:
            _call(callback, module)
            continue
        _FINDER.callbacks.setdefault(name, []).append(callback)
        waiting.append((name, callback))
    if waiting and _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)

    def remove() -> None:
        for name, callback in waiting:
            left = _FINDER.callbacks.get(name) or []
            if callback in left:
                left.remove(callback)
            if not left:
                _FINDER.callbacks.pop(name, None)
        if not _FINDER.callbacks and _FINDER in sys.meta_path:
            sys.meta_path.remove(_FINDER)

    return remove
