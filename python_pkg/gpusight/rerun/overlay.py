"""A re-run's process tree sees the user's folder through an overlay: whatever it writes there,
by any path and by any means (a child process, sqlite, a native library, a link of the scratch
copy to one of the user's large files), lands in a scratch layer that goes with the run.

The launcher (``LAUNCH``, run as ``python -c LAUNCH lower upper work -- cmd...``) enters a mount
namespace of its own (and a user namespace where it is not root), mounts an overlayfs with the
user's folder below and the scratch layer above on the folder's own path, and then becomes the
command: every process the script starts inherits the namespace, and the mount is gone with
the last of them. Where the kernel does not allow it (no user namespaces, an upper layer on a
file system overlayfs refuses, not Linux, a file system mounted inside the folder), ``over``
says why and the re-runs keep to the scratch copy and its write guard (``sandbox.py``,
``write_guard.py``), refused before they start where the copy links the user's files
(``unguarded``).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .sandbox import Sandbox

OFF_ENV = "GPUSIGHT_NO_OVERLAY"
"""Set (to anything) to keep re-runs off the overlay: the scratch copy and its guard only."""
PROBE_TIMEOUT_S = 20.0

ENTER = r"""
import ctypes, os, sys
def enter(lower, upper, work):
    libc = ctypes.CDLL(None, use_errno=True)
    CLONE_NEWNS, CLONE_NEWUSER, MS_REC, MS_PRIVATE = 0x20000, 0x10000000, 0x4000, 0x40000
    def fail(what):
        err = ctypes.get_errno()
        sys.stderr.write(f"gpusight overlay: {what}: {os.strerror(err) if err else 'failed'}\n")
        sys.exit(97)  # the command never ran
    uid, gid = os.geteuid(), os.getegid()
    here = os.getcwd()
    if libc.unshare(CLONE_NEWNS if uid == 0 else CLONE_NEWNS | CLONE_NEWUSER) != 0:
        fail("no mount namespace")
    if uid != 0:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                           ("gid_map", f"{gid} {gid} 1")):
            try:
                with open(f"/proc/self/{name}", "w") as f:
                    f.write(text)
            except OSError as exc:
                sys.stderr.write(f"gpusight overlay: {name}: {exc}\n")
                sys.exit(97)
    if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        fail("the mounts could not be made private")
    opts = f"lowerdir={lower},upperdir={upper},workdir={work}".encode()
    if libc.mount(b"overlay", lower.encode(), b"overlay", 0, opts) != 0:
        fail("overlayfs refused")
    os.chdir(here)  # a folder below the mount is now seen through it
"""
"""Enters a mount namespace with the overlay mounted (and a user namespace where not root); exits
97 (the command never ran) where the kernel refuses. The calling process must be single-threaded
(``unshare`` of a user namespace asks it)."""

LAUNCH = (
    ENTER
    + r"""
enter(sys.argv[1], sys.argv[2], sys.argv[3])
cmd = sys.argv[5:]
if cmd:
    os.execvp(cmd[0], cmd)
"""
)


@dataclass
class Overlay:
    """Overlays over ``lower`` (the user's folder), their layers in ``holder``: a fresh layer a
    run (``layer``), so that no run sees what an earlier one wrote."""

    lower: str
    holder: str

    def wrap(self, cmd: list[str], upper: str, work: str) -> list[str]:
        """``cmd`` run inside an overlay with the layer ``upper`` (``work``: overlayfs's own)."""
        return wrap(cmd, (self.lower, upper, work))

    @contextlib.contextmanager
    def layer(self) -> Iterator[tuple[str, str]]:
        """A new (upper, work) pair, removed after the run whatever happened."""
        root = tempfile.mkdtemp(prefix="overlay-", dir=self.holder)
        try:
            upper, work = os.path.join(root, "upper"), os.path.join(root, "work")
            os.mkdir(upper)
            os.mkdir(work)
            yield upper, work
        finally:
            remove(root)


Layer = tuple[str, str, str]
"""(lower, upper, work): what ``enter`` mounts."""


@contextlib.contextmanager
def layer_of(overlay: Overlay | str) -> Iterator[Layer | None]:
    """A fresh layer of ``overlay`` for a process that enters it itself (``enter``); None where
    there is no overlay."""
    if isinstance(overlay, str):
        yield None
        return
    with overlay.layer() as (upper, work):
        yield overlay.lower, upper, work


def wrap(cmd: list[str], layer: Layer) -> list[str]:
    """``cmd`` run inside ``layer``'s overlay."""
    return [sys.executable, "-c", LAUNCH, *layer, "--", *cmd]


def enter(layer: Layer) -> None:
    """This process into ``layer``'s overlay, as ``LAUNCH`` enters its command's (it must be
    single-threaded: a forked one is); exits 97 where the kernel refuses."""
    scope: dict[str, object] = {}
    exec(ENTER, scope)  # one text of the steps for both: LAUNCH runs before any import
    scope["enter"](*layer)  # type: ignore[operator]


def unsuitable(lower: str, holder: str) -> str | None:
    """Why an overlay over ``lower`` with its layers in ``holder`` is not tried (None: it is)."""
    if os.environ.get(OFF_ENV):
        return f"{OFF_ENV} is set"
    if not sys.platform.startswith("linux"):
        return "overlays are a Linux feature"
    real, box = os.path.realpath(lower), os.path.realpath(holder)
    if real == os.path.sep:
        return "the folder is the file system's root"
    if (box + os.sep).startswith(real + os.sep):
        return "the scratch folder lies inside the folder it would cover"
    inner = mounts_below(real)
    if inner:
        # An overlay shows one file system: what is mounted below would look empty in it.
        return f"a file system is mounted inside the folder ({inner[0]})"
    return None


def mounts_below(root: str, table: str = "/proc/self/mountinfo") -> list[str]:
    """The mount points strictly inside ``root`` (``mountinfo``'s fifth field, octal escapes
    such as ``\\040`` for a space undone)."""
    try:
        with open(table, encoding="utf-8", errors="replace") as f:
            rows = f.read().splitlines()
    except OSError:
        return []
    prefix = root.rstrip(os.sep) + os.sep
    found = []
    for row in rows:
        parts = row.split(" ")
        if len(parts) > 4:
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), parts[4])
            if point.startswith(prefix):
                found.append(point)
    return sorted(found)


def over(lower: str, holder: str) -> Overlay | str:
    """Overlays over ``lower`` after a trial mount with a layer in ``holder``, or why none."""
    why = unsuitable(lower, holder)
    if why is not None:
        return why
    made = Overlay(os.path.abspath(lower), holder)
    try:
        with made.layer() as (upper, work):
            done = subprocess.run(
                made.wrap([], upper, work),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=PROBE_TIMEOUT_S,
                check=False,
            )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the overlay's trial failed: {type(exc).__name__}: {exc}"
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        return said[-1].removeprefix("gpusight overlay: ") if said else "the overlay failed"
    return made


def remove(path: str) -> None:
    """``path`` and all below it; overlayfs leaves its work folder unreadable (mode 000)."""
    for dirpath, dirnames, _files in os.walk(path):  # top-down: opened before it descends
        for d in dirnames:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(dirpath, d), 0o700)
    shutil.rmtree(path, ignore_errors=True)


ALLOW_FLAG = "--allow-linked-files"


def unguarded(box: Sandbox, overlay: Overlay | str) -> str | None:
    """Why re-runs in ``box`` could change the user's files and must not start unless asked
    (``ALLOW_FLAG``): no overlay, and files the copy reaches through links, which a native
    writer (sqlite, a C extension, a child process) writes past the write guard."""
    linked = box.data_links()
    if not isinstance(overlay, str) or not linked:
        return None
    shown = ", ".join(linked[:3]) + (f" and {len(linked) - 3} more" if len(linked) > 3 else "")
    return (
        f"no overlay can be made here ({overlay}), and the scratch copy reaches {shown} "
        "through links (too large or too many to copy): Python's own writes to them are "
        "guarded, but a child process, sqlite or another native writer would change your files. "
        f"Pass {ALLOW_FLAG} to re-run anyway, or run where a mount namespace is allowed (Linux, "
        "as root or with user namespaces)"
    )
