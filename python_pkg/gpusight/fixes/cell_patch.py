"""A fix as a change to a notebook cell: the DataLoader call in the cell that built it, changed.

A cell is run as IPython's transform of its text (magics become calls, line for line), so the
call is found and changed in that code (``patch.set_call_keywords``); the changed lines go back
into the cell's own text only where they were the same there, which keeps the cell's magics
and its ``%%gpusight`` line as they are. Besides the changed cell, the fix carries code that runs
as it is in the user's kernel: the cell's statement that builds the loader, changed, with the
user's own names (``loader = DataLoader(SlowDataset(), ..., num_workers=2)``), never a template
with names the user never defined. Pure text work: no torch, no IPython.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ..report import CellPatch, Fix
from .patch import find_call, set_call_keywords, unified_diff


@dataclass
class CellSource:
    """A notebook cell as the kernel ran it, and the line of a DataLoader call in it."""

    source: str
    """The cell's text as in the notebook (IPython's history keeps it, trailing newlines cut)."""
    compiled: str
    """The Python that ran: IPython's transform of the cell, or of the body below its magic."""
    line: int
    """A line of the call, in ``compiled``."""
    offset: int = 0
    """Lines of ``source`` above ``compiled``'s first (1 below a ``%%gpusight`` line)."""
    execution_count: int | None = None
    torch_alias: str | None = None
    """The kernel's name for torch (a change that needs it uses that name, imports nothing)."""

    @property
    def label(self) -> str:
        return f"cell [{self.execution_count}]" if self.execution_count is not None else "cell"


# A top-level statement of one of these kinds can be run again on its own: it (re)binds names.
_RERUNNABLE = (
    ast.Assign,
    ast.AnnAssign,
    ast.Expr,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
)


def _strip(line: str) -> str:
    return line.rstrip("\r\n")


def _changed_span(old: list[str], new: list[str]) -> tuple[int, int, int]:
    """(first changed line, end in ``old``, end in ``new``), 0-based, ends exclusive."""
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while (
        tail < min(len(old), len(new)) - head
        and old[len(old) - 1 - tail] == new[len(new) - 1 - tail]
    ):
        tail += 1
    return head, len(old) - tail, len(new) - tail


def statement_at(code: str, line: int) -> str | None:
    """The top-level statement of ``code`` that holds ``line``, if it can be run on its own."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    lines = code.splitlines()
    for stmt in tree.body:
        first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))])
        last = stmt.end_lineno or stmt.lineno
        if first <= line <= last:
            if not isinstance(stmt, _RERUNNABLE):
                return None  # a loop or a block: running it again would do far more
            return "\n".join(lines[first - 1 : last]) + "\n"
    return None


@dataclass
class CellFix:
    patch: CellPatch
    code: str | None
    """Code that runs as it is in the user's kernel (the changed statement), where there is one."""


def cell_fix(cell: CellSource, values: dict[str, object]) -> CellFix | None:
    """The cell with ``values`` set in its loader call, or None when that cannot be done safely
    (no such call, nothing changes, or the cell's text differs from what ran on those lines)."""
    new_compiled = set_call_keywords(
        cell.compiled, cell.line, {k: repr(v) for k, v in values.items()}
    )
    if new_compiled is None:
        return None
    got = _patched_cell(cell, new_compiled)
    if got is None:
        return None
    patched = got[0]
    call = find_call(ast.parse(new_compiled), cell.line)
    if call is None:
        return None
    patch = CellPatch(
        source=cell.source,
        patched=patched,
        line=cell.offset + call.lineno,
        end_line=cell.offset + (call.end_lineno or call.lineno),
        execution_count=cell.execution_count,
        label=cell.label,
    )
    stmt = statement_at(new_compiled, call.lineno)
    changed = ", ".join(f"{k}={v!r}" for k, v in values.items())
    code = (
        None
        if stmt is None
        else f"# Your DataLoader from {cell.label}, rebuilt with {changed}.\n"
        "# Run this, then your training cell again (or apply the change to that cell).\n"
        f"{stmt}"
    )
    return CellFix(patch, code)


def _patched_cell(cell: CellSource, new_compiled: str) -> tuple[str, int, int] | None:
    """The cell's text with the lines that changed between the code that ran and
    ``new_compiled`` replaced, with the changed span's first line and its end in
    ``new_compiled`` (0-based); None when nothing changed or the cell's text on those lines is
    not what ran (edited since, or a magic)."""
    if new_compiled == cell.compiled:
        return None
    old = cell.compiled.splitlines(keepends=True)
    new = new_compiled.splitlines(keepends=True)
    head, old_end, new_end = _changed_span(old, new)
    src = cell.source.splitlines(keepends=True)
    a, b = cell.offset + head, cell.offset + old_end
    if b > len(src) or [_strip(x) for x in src[a:b]] != [_strip(x) for x in old[head:old_end]]:
        return None  # the cell's text is not what ran there
    middle = new[head:new_end]
    if middle and b == len(src) and not src[-1].endswith("\n"):
        middle = [*middle[:-1], _strip(middle[-1])]  # the cell's last line has no newline
    return "".join([*src[:a], *middle, *src[b:]]), head, new_end


def with_statement_cell_fix(f: Fix, cell: CellSource, new_compiled: str | None) -> bool:
    """Put a statement's change in ``f`` as a change to its cell (``new_compiled``: the code
    that ran, changed, e.g. by ``autocast_text``); False, ``f`` untouched, where it cannot be
    mapped back into the cell safely. The fix's code stays the snippet: the change is a
    block (a ``with``), which runs only as part of the cell."""
    if new_compiled is None:
        return False
    got = _patched_cell(cell, new_compiled)
    if got is None:
        return False
    patched, head, new_end = got
    patch = CellPatch(
        source=cell.source,
        patched=patched,
        line=cell.offset + head + 1,
        end_line=cell.offset + max(head + 1, new_end),
        execution_count=cell.execution_count,
        label=cell.label,
    )
    f.patch = cell_diff(patch)
    f.cell = patch
    return True


def cell_diff(patch: CellPatch) -> str:
    """The cell's change as a unified diff, its lines numbered as in the cell."""
    return unified_diff(patch.source + "\n", patch.patched + "\n", patch.label or "cell")


def with_cell_fix(f: Fix, cell: CellSource, values: dict[str, object]) -> bool:
    """Put the cell's change in ``f`` (its diff, the cell, and the user's own statement, changed,
    as the code to run); False, ``f`` untouched, where the cell cannot be changed safely."""
    changed = cell_fix(cell, values)
    if changed is None:
        return False
    f.patch = cell_diff(changed.patch)
    f.cell = changed.patch
    if changed.code is not None:
        f.code, f.language = changed.code, "python"
    return True
