"""What a cell's re-runs write to the user's folder past Python's ``open`` (which the write guard
sees): processes the cell starts, and sqlite.

While the re-runs run, every process started through ``subprocess`` (or ``os.system``, sent
through it) from the kernel's thread runs inside an overlay of the folder (``rerun/overlay.py``:
a layer of its own, gone after the re-runs), so what it writes there by any path lands in the
layer; and ``sqlite3.connect`` to a database inside the folder opens the scratch copy's file
instead (made the copy's own first, where the copy only links to it). Not covered:
``os.spawn*`` and ``os.fork`` + ``exec``, a ``connect`` imported by name before the re-runs,
other native writers in the kernel.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Iterator
from threading import get_ident
from typing import Any

from ..rerun import overlay
from ..rerun.sandbox import Sandbox


@contextlib.contextmanager
def children_overlaid(made: overlay.Overlay | str, holder: str) -> Iterator[str | None]:
    """Inside: processes started through ``subprocess`` see the folder through ``made`` (made
    once for a what-if: ``overlay.over``), their layers in ``holder``; yields why they do not
    (``made`` where it says why: None where they do)."""
    if isinstance(made, str):
        yield made
        return
    orig = subprocess.Popen._execute_child  # type: ignore[attr-defined]
    sig = inspect.signature(orig)
    tid = get_ident()

    def _execute_child(popen: Any, *args: Any, **kwargs: Any) -> Any:
        if get_ident() != tid:
            return orig(popen, *args, **kwargs)
        bound = sig.bind(popen, *args, **kwargs)
        p = bound.arguments
        argv = p["args"]
        argv = [argv] if isinstance(argv, (str, bytes, os.PathLike)) else list(argv)
        if p["shell"]:
            argv = [p["executable"] or "/bin/sh", "-c", *argv]
        elif p["executable"]:
            argv = [p["executable"], *argv[1:]]
        upper = tempfile.mkdtemp(prefix="child-", dir=holder)
        os.mkdir(os.path.join(upper, "upper"))
        os.mkdir(os.path.join(upper, "work"))
        p["args"] = made.wrap(
            [os.fsdecode(a) for a in argv],
            os.path.join(upper, "upper"),
            os.path.join(upper, "work"),
        )
        p["shell"], p["executable"] = False, None
        return orig(*bound.args, **bound.kwargs)

    orig_system = os.system

    def system(command: Any) -> int:
        """``os.system`` through ``subprocess`` (so through the overlay), its status encoded
        as ``os.system`` returns it: the exit code in the high byte, a signal in the low."""
        if get_ident() != tid:
            return orig_system(command)
        code = subprocess.call(["/bin/sh", "-c", os.fsdecode(command)])
        return code << 8 if code >= 0 else -code

    subprocess.Popen._execute_child = _execute_child  # type: ignore[attr-defined]
    os.system = system
    try:
        yield None
    finally:
        subprocess.Popen._execute_child = orig  # type: ignore[attr-defined]
        os.system = orig_system
        for name in os.listdir(holder):
            if name.startswith("child-"):
                overlay.remove(os.path.join(holder, name))


@contextlib.contextmanager
def sqlite_in_copy(box: Sandbox) -> Iterator[None]:
    """Inside: ``sqlite3.connect`` to a database in the user's folder opens the copy's."""
    orig = sqlite3.connect
    base = os.path.realpath(box.root) + os.sep

    def connect(database: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(database, (str, os.PathLike)) and not kwargs.get("uri"):
            path = os.path.realpath(os.fsdecode(database))
            if path.startswith(base):
                database = _own_copy(box, os.path.relpath(path, base[:-1]))
        return orig(database, *args, **kwargs)

    sqlite3.connect = connect  # type: ignore[assignment]
    try:
        yield
    finally:
        sqlite3.connect = orig


def _own_copy(box: Sandbox, rel: str) -> str:
    """The copy's file for ``rel``, a file of the copy's own (not a link to the user's)."""
    target = box.inside(rel)
    if os.path.islink(target):
        real = os.path.realpath(target)
        os.unlink(target)
        if os.path.isfile(real):
            shutil.copy2(real, target)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    return target
