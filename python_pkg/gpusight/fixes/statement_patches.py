"""Fixes as changes to whole statements of the user's file: bf16 autocast around the line that
calls the model, TF32 switched on after ``import torch``, a logging line that syncs every step
read only every N steps.

Each edit is made on the file's text with ``ast`` locating the statement, keeps the statement's
own indentation (one level deeper inside the new block, in the file's own indentation unit), and
is compiled before its diff is returned. Where the line is not a plain statement that can be
wrapped safely (a compound statement's header, two statements on one line, a multi-line string
that indentation would change, code already under autocast), there is no patch: the fix's
generic snippet stands alone. Pure text work: no torch, no imports of the code.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass

from .patch import unified_diff

# Calls whose result a loop discards and that only report: reading a value there every N steps
# instead of every step changes what is printed, nothing the training computes.
_LOG_FUNCS = frozenset({"print"})
_LOG_METHODS = frozenset(
    {"info", "debug", "warning", "log", "add_scalar", "add_scalars", "set_postfix", "write"}
)
# A function of the user's own that says it logs (``log_metrics``, ``wandb.log``,
# ``mlflow.log_metric``): its statement's result is discarded, like print's. Not math whose name
# starts so (``log_softmax``, ``log1p``), which no loop calls for nothing.
_LOG_NAME = re.compile(r"log|log_\w+|\w+_log|print_\w+", re.IGNORECASE)
_NOT_LOGGING = frozenset({"log_softmax", "log_prob", "log_normal_", "log_sigmoid", "logsumexp"})
# Calls that read a tensor's value on the host (the syncs a logging line makes).
_READS = frozenset({"item", "cpu", "tolist", "numpy"})
_READ_FUNCS = frozenset({"float", "int", "bool"})


@dataclass
class _Found:
    stmt: ast.stmt
    siblings: list[ast.stmt]
    parents: list[ast.stmt]
    """Enclosing compound statements, outermost first."""
    block_indent: str | None
    """The indentation of the enclosing compound statement's header (None at module level)."""


def bodies(node: ast.stmt) -> Iterator[list[ast.stmt]]:
    for name in ("body", "orelse", "finalbody"):
        body = getattr(node, name, None)
        if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
            yield body
    for handler in getattr(node, "handlers", None) or []:
        yield handler.body
    for case in getattr(node, "cases", None) or []:
        yield case.body


def _find(body: list[ast.stmt], line: int, parents: list[ast.stmt]) -> _Found | None:
    for stmt in body:
        end = stmt.end_lineno or stmt.lineno
        if not stmt.lineno <= line <= end:
            continue
        for inner in bodies(stmt):
            if inner[0].lineno <= line <= (inner[-1].end_lineno or inner[-1].lineno):
                return _find(inner, line, [*parents, stmt])
        return _Found(stmt, body, parents, None)
    return None


def indent_of(lines: list[str], lineno: int) -> str:
    text = lines[lineno - 1]
    return text[: len(text) - len(text.lstrip(" \t"))]


def _unit(lines: list[str], found: _Found, indent: str) -> str:
    """One indentation level as the file writes it (the enclosing block's step, else 4 spaces
    or a tab)."""
    if found.parents:
        outer = indent_of(lines, found.parents[-1].lineno)
        if indent.startswith(outer) and len(indent) > len(outer):
            return indent[len(outer) :]
    return "\t" if "\t" in indent else "    "


def _multiline_string(stmt: ast.stmt) -> bool:
    return any(
        isinstance(n, (ast.Constant, ast.JoinedStr))
        and (isinstance(n, ast.JoinedStr) or isinstance(n.value, (str, bytes)))
        and (n.end_lineno or n.lineno) != n.lineno
        for n in ast.walk(stmt)
    )


def _plain_statement(source: str, line: int) -> tuple[_Found, list[str]] | None:
    """The simple statement spanning ``line`` when it can be moved into a block as it is."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    found = _find(tree.body, line, [])
    if found is None:
        return None
    stmt = found.stmt
    if any(True for _ in bodies(stmt)):
        return None  # the line is a compound statement's header: no one-line wrap
    lines = source.splitlines(keepends=True)
    indent = indent_of(lines, stmt.lineno)
    if len(indent.encode("utf-8")) != stmt.col_offset:
        return None  # something precedes it on its line (``a = 1; out = model(x)``, ``if c: ...``)
    end = stmt.end_lineno or stmt.lineno
    if any(s is not stmt and (s.lineno == end or (s.end_lineno or s.lineno) == stmt.lineno)
           for s in found.siblings):  # fmt: skip
        return None  # another statement shares one of its lines
    if _multiline_string(stmt):
        return None  # indenting its lines would change the string
    return found, lines


def _wrapped(lines: list[str], found: _Found, header: str) -> list[str]:
    stmt = found.stmt
    indent = indent_of(lines, stmt.lineno)
    unit = _unit(lines, found, indent)
    end = stmt.end_lineno or stmt.lineno
    body = [unit + ln if ln.strip() else ln for ln in lines[stmt.lineno - 1 : end]]
    if not body[-1].endswith("\n"):
        body[-1] += "\n"
    return [*lines[: stmt.lineno - 1], indent + header + "\n", *body, *lines[end:]]


def compiles(text: str) -> bool:
    try:
        compile(text, "<patched>", "exec")
    except (SyntaxError, ValueError):
        return False
    return True


def _diff(old: str, new_lines: list[str], path: str) -> str | None:
    new = "".join(new_lines)
    if new == old or not compiles(new):
        return None
    return unified_diff(old, new, path)


def torch_name(tree: ast.Module) -> tuple[str, ast.stmt] | None:
    """The name the module binds ``torch`` to at its top level, with that import statement."""
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.name == "torch":
                    return alias.asname or "torch", stmt
    return None


def _import_at(tree: ast.Module) -> int:
    """The index (0-based line) where a new top-level import may go: after the docstring and
    any ``from __future__`` imports."""
    at = 0
    for i, stmt in enumerate(tree.body):
        doc = i == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
        future = isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"
        if not (doc or future):
            break
        at = stmt.end_lineno or stmt.lineno
    return at


def _under_autocast(found: _Found) -> bool:
    for p in found.parents:
        if isinstance(p, (ast.With, ast.AsyncWith)) and "autocast" in ast.unparse(p.items[0]):
            return True
    return False


def autocast_patch(
    source: str, line: int, path: str, device: str = "cuda", dtype: str = "bfloat16"
) -> str | None:
    """The diff that runs the statement at ``line`` (the model's forward call) under
    ``torch.autocast(device, dtype=...)``, or None where no safe wrap exists."""
    new = autocast_text(source, line, device, dtype)
    return None if new is None else unified_diff(source, new, path)


def autocast_text(
    source: str,
    line: int,
    device: str = "cuda",
    dtype: str = "bfloat16",
    torch_alias: str | None = None,
) -> str | None:
    """``source`` with the statement at ``line`` under autocast (``autocast_patch``), compiled
    first; None where no safe wrap exists. ``torch_alias``: the name torch already has where
    the code runs (a notebook cell: the kernel's), so no import goes in."""
    got = _plain_statement(source, line)
    if got is None:
        return None
    found, lines = got
    if _under_autocast(found):
        return None
    tree = ast.parse(source)
    bound = torch_name(tree)
    name = bound[0] if bound else (torch_alias or "torch")
    header = f'with {name}.autocast("{device}", dtype={name}.{dtype}):'
    new = _wrapped(lines, found, header)
    if bound is None and torch_alias is None:
        at = _import_at(tree)
        new = [*new[:at], "import torch\n", *new[at:]]
    text = "".join(new)
    return text if text != source and compiles(text) else None


def tf32_patch(source: str, path: str) -> str | None:
    """The diff that allows TF32 for float32 matmuls and convolutions, right after the file's
    top-level ``import torch``; None without one, or when the file already sets it."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    bound = torch_name(tree)
    if bound is None or "allow_tf32" in source:
        return None
    name, stmt = bound
    lines = source.splitlines(keepends=True)
    end = stmt.end_lineno or stmt.lineno
    if not lines[end - 1].endswith("\n"):
        lines[end - 1] += "\n"
    added = [
        f"{name}.backends.cuda.matmul.allow_tf32 = True  # float32 matmuls on Tensor Cores\n",
        f"{name}.backends.cudnn.allow_tf32 = True\n",
    ]
    return _diff(source, [*lines[:end], *added, *lines[end:]], path)


def is_log_name(name: str) -> bool:
    """A function whose name says it logs (``log_metrics``, ``wandb.log``), not log maths."""
    return bool(_LOG_NAME.fullmatch(name)) and name.lower() not in _NOT_LOGGING


def _is_log_call(stmt: ast.stmt) -> bool:
    if not isinstance(stmt, ast.Expr) or not isinstance(stmt.value, ast.Call):
        return False
    f = stmt.value.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
    if name in _LOG_FUNCS or (isinstance(f, ast.Attribute) and name in _LOG_METHODS):
        return True
    return is_log_name(name)


def _reads_a_value(stmt: ast.stmt) -> bool:
    for n in ast.walk(stmt):
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Attribute) and f.attr in _READS:
                return True
            if isinstance(f, ast.Name) and f.id in _READ_FUNCS:
                return True
    return False


def _mentions(node: ast.expr, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def step_counter(loop: ast.For) -> str | None:
    """``i`` of ``for i, batch in enumerate(...)`` or ``for i in range(...)``."""
    it = loop.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name)):
        return None
    target = loop.target
    if it.func.id == "enumerate" and isinstance(target, ast.Tuple) and target.elts:
        first = target.elts[0]
        return first.id if isinstance(first, ast.Name) else None
    if it.func.id == "range" and isinstance(target, ast.Name):
        return target.id
    return None


def log_every_patch(source: str, line: int, path: str, every: int = 50) -> str | None:
    """The diff that runs the logging statement at ``line`` (a ``print``/logger call reading a
    tensor's value every step) only every ``every`` steps of its loop; None unless the line is
    such a call directly in a loop whose step counter is known."""
    new = log_every_text(source, line, every)
    return None if new is None else unified_diff(source, new, path)


def log_every_text(source: str, line: int, every: int = 50) -> str | None:
    """``source`` changed as ``log_every_patch`` says, compiled first; None where no safe
    change exists."""
    got = _plain_statement(source, line)
    if got is None:
        return None
    found, lines = got
    stmt = found.stmt
    if not (_is_log_call(stmt) and _reads_a_value(stmt)) or not found.parents:
        return None
    # The nearest enclosing loop, and between it and the line only ``if`` branches that do not
    # test the step counter (``if args.fix: ... else: log(loss.item())`` is still every step;
    # ``if i % 10 == 0:`` already is not).
    at = next((k for k in range(len(found.parents) - 1, -1, -1)
               if isinstance(found.parents[k], (ast.For, ast.While))), None)  # fmt: skip
    loop = found.parents[at] if at is not None else None
    if at is None or not isinstance(loop, ast.For):
        return None  # no loop, or a loop of another kind
    branches = found.parents[at + 1 :]
    if [*branches, stmt][0] not in loop.body:
        return None  # in the loop's else
    counter = step_counter(loop)
    if counter is None or not all(isinstance(b, ast.If) for b in branches):
        return None
    if any(_mentions(b.test, counter) for b in branches if isinstance(b, ast.If)):
        return None  # already under a condition on the step
    text = "".join(_wrapped(lines, found, f"if {counter} % {every} == 0:"))
    return text if text != source and compiles(text) else None


def tf32_cell_text(compiled: str, torch_alias: str) -> str | None:
    """A notebook cell's code with TF32 allowed in its first lines, under the kernel's name for
    torch (the cell runs in a kernel that imported it; nothing is imported); None where the
    code sets TF32 itself already."""
    if "allow_tf32" in compiled or "float32_matmul_precision" in compiled:
        return None
    added = (
        f"{torch_alias}.backends.cuda.matmul.allow_tf32 = True  # float32 matmuls on Tensor Cores\n"
        f"{torch_alias}.backends.cudnn.allow_tf32 = True\n"
    )
    text = added + compiled
    return text if compiles(text) else None
