"""Apply a unified diff made by gpusight (``fixes/patch.py``) to file texts, in memory.

Strict: every hunk's old lines must be found exactly where the hunk says (no offset, no fuzz),
since a patch is applied only after its files were checked unchanged since the run
(``patch_files.py``); a hunk that does not match means the patch is not for this file. Paths
must stay below the root they are relative to (no absolute path, no ``..``): a diff is input
from a file, and applying it must not reach outside the user's tree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(ValueError):
    """The diff cannot be applied; the message says which file and why."""


@dataclass
class Hunk:
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    lines: list[str] = field(default_factory=list)
    """Each with its marker (`` ``, ``-``, ``+``) and its newline, as in the diff."""


@dataclass
class FileDiff:
    path: str
    """Relative to the root the diff was made from (``b/`` stripped)."""
    hunks: list[Hunk] = field(default_factory=list)


def _strip_prefix(name: str) -> str:
    name = name.split("\t", 1)[0].rstrip("\n")
    return name[2:] if name.startswith(("a/", "b/")) else name


def safe_relative(path: str) -> str:
    """``path`` if it names a file below the root, else PatchError."""
    p = PurePosixPath(path)
    if not path or p.is_absolute() or ".." in p.parts or "\\" in path or "\0" in path:
        raise PatchError(f"the diff names {path!r}: only paths below this directory are patched")
    return str(p)


def parse(text: str) -> list[FileDiff]:
    """The files and hunks of a unified diff; lines before the first ``---`` are ignored."""
    lines = text.splitlines(keepends=True)
    files: list[FileDiff] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            files.append(FileDiff(safe_relative(_strip_prefix(lines[i + 1][4:]))))
            i += 2
            continue
        m = _HUNK.match(line)
        if m and files:
            hunk = Hunk(int(m[1]), int(m[2] or 1), int(m[3]), int(m[4] or 1))
            old, new = hunk.old_len, hunk.new_len
            i += 1
            while (old > 0 or new > 0) and i < len(lines):
                body = lines[i]
                kind = body[:1]
                if kind == "\\":  # "\ No newline at end of file": the line before has none
                    if hunk.lines:
                        hunk.lines[-1] = hunk.lines[-1].rstrip("\n")
                    i += 1
                    continue
                if kind not in (" ", "-", "+") and body not in ("\n",):
                    raise PatchError(f"{files[-1].path}: a hunk ends early (line {i + 1})")
                if body == "\n":  # an empty context line whose space was stripped
                    body = " \n"
                    kind = " "
                hunk.lines.append(body)
                old -= kind in (" ", "-")
                new -= kind in (" ", "+")
                i += 1
            if i < len(lines) and lines[i].startswith("\\"):
                if hunk.lines:
                    hunk.lines[-1] = hunk.lines[-1].rstrip("\n")
                i += 1
            if old or new:
                raise PatchError(f"{files[-1].path}: a hunk is shorter than its header says")
            files[-1].hunks.append(hunk)
            continue
        i += 1
    if not files or not any(f.hunks for f in files):
        raise PatchError("no unified diff in it (expected --- a/FILE, +++ b/FILE, @@ hunks)")
    return files


def apply(text: str, diff: FileDiff) -> str:
    """``text`` with ``diff``'s hunks applied, or PatchError naming the first that differs."""
    old = text.splitlines(keepends=True)
    out: list[str] = []
    at = 0  # lines of ``old`` consumed
    for n, h in enumerate(diff.hunks, 1):
        start = h.old_start - 1 if h.old_len else h.old_start
        want = [ln[1:] for ln in h.lines if ln[:1] in (" ", "-")]
        if start < at or old[start : start + len(want)] != want:
            raise PatchError(
                f"{diff.path}: hunk {n} (line {h.old_start}) does not match the file: the patch "
                "was made from other lines"
            )
        out += old[at:start]
        out += [ln[1:] for ln in h.lines if ln[:1] in (" ", "+")]
        at = start + len(want)
    out += old[at:]
    return "".join(out)
