"""SIGTERM and SIGHUP end a what-if or a verify as Ctrl-C does: its re-runs are stopped (SIGINT
first), its scratch folders removed, and what ran so far reported."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

SIGNALS = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s)


@contextmanager
def as_interrupt() -> Iterator[list[int]]:
    """Inside: those signals raise KeyboardInterrupt; the list holds the ones that came."""
    got: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield got  # handlers can only be set from the main thread
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        got.append(signum)
        raise KeyboardInterrupt

    before = {s: signal.signal(s, handler) for s in SIGNALS}
    try:
        yield got
    finally:
        for s, h in before.items():
            signal.signal(s, h)


def exit_code(got: list[int]) -> int:
    """The shell's code for a run ended by ``got[0]`` (Ctrl-C where none came)."""
    return 128 + (got[0] if got else signal.SIGINT)
