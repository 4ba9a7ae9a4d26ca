"""Keep the profiler's own chatter out of the user's output.

torch's profiler writes two kinds of line straight to file descriptor 2, past ``sys.stderr``, so
in Jupyter they land above the report as red stderr: kineto's ``USDT: ... profiler_start/stop``
on every window, and, when the window runs in a thread other than the one that loaded torch
(a trainer's worker thread), "ERROR: External init callback must run in same thread as
registerClient": kineto's client is bound to that thread, and the message says only that its
one-off set-up was skipped; the window's trace is complete without it
(``tests/test_watch_quiet_stderr.py`` reads one back). Around the profiler's start and stop,
fd 2 goes to a temporary file; afterwards it is restored and every other line written meanwhile
is passed on unchanged.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

DROPPED = (b"USDT:", b"ERROR: External init callback must run in same thread as registerClient")


@contextmanager
def without_profiler_chatter(fd: int = 2) -> Iterator[None]:
    """Drop the lines that start as ``DROPPED`` and reach ``fd`` inside the block; keep the
    rest."""
    try:
        saved = os.dup(fd)
    except OSError:  # no such descriptor (a daemon with fd 2 closed): nothing to guard
        yield
        return
    with tempfile.TemporaryFile() as tmp:
        _flush()
        os.dup2(tmp.fileno(), fd)
        try:
            yield
        finally:
            _flush()
            os.dup2(saved, fd)
            os.close(saved)
            tmp.seek(0)
            kept = [
                line
                for line in tmp.read().splitlines(keepends=True)
                if not line.startswith(DROPPED)
            ]
            if kept:
                os.write(fd, b"".join(kept))


def _flush() -> None:
    # Python-level text written before the switch must reach the old target, and text written
    # inside the block the temporary file.
    try:
        sys.stderr.flush()
    except (AttributeError, OSError, ValueError):
        pass
