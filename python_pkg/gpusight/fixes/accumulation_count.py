"""A training loop's own gradient-accumulation count: the name its optimizer step waits on
(``if step % accum: continue``, ``if (i + 1) % accum_steps == 0: optimizer.step()``, a
``for micro in range(grad_accum):`` loop of micro-batches inside the step loop), where the file
sets that name once to a number (``accum = 8``, ``gradient_accumulation_steps = 5 * 8``), and
the same file with that number changed.

Pure text work with ``ast``: no imports of the user's code.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from dataclasses import dataclass

from .statement_thinning import step_loop

_OPS: dict[type[ast.operator], Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
}


@dataclass(frozen=True)
class Count:
    """Where the file sets the loop's accumulation count."""

    name: str
    line: int
    code: str
    """The assignment's line as the file has it."""


def _number(node: ast.expr) -> int | None:
    """An integer the expression is, made of integer literals alone (None: anything else)."""
    if isinstance(node, ast.Constant):
        v = node.value
        return v if isinstance(v, int) and not isinstance(v, bool) else None
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        a, b = _number(node.left), _number(node.right)
        if a is None or b is None or (isinstance(node.op, ast.FloorDiv) and b == 0):
            return None
        return _OPS[type(node.op)](a, b)
    return None


def _waits(node: ast.If) -> bool:
    """Whether the condition holds back the optimizer's step: its branch steps, or skips the
    rest of the loop's body (``continue``)."""
    body = [*node.body, *node.orelse]
    if len(node.body) == 1 and isinstance(node.body[0], ast.Continue):
        return True
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "step"
        for stmt in body
        for n in ast.walk(stmt)
    )


def _gating_names(tree: ast.Module, call_line: int) -> set[str]:
    """Names the optimizer's step waits on around the model's call at ``call_line``: the
    divisor of a ``%`` in a condition of the loop that steps, and the ``range`` of a loop of
    micro-batches between that loop and the call."""
    loop = step_loop(tree, call_line)
    if loop is None:
        return set()
    names = set()
    for node in ast.walk(loop):
        if isinstance(node, ast.If) and _waits(node):
            for part in ast.walk(node.test):
                if (
                    isinstance(part, ast.BinOp)
                    and isinstance(part.op, ast.Mod)
                    and isinstance(part.right, ast.Name)
                ):
                    names.add(part.right.id)
    for micro in ast.walk(loop):
        if not isinstance(micro, ast.For) or micro is loop:
            continue
        if not micro.lineno <= call_line <= (micro.end_lineno or micro.lineno):
            continue
        it = micro.iter
        if (
            isinstance(it, ast.Call)
            and isinstance(it.func, ast.Name)
            and it.func.id == "range"
            and len(it.args) == 1
            and isinstance(it.args[0], ast.Name)
        ):
            names.add(it.args[0].id)
    return names


def _settings(tree: ast.Module, name: str) -> list[ast.Assign | ast.AnnAssign]:
    """Each statement of the file that sets ``name`` alone to a value."""
    out: list[ast.Assign | ast.AnnAssign] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target = node.target
        else:
            continue
        if isinstance(target, ast.Name) and target.id == name:
            out.append(node)
    return out


def _parameter(tree: ast.Module, call_line: int, name: str) -> bool:
    """Whether a function around the call takes ``name``: its caller sets the count."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
            node.lineno <= call_line <= (node.end_lineno or node.lineno)
        ):
            a = node.args
            if name in {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]}:
                return True
    return False


def _at(tree: ast.Module, name: str, k: int) -> ast.Assign | ast.AnnAssign | None:
    """The one statement that sets ``name`` to the number ``k`` (None: none, or several)."""
    hits = [s for s in _settings(tree, name) if s.value is not None and _number(s.value) == k]
    return hits[0] if len(hits) == 1 else None


def find(source: str, call_line: int, k: int) -> Count | None:
    """Where ``source`` sets to ``k`` the count its step loop around ``call_line`` accumulates
    over; None where no such name is set once to that number in the file."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    lines = source.splitlines()
    found = []
    for name in sorted(_gating_names(tree, call_line)):
        stmt = _at(tree, name, k)
        if stmt is not None and not _parameter(tree, call_line, name):
            found.append(Count(name, stmt.lineno, lines[stmt.lineno - 1].strip()))
    return found[0] if len(found) == 1 else None


def with_count(source: str, name: str, was: int, n: int) -> str | None:
    """``source`` with the one statement that sets ``name`` to ``was`` setting it to ``n``;
    None where the file has no such single statement (it changed since the run)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    stmt = _at(tree, name, was)
    value = stmt.value if stmt is not None else None
    if value is None or value.lineno != value.end_lineno or value.end_col_offset is None:
        return None
    lines = source.splitlines(keepends=True)
    i = value.lineno - 1
    # ast's columns count UTF-8 bytes.
    raw = lines[i].encode()
    lines[i] = (raw[: value.col_offset] + str(n).encode() + raw[value.end_col_offset :]).decode()
    return "".join(lines)
