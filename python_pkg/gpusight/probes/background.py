"""A probe run in a thread of its own while the caller runs another.

The probes that wait on something outside the interpreter (a child process, the driver) hold the
GIL only between those waits, so they cost next to nothing beside the torch probe, which may
spend seconds importing torch and starting CUDA. The thread is a daemon: after Ctrl-C the caller
does not wait for it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Background(Generic[T]):
    """``fn()`` started now in a daemon thread; ``result()`` waits for it and returns its value
    (or raises what it raised)."""

    def __init__(self, fn: Callable[[], T], name: str) -> None:
        self._value: list[T] = []
        self._error: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, args=(fn,), name=name, daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[[], T]) -> None:
        try:
            self._value.append(fn())
        except BaseException as exc:  # handed to the caller, who decides
            self._error.append(exc)

    def result(self) -> T:
        self._thread.join()
        if self._error:
            raise self._error[0]
        return self._value[0]
