"""Logging handlers an earlier cell opened on files, taken off while a cell's re-runs run.

A handler holds its file open from the cell that made it, so the write guard of the re-runs
(``rerun/write_guard``), which sees files opened, never sees its writes: a cell what-if once
appended 12.7 KB of its re-runs' log lines to a 19-byte log of the user's. While the re-runs run,
every handler that writes to a file (a ``FileHandler``, or a ``StreamHandler`` on an open file)
is off its logger; afterwards each is back where it was.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator


def _loggers() -> list[logging.Logger]:
    known = logging.Logger.manager.loggerDict.values()
    return [logging.getLogger(), *(lg for lg in known if isinstance(lg, logging.Logger))]


def writes_a_file(handler: logging.Handler) -> bool:
    if isinstance(handler, logging.FileHandler):
        return True
    stream = getattr(handler, "stream", None)
    if not isinstance(handler, logging.StreamHandler) or stream in (
        sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__,
    ):  # fmt: skip
        return False
    name = getattr(stream, "name", None)
    return isinstance(name, str) and os.path.isfile(name)


def _file_of(handler: logging.Handler) -> str:
    name = getattr(handler, "baseFilename", None) or getattr(handler, "stream", None)
    return str(getattr(name, "name", name))


@contextlib.contextmanager
def file_handlers_detached() -> Iterator[list[str]]:
    """Inside: no logging handler writes to a file; yields the files they write to."""
    taken = [(lg, i, h) for lg in _loggers() for i, h in enumerate(lg.handlers) if writes_a_file(h)]
    for lg, _i, h in taken:
        lg.removeHandler(h)
    try:
        yield sorted({_file_of(h) for _lg, _i, h in taken})
    finally:
        for lg, i, h in taken:
            if h not in lg.handlers:
                lg.handlers.insert(min(i, len(lg.handlers)), h)
