"""Where a command will write: checked before the work, so a typo costs no benchmark run and
never costs a file of the user's (the script, a report it reads, a source file, a file that is
not gpusight's to replace)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

Kind = Literal["report", "html", "patch"]
# Files gpusight never writes over, whatever the option says: code and the configs beside it.
SOURCE_SUFFIXES = frozenset(
    ".py .pyw .pyi .pyx .pxd .ipynb .c .cc .cpp .cxx .h .hpp .cu .cuh .rs .go .java .js .mjs "
    ".ts .tsx .sh .bash .zsh .toml .cfg .ini .yaml .yml .lock .pt .pth .ckpt .safetensors".split()
)
_MARKS: dict[Kind, tuple[bytes, ...]] = {
    "report": (b'"schema_version"',),
    "html": (b"gpusight",),
    "patch": (b"gpusight-made-from:", b"--- ", b"diff --git"),
}
_READ = 65536
"""How much of an existing file is read to see whether it is one gpusight wrote."""


def output_problem(
    path: str | Path, kind: Kind | None = None, protect: Iterable[str | Path | None] = ()
) -> str | None:
    """Why ``path`` cannot be written (one line), or None. The file itself is not created.

    ``protect``: files this command reads (the script, input reports, a patch), never written
    over. ``kind``: what gets written; an existing file that is not of that kind is left alone.
    """
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        return f"cannot write {path}: it is a directory"
    if not parent.is_dir():
        return f"cannot write {path}: no such directory {parent}"
    for other in protect:
        if other is not None and _same(p, Path(other)):
            return f"refusing to write over {path}: this command reads it"
    if p.suffix.lower() in SOURCE_SUFFIXES:
        return f"refusing to write over {path}: a {p.suffix} file is code or data, not an output"
    if not os.access(parent, os.W_OK):
        return f"cannot write {path}: the directory {parent} is not writable"
    if p.exists() and not os.access(p, os.W_OK):
        return f"cannot write {path}: the file is not writable"
    if kind is not None and p.exists() and not _written_by_us(p, kind):
        return (
            f"refusing to write over {path}: it exists and is not a gpusight {kind} "
            "(give another path, or remove it first)"
        )
    return None


def outputs_problem(
    outputs: Iterable[tuple[str | Path | None, Kind]], protect: Iterable[str | Path | None] = ()
) -> str | None:
    """``output_problem`` for each output given, which must also differ from each other."""
    given = [(Path(o), k) for o, k in outputs if o]
    for i, (path, kind) in enumerate(given):
        if any(_same(path, other) for other, _ in given[:i]):
            return f"cannot write two outputs to one file: {path}"
        problem = output_problem(path, kind, protect)
        if problem:
            return problem
    return None


def _same(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return os.path.realpath(a) == os.path.realpath(b)


def _written_by_us(p: Path, kind: Kind) -> bool:
    """An empty file, or one whose start holds what gpusight writes for ``kind``; never a
    special file (a FIFO would block the read)."""
    if not p.is_file():
        return False
    try:
        with open(p, "rb") as f:
            head = f.read(_READ)
    except OSError:
        return False
    return not head.strip() or any(mark in head for mark in _MARKS[kind])
