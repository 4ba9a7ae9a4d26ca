"""What the user's file says about a module the loop calls: the file's name for it, the statement
that builds it, the copies that send its input to the CPU, and the device the script moves its
models to. Read with ``ast`` from the line the watch saw call the module; every answer is
labelled in the report as found in the source. Pure text work: no torch, no imports of the code.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .where_made import (
    At,
    ModelSite,
    at_line,
    calls_a_name,
    dotted,
    made_before,
    model_site,
    spans,
    stored,
)


def _is_cpu(node: ast.expr) -> bool:
    """``"cpu"`` or ``torch.device("cpu")``."""
    if isinstance(node, ast.Constant):
        return node.value == "cpu"
    if isinstance(node, ast.Call) and node.args:
        name = dotted(node.func) or ""
        return name.split(".")[-1] == "device" and _is_cpu(node.args[0])
    return False


def _device_arg(call: ast.Call) -> ast.expr | None:
    """The device of a ``.to(...)`` call: its first argument, or ``device=``."""
    if call.args:
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg == "device"), None)


def to_cpu(node: ast.AST) -> bool:
    """``x.cpu()`` or ``x.to("cpu")`` (also ``device="cpu"``, ``torch.device("cpu")``)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    if node.func.attr == "cpu":
        return not node.args and not node.keywords
    dev = _device_arg(node) if node.func.attr == "to" else None
    return dev is not None and _is_cpu(dev)


def cpu_copies(node: ast.AST | None) -> list[ast.Call]:
    """The copies to the CPU in ``node``, outermost first."""
    if node is None:
        return []
    return [n for n in ast.walk(node) if isinstance(n, ast.Call) and to_cpu(n)]


def reads_outside_copies(node: ast.AST) -> list[str]:
    """Names ``node`` reads other than inside a copy to the CPU (what such a copy reads is on
    the device: that is why the copy is there)."""
    out: list[str] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if to_cpu(n):
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in out:
            out.append(n.id)
        stack.extend(ast.iter_child_nodes(n))
    return out


def module_call(tree: ast.Module, at: At, line: int) -> tuple[ast.Call, str] | None:
    """The call of a module on ``line`` and the file's name for it: the one call of a name or an
    attribute of one that is not the loss around it (``crit(head(x), y)``), a tensor's method
    (``x.to(dev)``) or a function of an imported module (``torch.cat``)."""
    imported = {
        (a.asname or a.name).split(".")[0]
        for n in ast.walk(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in n.names
    }
    found = []
    for n in ast.walk(at.chain[-1][1]):
        if not isinstance(n, ast.Call) or not spans(n, line) or calls_a_name(n):
            continue
        name = dotted(n.func)
        method = isinstance(n.func, ast.Attribute) and n.func.attr in _TENSOR_METHODS
        if name is not None and not method and name.split(".")[0] not in imported:
            found.append((n, name))
    return found[0] if len(found) == 1 else None


_TENSOR_METHODS = frozenset(
    {"to", "cuda", "cpu", "float", "half", "bfloat16", "view", "reshape", "flatten", "sum"}
)


def last_binding(tree: ast.Module, name: str, before: int) -> ast.stmt | None:
    """The last plain assignment of ``name`` in the file above line ``before`` (else the first
    below it): where a module is built, as far as the text tells."""
    found = [
        s
        for s in ast.walk(tree)
        if isinstance(s, (ast.Assign, ast.AnnAssign))
        and any(dotted(t) == name for t in _targets(s))
    ]
    above = [s for s in found if s.lineno < before]
    return above[-1] if above else (found[0] if found else None)


def _targets(s: ast.Assign | ast.AnnAssign) -> list[ast.expr]:
    return list(s.targets) if isinstance(s, ast.Assign) else [s.target]


def in_class(tree: ast.Module, cls: str, attr: str) -> ast.stmt | None:
    """``self.<attr> = ...`` in ``class <cls>``: where a part of a model is built."""
    for c in ast.walk(tree):
        if isinstance(c, ast.ClassDef) and c.name == cls:
            return last_binding(ast.Module(body=c.body, type_ignores=[]), f"self.{attr}", 10**9)
    return None


@dataclass
class Site:
    """A statement or expression of the user's file: its first line and that line's text."""

    line: int
    code: str
    segment: str | None = None
    """The expression itself (a copy's ``feats.cpu()``)."""


@dataclass
class CalledModule:
    """What the file says about the module called on a line."""

    name: str
    """The file's name for it (``head``, ``self.head``)."""
    built: Site | None = None
    """The statement that builds it (found in the source)."""
    copies: list[Site] = field(default_factory=list)
    """The copies to the CPU that feed its call (found in the source)."""


def _site(source: str, node: ast.AST, segment: bool = False) -> Site:
    line = getattr(node, "lineno", 1)
    lines = source.splitlines()
    code = lines[line - 1].strip() if line <= len(lines) else ""
    return Site(line, code, ast.get_source_segment(source, node) if segment else None)


def _call_at_col(at: At, line: int, col: int) -> tuple[ast.Call, str] | None:
    """The call that starts at ``line``, ``col``: the one the watch saw. Of a chain that starts
    there too (``model(x).sum().backward()``), the call of a name or an attribute of one."""
    for n in ast.walk(at.chain[-1][1]):
        if isinstance(n, ast.Call) and n.lineno == line and n.col_offset == col:
            name = dotted(n.func)
            if name is not None:
                return n, name
    return None


def module_site(source: str, line: int, col: int | None = None) -> ModelSite | None:
    """The module's call on ``line`` (the one starting at ``col`` where the watch told) and the
    statement that makes it before the loop, in the same scope; None where either is not
    known."""
    if col is None:
        return model_site(source, line)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    at = at_line(tree, line)
    got = None if at is None else _call_at_col(at, line, col)
    made = None if at is None or got is None else made_before(at, got[1])
    if at is None or got is None or made is None:
        return None
    return ModelSite(tree, at, got[0], got[1], made)


def called_module(source: str, line: int, col: int | None = None) -> CalledModule | None:
    """The module called on ``line`` (the call starting at ``col``, where the watch told): its
    name, the statement that builds it and the copies that feed it; None where the line holds
    no one such call."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    site = module_site(source, line, col)
    at = site.at if site is not None else at_line(tree, line)
    if at is None:
        return None
    if site is not None:
        got: tuple[ast.Call, str] | None = (site.call, site.model)
    else:
        got = _call_at_col(at, line, col) if col is not None else module_call(tree, at, line)
    if got is None:
        return None
    call, name = got
    made = site.made if site is not None else last_binding(tree, name, line)
    copies = [_site(source, c, segment=True) for c in feeding_copies(at, call)]
    return CalledModule(name, None if made is None else _site(source, made), copies)


def feeding_copies(at: At, call: ast.Call) -> list[ast.Call]:
    """The copies to the CPU in the call's arguments, and on the statements in its loop that
    bind a name its arguments read."""
    args: list[ast.expr] = [*call.args, *(k.value for k in call.keywords)]
    out = [c for a in args for c in cpu_copies(a)]
    for name in {n.id for a in args for n in ast.walk(a) if isinstance(n, ast.Name)}:
        bound = binding_in_loop(at, name)
        if isinstance(bound, ast.Assign):
            out += cpu_copies(bound.value)
    return out


def binding_in_loop(at: At, name: str) -> ast.stmt | None:
    """The last statement before the one at ``at`` that binds ``name`` inside its innermost
    loop (None where the loop does not, or there is no loop)."""
    k = at.inner_loop
    if k is None:
        return None
    for block, stmt in reversed(at.chain[k + 1 :]):
        for s in reversed(block[: block.index(stmt)]):
            if stored(s, name):
                return s
    return None


def device_expr(source: str, line: int) -> str | None:
    """How the script names the device it moved the module called on ``line`` to: the argument
    of a ``.to(...)`` on the statement that builds it, or on a statement before the loop that
    moves it (``.cuda()`` is ``"cuda"``); None where none is found."""
    site = model_site(source, line)
    if site is None:
        return None
    at, name = site.at, site.model
    stmts = [site.made]
    for block, stmt in at.chain[: at.anchor + 1]:
        stmts += [s for s in block[: block.index(stmt)] if s.lineno > site.made.lineno]
    for s in stmts:
        if s is not site.made and not _moves(s, name):
            continue
        for n in ast.walk(s):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                if n.func.attr == "cuda" and not n.args:
                    return '"cuda"'
                dev = _device_arg(n) if n.func.attr == "to" else None
                if dev is not None and not _is_cpu(dev) and _device_like(dev):
                    return ast.get_source_segment(source, dev)
    return None


def _moves(stmt: ast.stmt, name: str) -> bool:
    """``name.to(...)`` / ``name = name.to(...)``: a statement that moves the module."""
    return any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in ("to", "cuda")
        and dotted(n.func.value) == name
        for n in ast.walk(stmt)
    )


def _device_like(node: ast.expr) -> bool:
    """A name, an attribute (``args.device``), a string or ``torch.device(...)``: not a dtype
    or a memory format (``.to(torch.bfloat16)``, ``.to(memory_format=...)``)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.Call):
        return (dotted(node.func) or "").split(".")[-1] == "device"
    name = dotted(node)
    return name is not None and "dtype" not in name and not name.startswith("torch.")
