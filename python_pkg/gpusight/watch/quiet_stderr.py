"""Keep the profiler's own ``USDT: ... profiler_start/stop`` lines out of the user's output.

torch's profiler (kineto's SyncActivityProfilerHandler) writes them straight to file descriptor 2,
past ``sys.stderr``, so in Jupyter they land above the report as red stderr. Around the profiler's
start and stop, fd 2 goes to a temporary file; afterwards it is restored and every other line
written meanwhile is passed on unchanged.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

PREFIX = b"USDT:"


@contextmanager
def without_usdt_lines(fd: int = 2) -> Iterator[None]:
    """Drop lines starting with ``USDT:`` that reach ``fd`` inside the block; keep the rest."""
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
                line for line in tmp.read().splitlines(keepends=True) if not line.startswith(PREFIX)
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
