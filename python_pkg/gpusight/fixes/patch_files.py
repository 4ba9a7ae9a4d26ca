"""What a patch was made from, and whether those files are still the same.

Each patch records the sha256 of every file it changes, as the run read it (``Fix.patch_files``
in the report; a ``gpusight-made-from:`` line per file at the top of a diff written by ``gpusight
run --patch``, which ``patch`` and ``git apply`` skip as preamble). A file changed since is a
stale patch: its lines may have moved or changed meaning, so gpusight refuses to verify it
rather than guess.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat

from ..report import Fix, PatchFile
from ..text_report import printable

MADE_FROM = "gpusight-made-from:"
_MADE_FROM_LINE = re.compile(r"^gpusight-made-from: ([0-9a-f]{64}) (.+)$")


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


MAX_SOURCE_BYTES = 16 << 20
"""A source file a patch names, or the patch itself, is read only up to this size."""


def read_text(path: str, limit: int = MAX_SOURCE_BYTES) -> str:
    """A regular file's text as the run reads it (UTF-8, universal newlines); OSError for a
    device, a FIFO or a folder (never opened: ``/dev/zero`` reads forever, a FIFO blocks) and
    for a file over ``limit`` bytes."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, "not a regular file", path)
    if st.st_size > limit:
        raise OSError(errno.EFBIG, f"larger than {limit >> 20} MiB", path)
    with open(path, encoding="utf-8") as f:
        return f.read(limit + 1)


def inside(root: str, path: str) -> str:
    """``path`` (relative, as a diff or a report names it) below ``root``, symbolic links
    followed, or OSError: a patch reads and changes the files of the folder it was made in."""
    from .diff_apply import PatchError, safe_relative

    try:
        rel = safe_relative(path)
    except PatchError as exc:
        raise OSError(errno.EINVAL, str(exc), path) from None
    full = os.path.realpath(os.path.join(root, rel))
    top = os.path.realpath(root)
    if full != top and not full.startswith(top.rstrip(os.sep) + os.sep):
        raise OSError(errno.EINVAL, "a link out of this directory", path)
    return full


def patchable_path(path: str) -> bool:
    """A path a diff can name and ``patch -p1`` applies from where the run started: relative,
    below it, one line of printable text."""
    if not path or os.path.isabs(path) or path.startswith("<"):
        return False
    if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in path):
        return False
    return ".." not in path.replace("\\", "/").split("/")


def with_patch(fix: Fix, patch: str | None, sources: dict[str, str]) -> Fix:
    """``fix`` carrying ``patch`` and the hashes of ``sources`` (diff path -> text it was made
    from); unchanged when there is no patch, or a path no diff should name."""
    if patch and all(patchable_path(p) for p in sources):
        fix.patch = patch
        fix.patch_files = [PatchFile(p, text_sha256(t)) for p, t in sources.items()]
    return fix


def header(files: list[PatchFile], what: str) -> str:
    """The lines written above a diff: what it fixes and what it was made from."""
    lines = [f"gpusight fix: {what}"]
    lines += [f"{MADE_FROM} {f.sha256} {f.path}" for f in files]
    return "\n".join(lines) + "\n"


def made_from(diff_text: str) -> dict[str, str]:
    """The path -> sha256 lines of a diff written by ``gpusight run --patch`` (before its first
    ``---``); empty for a diff without them."""
    out: dict[str, str] = {}
    for line in diff_text.splitlines():
        if line.startswith("--- "):
            break
        m = _MADE_FROM_LINE.match(line)
        if m:
            out[m[2]] = m[1]
    return out


def stale(files: dict[str, str], root: str) -> list[str]:
    """One line per file under ``root`` that is not as the patch was made from it."""
    problems = []
    for path, sha in files.items():
        try:
            now = text_sha256(read_text(inside(root, path)))
        except FileNotFoundError:
            problems.append(f"{path}: no such file here")
            continue
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            problems.append(f"{printable(path)}: cannot be read ({why})")
            continue
        if now != sha:
            problems.append(f"{path} changed since the run that made the patch")
    return problems
