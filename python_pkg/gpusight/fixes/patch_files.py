"""What a patch was made from, and whether those files are still the same.

Each patch records the sha256 of every file it changes, as the run read it (``Fix.patch_files``
in the report; a ``gpusight-made-from:`` line per file at the top of a diff written by ``gpusight
run --patch``, which ``patch`` and ``git apply`` skip as preamble). A file changed since is a
stale patch: its lines may have moved or changed meaning, so gpusight refuses to verify it
rather than guess.
"""

from __future__ import annotations

import hashlib
import os
import re

from ..report import Fix, PatchFile

MADE_FROM = "gpusight-made-from:"
_MADE_FROM_LINE = re.compile(r"^gpusight-made-from: ([0-9a-f]{64}) (.+)$")


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def read_text(path: str) -> str:
    """A file's text as the run reads it (UTF-8, universal newlines)."""
    with open(path, encoding="utf-8") as f:
        return f.read()


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
        full = os.path.join(root, path)
        try:
            now = text_sha256(read_text(full))
        except FileNotFoundError:
            problems.append(f"{path}: no such file here")
            continue
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{path}: cannot be read ({exc})")
            continue
        if now != sha:
            problems.append(f"{path} changed since the run that made the patch")
    return problems
