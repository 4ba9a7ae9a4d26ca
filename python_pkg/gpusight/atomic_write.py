"""Every file gpusight writes is written whole or not at all.

The bytes go to a temporary file in the target's folder (same file system), are flushed to disk,
and the temporary file is renamed over the target: a reader sees the old file or the new one,
two writers leave one of theirs, and a write that fails half-way (disk full, Ctrl-C) leaves the
old file as it was.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_bytes(path: str | Path, data: bytes) -> Path:
    p = Path(path)
    folder = p.parent if str(p.parent) else Path(".")
    mode = _mode_for(p)
    # The temporary name keeps a short start of the target's: a legal 255-byte name plus the
    # random part and ".tmp" would be too long for the file system.
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{p.name[:64]}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _sync_folder(folder)
    return p


def write_text(path: str | Path, text: str, errors: str = "strict") -> Path:
    return write_bytes(path, text.encode("utf-8", errors))


def _mode_for(p: Path) -> int:
    """The file's own permissions where it exists; else what ``open()`` would give it."""
    try:
        return os.stat(p).st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _sync_folder(folder: Path) -> None:
    """The rename itself on disk too (POSIX); where a folder cannot be opened, nothing."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
