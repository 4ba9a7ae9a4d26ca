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

AGAIN_S = 1.0
"""Past the limit, the interrupt comes again this often until the code has stopped: a re-run
that catches KeyboardInterrupt and goes on is interrupted once more."""


@contextlib.contextmanager
def interrupted_after(seconds: float, again_s: float = AGAIN_S) -> Iterator[list[bool]]:
    """Inside: after ``seconds`` the main thread gets a KeyboardInterrupt, and again every
    ``again_s`` until the block ends; ``fired[0]`` says whether one came from here."""
    fired = [False]
    lock = threading.Lock()
    done = threading.Event()
    main = threading.main_thread().ident

    def fire() -> None:
        if done.wait(max(0.0, seconds)):
            return
        while True:
            with lock:
                if done.is_set() or main is None:
                    return
                fired[0] = True
                # A real SIGINT to the main thread: it also ends a blocking wait (a sleep, a
                # lock), which _thread.interrupt_main() would not.
                signal.pthread_kill(main, signal.SIGINT)
            if done.wait(again_s):
                return

    timer = threading.Thread(target=fire, name="gpusight-time-limit", daemon=True)
    with _deliverable():
        timer.start()
        try:
            yield fired
        finally:
            with lock:
                done.set()


@contextlib.contextmanager
def _deliverable() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt in the main thread for the block: unblocked where the
    thread's mask held it back, and Python's own handler in place of whatever else was set
    (ignored, the system's default that would end the kernel, a handler that only takes note),
    as a kernel sets it while it runs a cell; each put back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handler = signal.getsignal(signal.SIGINT)
    swap = handler is not signal.default_int_handler
    if swap:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    blocked = signal.SIGINT in signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        if blocked:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        if swap:
            signal.signal(signal.SIGINT, handler)
