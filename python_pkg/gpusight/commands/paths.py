"""Where a command will write: checked before the work, so a typo costs no benchmark run."""

from __future__ import annotations

import os
from pathlib import Path


def output_problem(path: str | Path) -> str | None:
    """Why ``path`` cannot be written (one line), or None. The file itself is not created."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        return f"cannot write {path}: it is a directory"
    if not parent.is_dir():
        return f"cannot write {path}: no such directory {parent}"
    if not os.access(parent, os.W_OK):
        return f"cannot write {path}: the directory {parent} is not writable"
    if p.exists() and not os.access(p, os.W_OK):
        return f"cannot write {path}: the file is not writable"
    return None
