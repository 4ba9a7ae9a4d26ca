"""Results written to ``--out``, with the command line that made them and the git commit beside
them: every benchmark that writes to a folder appends to ``OUT/COMMAND.txt``

    # 2026-12-05T10:11:12+00:00, commit 6f71c5f (with uncommitted changes), python 3.12.3
    python3 benchmarks/watch_cost.py --method parts --out OUT

once per process (a folder several steps write to lists each of them; a hand-written
COMMAND.txt there is kept, the lines added after it)."""

from __future__ import annotations

import datetime as _dt
import functools
import json
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from .paths import ROOT

_NOTED: set[Path] = set()


def command_line() -> str:
    """This process's command line, as it was typed (the interpreter by its name)."""
    return shlex.join([Path(sys.executable).name, *sys.argv])


TREE_COMMIT = ".tree-commit"
"""In a copy of the tree made with ``git archive`` (carried to the device), the commit it was
made from, written there beside it: the copy has no checkout of its own."""


@functools.lru_cache(maxsize=1)
def git_commit(root: Path = ROOT) -> str | None:
    """The checkout's commit (short), ``+dirty`` when tracked files differ from it; in a copy of
    the tree, the commit its ``.tree-commit`` names, else None. A copy inside another checkout
    (``.gpu-tree`` in the device's copy of the working tree) is not that checkout's commit."""
    try:
        top = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--show-toplevel", "--short", "HEAD"],
            capture_output=True, text=True, timeout=20,
        )  # fmt: skip
        lines = top.stdout.split()
        if top.returncode != 0 or len(lines) != 2 or Path(lines[0]).resolve() != root.resolve():
            return _tree_commit(root)
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=20,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return _tree_commit(root)
    return lines[1] + ("+dirty" if dirty else "")


def _tree_commit(root: Path) -> str | None:
    try:
        return (root / TREE_COMMIT).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def meta() -> dict[str, Any]:
    """The command line, the commit, the time and the Python that made a result."""
    return {
        "command": command_line(),
        "commit": git_commit(),
        "date": now(),
        "python": platform.python_version(),
    }


def note(out: str | Path | None) -> None:
    """Append this process's command line, commit and time to ``OUT/COMMAND.txt`` (once per
    folder; nothing without a folder)."""
    if not out:
        return
    folder = Path(out).resolve()
    if folder in _NOTED:
        return
    _NOTED.add(folder)
    folder.mkdir(parents=True, exist_ok=True)
    commit = git_commit()
    where = "no git checkout" if commit is None else f"commit {commit}"
    where = where.replace("+dirty", " (with uncommitted changes)")
    with (folder / "COMMAND.txt").open("a", encoding="utf-8") as f:
        f.write(f"# {now()}, {where}, python {platform.python_version()}\n{command_line()}\n")


def write_results(
    out: str | Path | None, name: str, result: Any, text: str | None = None, table: str = ""
) -> None:
    """``OUT/NAME.json`` and, with ``text``, the printed table as ``OUT/TABLE`` (or NAME.txt);
    the command beside them (``note``). Nothing without ``out``."""
    if not out:
        return
    folder = Path(out)
    note(folder)
    (folder / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n", "utf-8")
    if text is not None:
        (folder / (table or f"{name}.txt")).write_text(text + "\n", "utf-8")


class Results:
    """Results by name, ``OUT/JSON`` rewritten after each one (a run stopped at its limit keeps
    every one that ended), the table beside it at the end."""

    def __init__(
        self, out: str | Path, json_name: str, table_name: str, indent: int = 2, **dump: Any
    ) -> None:
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        note(self.out)
        self.json_path = self.out / json_name
        self.table_path = self.out / table_name
        self.indent = indent
        self.dump = dump
        self.items: dict[str, Any] = {}

    def add(self, name: str, value: Any) -> Any:
        self.items[name] = value
        self.save()
        return value

    def save(self) -> None:
        self.json_path.write_text(json.dumps(self.items, indent=self.indent, **self.dump))

    def write_table(self, text: str) -> None:
        self.table_path.write_text(text + "\n")

    def finish(self, text: str) -> None:
        """The table written and printed last."""
        self.write_table(text)
        print("\n" + text, flush=True)


def write_markdown(name: str, title: str, about: str, lines: list[str]) -> str:
    """``benchmarks/results/NAME``: a CPU benchmark's table (``lines``) under its title, after
    this command line and what it measured (``about`` goes on from the command's sentence);
    the table, printed too."""
    from .paths import RESULTS

    text = "\n".join(lines)
    print(text)
    (RESULTS / name).write_text(f"# {title}\n\n`{command_line()}`, {about}\n\n{text}\n")
    return text
