"""A new batch size written where the script sets it, not in the ``DataLoader(...)`` call.

A Lightning DataModule's loader reads ``self.batch_size`` (or ``self.hparams.batch_size``),
which the script sets once, in ``DataModule(batch_size=16)`` or the ``__init__``'s default; a
plain script reads a module constant (``BATCH_SIZE = 16``). Writing the measured number into the
loader call works, but leaves the number the user reads and changes unused. So where the call's
``batch_size`` is such a name, and the file sets it in exactly one place, to a number, that
place gets the new value. Only where every read of the name in the file is a DataLoader's
``batch_size``: a name read elsewhere too (a learning rate scaled by it, a log) would change
more than the what-if measured, and the loader call is patched instead. Pure ``ast``.
"""

from __future__ import annotations

import ast

from .patch import LOADER_NAMES, _offset, called_name, find_call, unified_diff


def batch_source_patch(source: str, line: int, path: str, new: int) -> str | None:
    """The diff that sets the batch where the file sets the name the ``DataLoader`` call at
    ``line`` reads for it; None where that is not one number set in one place."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    call = find_call(tree, line)
    arg = _batch_arg(call) if call is not None else None
    name = _name_of(arg) if arg is not None else None
    if name is None or not _read_only_by_loaders(tree, name):
        return None
    place = _the_one_setting(tree, name)
    if place is None or place.end_lineno is None or place.end_col_offset is None:
        return None
    lines = source.splitlines(keepends=True)
    start = _offset(lines, place.lineno, place.col_offset)
    end = _offset(lines, place.end_lineno, place.end_col_offset)
    out = source[:start] + str(new) + source[end:]
    try:
        compile(out, path, "exec")
    except (SyntaxError, ValueError):
        return None
    return unified_diff(source, out, path)


def _batch_arg(call: ast.Call) -> ast.expr | None:
    kw = next((k.value for k in call.keywords if k.arg == "batch_size"), None)
    return kw if kw is not None else (call.args[1] if len(call.args) > 1 else None)


def _name_of(node: ast.expr) -> str | None:
    """``batch_size`` for ``self.batch_size``, ``self.hparams.batch_size``,
    ``cfg["batch_size"]`` and ``BATCH_SIZE`` alike; None for a number or an expression."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        key = node.slice
        return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None
    return node.id if isinstance(node, ast.Name) else None


def _loader_args(tree: ast.AST) -> set[int]:
    calls = (n for n in ast.walk(tree) if isinstance(n, ast.Call))
    return {id(a) for c in calls if called_name(c) in LOADER_NAMES and (a := _batch_arg(c))}


def _read_only_by_loaders(tree: ast.AST, name: str) -> bool:
    """Every read of ``name`` in the file is a DataLoader's ``batch_size``, or the copy into an
    attribute of the same name (``self.batch_size = batch_size``)."""
    allowed = _loader_args(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name):
            if node.value.id == name and all(_name_of(t) == name for t in node.targets):
                allowed.add(id(node.value))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute | ast.Subscript | ast.Name):
            continue
        if isinstance(node.ctx, ast.Load) and _name_of(node) == name and id(node) not in allowed:
            return False
    return True


def _the_one_setting(tree: ast.AST, name: str) -> ast.Constant | None:
    """The number ``name`` is set to: a keyword of a call that makes the object
    (``DataModule(batch_size=16)``), else a parameter's default or an assignment
    (``BATCH_SIZE = 16``, ``batch_size: int = 16``); None unless exactly one."""
    # Keywords of the calls that make the file's own classes (or a dict): Lightning's
    # ``self.log(..., batch_size=n)`` is no setting of it.
    made = {c.name for c in ast.walk(tree) if isinstance(c, ast.ClassDef)} | {"dict"}
    kws = [
        k.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and called_name(n) in made
        for k in n.keywords
        if k.arg == name
    ]
    found = kws or _defaults(tree, name) + _assigned(tree, name)
    if len(found) != 1:
        return None
    value = found[0]
    return value if isinstance(value, ast.Constant) and type(value.value) is int else None


def _defaults(tree: ast.AST, name: str) -> list[ast.expr]:
    out: list[ast.expr] = []
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            a = fn.args
            positional = [*a.posonlyargs, *a.args]
            tail = positional[len(positional) - len(a.defaults) :]
            pairs = list(zip(tail, a.defaults, strict=True))
            pairs += [(p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d]
            out += [d for p, d in pairs if p.arg == name]
    return out


def _assigned(tree: ast.AST, name: str) -> list[ast.expr]:
    out: list[ast.expr] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign) and not isinstance(n.value, ast.Name):
            if any(_name_of(t) == name for t in n.targets):
                out.append(n.value)
        elif isinstance(n, ast.AnnAssign) and n.value is not None and _name_of(n.target) == name:
            out.append(n.value)
        elif isinstance(n, ast.Dict):
            keys = [k.value if isinstance(k, ast.Constant) else None for k in n.keys]
            out += [v for k, v in zip(keys, n.values, strict=True) if k == name]
    return out
