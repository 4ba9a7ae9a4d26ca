"""A training loop's own gradient-accumulation count: the name its optimizer step waits on
(``if step % accum: continue``, ``if (i + 1) % accum_steps == 0: optimizer.step()``, a
``for micro in range(grad_accum):`` loop of micro-batches inside the step loop), where the file
sets it once to a number (``accum = 8``, ``gradient_accumulation_steps = 5 * 8``, a config
dataclass's ``grad_accum: int = 8`` for ``cfg.grad_accum``, a trainer's ``self.accum = 8``),
and the same file with that number changed.

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
                if isinstance(part, ast.BinOp) and isinstance(part.op, ast.Mod):
                    names.update(_keys(tree, part.right))
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
        ):
            names.update(_keys(tree, it.args[0]))
    return names


def _keys(tree: ast.Module, node: ast.expr) -> list[str]:
    """What sets the value ``node`` reads: a name (``accum``); for an attribute
    (``cfg.grad_accum``, ``self.accum``), an instance's own (``self.accum = 8``) or a class's
    field of that name (``TrainConfig.grad_accum``, a dataclass's ``grad_accum: int = 8``)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if not isinstance(node, ast.Attribute):
        return []
    # A module's (``config.ACCUM`` after ``import config``): ``imported`` finds it.
    own = [f"{node.value.id}.{node.attr}"] if isinstance(node.value, ast.Name) else []
    return [f"self.{node.attr}", *own] + [
        f"{c.name}.{node.attr}" for c in _classes(tree) if _fields(c, node.attr)
    ]


def _classes(tree: ast.Module) -> list[ast.ClassDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]


def _fields(c: ast.ClassDef, name: str) -> list[ast.Assign | ast.AnnAssign]:
    """The statements of the class's own body that set ``name``."""
    return [s for s in c.body if isinstance(s, (ast.Assign, ast.AnnAssign)) and _sets(s, name)]


def _sets(stmt: ast.Assign | ast.AnnAssign, name: str) -> bool:
    """Whether ``stmt`` sets ``name`` alone (``name`` or ``self.name`` as the key says)."""
    if isinstance(stmt, ast.Assign):
        if len(stmt.targets) != 1:
            return False
        target = stmt.targets[0]
    else:
        target = stmt.target
    if name.startswith("self."):
        return (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
            and target.attr == name[5:]
        )
    return isinstance(target, ast.Name) and target.id == name


def _settings(tree: ast.Module, key: str) -> list[ast.Assign | ast.AnnAssign]:
    """Each statement of the file that sets what ``key`` names alone to a value: a name
    outside class bodies, ``self.x`` anywhere, ``Class.x`` in that class's body."""
    owner, _, field = key.rpartition(".")
    if owner and owner != "self":
        return [s for c in _classes(tree) if c.name == owner for s in _fields(c, field)]
    in_class = {id(s) for c in _classes(tree) for s in c.body}
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, (ast.Assign, ast.AnnAssign))
        and n.value is not None
        and id(n) not in in_class
        and _sets(n, key)
    ]


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


def imported(source: str, call_line: int) -> list[tuple[str, int, str]]:
    """The counts the step loop around ``call_line`` waits on that the file imports, as
    (module, relative level, name): ``from config import ACCUM``, ``config.ACCUM`` after
    ``import config``."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    keys = _gating_names(tree, call_line)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            out += [(node.module or "", node.level, a.name) for a in node.names
                    if (a.asname or a.name) in keys]  # fmt: skip
        elif isinstance(node, ast.Import):
            for a in node.names:
                local = (a.asname or a.name) + "."
                rest = [k[len(local) :] for k in sorted(keys) if k.startswith(local)]
                out += [(a.name, 0, r) for r in rest if "." not in r]
    return out


def set_in(source: str, name: str, k: int) -> Count | None:
    """Where a module's own code sets ``name`` once to ``k`` (None: nowhere, or more than once)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    stmt = _at(tree, name, k)
    if stmt is None:
        return None
    return Count(name, stmt.lineno, source.splitlines()[stmt.lineno - 1].strip())
