"""A time limit on code the kernel runs itself (a cell's re-run): past it, the kernel's main
thread gets the SIGINT Ctrl-C would send it, and the caller tells that interrupt from the
user's own by the flag it gets back.

A re-run of a script is a process the driver can kill; a cell's re-run is the kernel's own code,
and without this a re-run that hangs held ``%%gpusight --what-if --budget 10`` for as long as it
hung (120 s until stopped by hand).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def interrupted_after(seconds: float) -> Iterator[list[bool]]:
    """Inside: after ``seconds`` the main thread gets a KeyboardInterrupt; ``fired[0]`` says
    whether one came from here."""
    fired = [False]
    lock = threading.Lock()
    active = [True]
    main = threading.main_thread().ident

    def fire() -> None:
        with lock:
            if active[0] and main is not None:
                fired[0] = True
                # A real SIGINT to the main thread: it also ends a blocking wait (a sleep, a
                # lock), which _thread.interrupt_main() would not.
                signal.pthread_kill(main, signal.SIGINT)

    timer = threading.Timer(max(0.0, seconds), fire)
    timer.daemon = True
    timer.start()
    try:
        yield fired
    finally:
        with lock:
            active[0] = False
        timer.cancel()
