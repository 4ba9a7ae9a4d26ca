"""Files an earlier cell left open for writing in the user's folder, pointed at scratch copies
while a cell's re-runs run.

A file object an earlier cell opened (``f = open("metrics.csv", "a")``), or a library's
descriptor (sqlite's, a native logger's), writes through a descriptor the re-runs' write guard
never sees (it sees files being opened). For the re-runs, each descriptor of the kernel open for
writing on a file inside the folder is pointed (``dup2``) at a copy of that file in the scratch
folder, at the same offset; afterwards it points at the user's file again, at its own offset.
Python's buffered files are flushed on both sides of the swap: nothing written before lands in
the copy, nothing the re-runs wrote lands in the user's file. Linux only (``/proc/self/fd``).
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import io
import os
import shutil
from collections.abc import Iterator

COPY_MAX = 64 << 20
"""A larger file's scratch stand-in starts empty (the re-runs' writes still land there)."""


def _flush_files() -> None:
    """Every open Python file's buffer, written to its descriptor now."""
    for obj in gc.get_objects():
        if isinstance(obj, (io.TextIOWrapper, io.BufferedWriter, io.BufferedRandom)):
            with contextlib.suppress(Exception):
                if not obj.closed:
                    obj.flush()


def writable_in(root: str) -> list[tuple[int, str]]:
    """(descriptor, file) for each descriptor of this process open for writing on a regular
    file inside ``root``, outside its dot-folders."""
    base = os.path.realpath(root) + os.sep
    found = []
    try:
        fds = [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        return []
    for fd in fds:
        try:
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if flags & os.O_ACCMODE == os.O_RDONLY or not path.startswith(base):
            continue
        # Tooling's own, in a folder started at the home directory: IPython's history
        # database, Jupyter's runtime files; a user's data does not live in dot-folders.
        if any(part.startswith(".") for part in path[len(base) :].split(os.sep)[:-1]):
            continue
        if os.path.isfile(path):
            found.append((fd, path))
    return found


@contextlib.contextmanager
def files_redirected(root: str, scratch: str) -> Iterator[list[str]]:
    """Inside: every descriptor open for writing on a file in ``root`` writes to a copy of it in
    ``scratch`` (made there); yields the user's files so covered."""
    found = writable_in(root)
    if not found:  # as a rule: then no walk over every object for files to flush
        yield []
        return
    _flush_files()
    swapped: list[tuple[int, int]] = []  # (descriptor, a duplicate of the user's file's)
    covered: set[str] = set()
    try:
        os.makedirs(scratch, exist_ok=True)
        for fd, path in found:
            stand_in = os.path.join(scratch, f"open-{fd}-{os.path.basename(path)}")
            if os.path.getsize(path) <= COPY_MAX:
                shutil.copyfile(path, stand_in)
            flags = fcntl.fcntl(fd, fcntl.F_GETFL) & (os.O_ACCMODE | os.O_APPEND)
            new = os.open(stand_in, flags | os.O_CREAT, 0o600)
            os.lseek(new, os.lseek(fd, 0, os.SEEK_CUR), os.SEEK_SET)
            saved = os.dup(fd)
            os.dup2(new, fd, inheritable=os.get_inheritable(fd))
            os.close(new)
            swapped.append((fd, saved))
            covered.add(path)
        yield sorted(covered)
    finally:
        _flush_files()
        for fd, saved in reversed(swapped):
            os.dup2(saved, fd, inheritable=os.get_inheritable(fd))
            os.close(saved)
