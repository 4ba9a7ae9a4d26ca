"""Where the text of the user's code asks for float64: the fallback where the watch did not see
the line that made the model float64 run (a notebook's model made in an earlier cell, a module
imported before the watch began).

Read with ``ast`` from the file or cell that calls the model: ``.double()`` calls, the dtypes
``torch.float64`` / ``torch.double`` / ``np.float64`` (under whatever name the module has), the
strings ``"float64"`` / ``"double"`` given as a dtype, and ``torch.DoubleTensor``. Such a line
is only a candidate (a ``.double()`` may be a tensor's that never reaches the model), so a
finding labels it as found in the source, not seen running. Pure text work: no torch.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

MAX_HITS = 4
_DTYPE_ATTRS = frozenset({"float64", "double", "DoubleTensor"})
_DTYPE_STRINGS = frozenset({"float64", "double", "torch.float64", "torch.double"})
# Calls and keywords where a string names a dtype (``a.astype("float64")``, ``dtype="double"``).
_DTYPE_CALLS = frozenset({"astype", "to", "type", "set_default_dtype"})


@dataclass
class SourceHit:
    line: int
    what: str
    """The expression as written: ``.double()``, ``torch.float64``, ``np.float64``."""
    code: str


def _aliases(tree: ast.AST) -> dict[str, str]:
    """The names the code binds to torch and numpy (``import numpy as np``): name -> module."""
    out = {"torch": "torch", "np": "numpy", "numpy": "numpy"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in ("torch", "numpy"):
                    out[a.asname or a.name] = a.name
    return out


def _string_dtype(node: ast.Call) -> bool:
    """A call that names float64 by a string: ``a.astype("float64")``, ``dtype="double"``."""
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    values = [k.value for k in node.keywords if k.arg == "dtype"]
    if called in _DTYPE_CALLS:
        values += node.args
    return any(isinstance(v, ast.Constant) and v.value in _DTYPE_STRINGS for v in values)


def hit_of(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """What makes ``node`` ask for float64, as written; None where it does not."""
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "double" and not node.args:
            return ".double()"
        return "a float64 dtype string" if _string_dtype(node) else None
    if (
        isinstance(node, ast.Attribute)
        and node.attr in _DTYPE_ATTRS
        and isinstance(node.value, ast.Name)
        and node.value.id in aliases
    ):
        # ``np.DoubleTensor`` is no numpy name; ``torch.double`` and ``np.double`` are float64.
        if node.attr == "DoubleTensor" and aliases[node.value.id] != "torch":
            return None
        return f"{node.value.id}.{node.attr}"
    return None


def float64_nodes(tree: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """Each node of ``tree`` that asks for float64, with what it is as written."""
    aliases = _aliases(tree)
    for node in ast.walk(tree):
        what = hit_of(node, aliases)
        if what is not None:
            yield node, what


def float64_lines(text: str, limit: int = MAX_HITS) -> list[SourceHit]:
    """The lines of ``text`` that ask for float64, first one first (one hit a line)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    lines = text.splitlines()
    found: dict[int, SourceHit] = {}
    for node, what in float64_nodes(tree):
        line = getattr(node, "lineno", 0)
        if line not in found and 0 < line <= len(lines):
            found[line] = SourceHit(line, what, lines[line - 1].strip())
    return [found[k] for k in sorted(found)][:limit]
