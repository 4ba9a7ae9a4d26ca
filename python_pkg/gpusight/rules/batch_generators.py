"""A line of a generator function of the user's that the step's time is spent in: the loop
draws its batches from it (``x, y = next(gen)``, ``for x, y in batches():``), so its time is
the input pipeline's, though no DataLoader's wait measures it. Pure ``ast`` on the file's
text."""

from __future__ import annotations

import ast
import functools

from .host_line_loops import parsed


@functools.lru_cache(maxsize=8)
def _generators(text: str) -> tuple[tuple[int, int, str], ...]:
    """Each generator function's body's first and last line and its name (the innermost one
    holds a line: a generator defined in another function is its own)."""
    tree = parsed(text)
    if tree is None:
        return ()
    out = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if _yields(fn) and fn.body:
            out.append((fn.body[0].lineno, fn.end_lineno or fn.lineno, fn.name))
    return tuple(sorted(out, key=lambda g: g[1] - g[0]))  # the innermost (shortest) first


def _yields(fn: ast.AST) -> bool:
    """A ``yield`` of the function's own, not of a function defined inside it."""
    for child in ast.iter_child_nodes(fn):
        if isinstance(child, ast.Yield | ast.YieldFrom):
            return True
        if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            if _yields(child):
                return True
    return False


def generator_of(text: str | None, line: int) -> str | None:
    """The name of the generator function whose body holds ``line``; None where none does."""
    if text is None:
        return None
    return next((name for a, b, name in _generators(text) if a <= line <= b), None)
