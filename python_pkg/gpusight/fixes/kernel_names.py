"""A fix's code in the user's own names, and the names it would still need from their kernel.

Snippets are written against the names a training script has (``model``, ``optimizer``,
``loader``, ``dataset``, ``loss_fn``, ``device``). Where the objects a fix is about are known
(``gpusight.diagnose`` is given them), each generic name is renamed to the user's variable bound
to that object. What the code still reads without defining it, and the kernel does not define
either, goes into ``Fix.unbound_names``: the card then offers the code for Copy only, and says
which names to bind, instead of inserting a cell that raises ``NameError``.
"""

from __future__ import annotations

import ast
import builtins
import keyword
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from ..report import Fix

GENERIC = ("model", "optimizer", "loader", "dataset", "loss_fn", "device")
"""The names the snippets use for the user's objects."""


class _Reads(ast.NodeVisitor):
    """Names read before the code binds them, in execution order (a value before its target,
    a loop's iterable before its variable)."""

    def __init__(self) -> None:
        self.bound: set[str] = set(dir(builtins))
        self.free: list[str] = []

    def _bind(self, target: ast.AST) -> None:
        for n in ast.walk(target):
            if isinstance(n, ast.Name):
                self.bound.add(n.id)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load) and node.id not in self.bound:
            if node.id not in self.free:
                self.free.append(node.id)
        elif not isinstance(node.ctx, ast.Load):
            self.bound.add(node.id)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for t in node.targets:
            self._bind(t)
            self.visit(t)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        self.visit(ast.Name(id=_root(node.target), ctx=ast.Load()))
        self._bind(node.target)

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        self._bind(node.target)
        for stmt in [*node.body, *node.orelse]:
            self.visit(stmt)

    def visit_With(self, node: ast.With) -> None:
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self._bind(item.optional_vars)
        for stmt in node.body:
            self.visit(stmt)

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.bound.add((a.asname or a.name).split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for a in node.names:
            self.bound.add(a.asname or a.name)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.bound.add(node.name)  # its body runs later, with its own names: not followed

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            self.visit(base)
        self.bound.add(node.name)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for default in [*node.args.defaults, *node.args.kw_defaults]:
            if default is not None:
                self.visit(default)
        # Its body runs with its arguments bound: they leak into the set, which only hides a
        # name that is read outside it before being bound (rare in a fix's few lines).
        for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
            self.bound.add(arg.arg)
        for extra in (node.args.vararg, node.args.kwarg):
            if extra is not None:
                self.bound.add(extra.arg)
        self.visit(node.body)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.visit(node.type)
        if node.name:
            self.bound.add(node.name)
        for stmt in node.body:
            self.visit(stmt)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self._bind(node.target)

    def visit_comprehension(self, node: ast.comprehension) -> None:
        self.visit(node.iter)
        self._bind(node.target)
        for cond in node.ifs:
            self.visit(cond)

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp) -> None:
        for gen in node.generators:
            self.visit(gen)
        self.visit(node.elt)

    visit_ListComp = visit_SetComp = visit_GeneratorExp = _comprehension

    def visit_DictComp(self, node: ast.DictComp) -> None:
        for gen in node.generators:
            self.visit(gen)
        self.visit(node.key)
        self.visit(node.value)


def _root(node: ast.AST) -> str:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def free_names(code: str) -> list[str]:
    """Names ``code`` reads before binding them (builtins aside); [] for code that is not
    Python."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    reads = _Reads()
    reads.visit(tree)
    return reads.free


def rename(code: str, names: Mapping[str, str]) -> str:
    """``code`` with each variable in ``names`` renamed (a keyword argument or an attribute of
    the same spelling is left alone)."""
    names = {k: v for k, v in names.items() if k != v and v.isidentifier()}
    if not names:
        return code
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    spots = sorted(
        ((n.lineno, n.col_offset, n.id) for n in ast.walk(tree)
         if isinstance(n, ast.Name) and n.id in names),
        reverse=True,
    )  # fmt: skip
    lines = code.splitlines(keepends=True)
    for line, col, old in spots:
        text = lines[line - 1]
        lines[line - 1] = text[:col] + names[old] + text[col + len(old) :]
    return "".join(lines)


def user_names(objects: Mapping[str, Any], namespace: Mapping[str, Any]) -> dict[str, str]:
    """Each generic name whose object the user's ``namespace`` binds, with that variable's name
    (the generic name itself first, then any public name)."""
    out: dict[str, str] = {}
    for generic, obj in objects.items():
        if obj is None:
            continue
        if namespace.get(generic) is obj:
            out[generic] = generic
            continue
        found = next(
            (k for k, v in namespace.items()
             if v is obj and not k.startswith("_") and not keyword.iskeyword(k)),
            None,
        )  # fmt: skip
        if found is not None:
            out[generic] = found
    return out


def bind(fix: Fix, names: Mapping[str, str], defined: Iterable[str]) -> None:
    """Rename ``fix``'s code to the user's ``names`` and record what it still needs that
    ``defined`` (the kernel's names) does not hold."""
    if not fix.code or fix.language != "python":
        return
    fix.code = rename(fix.code, names)
    have = set(defined)
    missing = [n for n in free_names(fix.code) if n not in have]
    fix.unbound_names = missing or None


def fixes_of(report: Any) -> list[Fix]:
    """Every fix a report offers: its findings' and its what-if rows'."""
    out = [f.fix for f in report.findings if f.fix is not None]
    out += [w.fix for w in report.what_if if getattr(w, "fix", None) is not None]
    return out


def bind_report(report: Any, objects: Mapping[str, Any], namespace: Mapping[str, Any]) -> None:
    """Every fix of ``report`` in the names of ``namespace`` (the user's), for ``objects``."""
    names = user_names(objects, namespace)
    for fix in fixes_of(report):
        bind(fix, names, namespace.keys())


def caller_namespace() -> dict[str, Any]:
    """The variables of the nearest caller outside gpusight (a notebook's user namespace, a
    script's module and function)."""
    frame = sys._getframe(1)
    while frame is not None and str(frame.f_globals.get("__name__", "")).startswith("gpusight"):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return {}
    return {**frame.f_globals, **frame.f_locals}


def mark_unbound(data: dict[str, Any], names: Iterable[str]) -> None:
    """Each Python fix of a report's dict gets the names its code reads that the kernel's
    ``names`` lack (``unbound_names``): the card then offers Copy, not a cell to run."""
    have = set(names)
    rows = [*(data.get("findings") or []), *(data.get("what_if") or [])]
    for row in rows:
        fix = row.get("fix") if isinstance(row, dict) else None
        if not isinstance(fix, dict) or fix.get("language") != "python" or not fix.get("code"):
            continue
        missing = [n for n in free_names(str(fix["code"])) if n not in have]
        if missing:
            fix["unbound_names"] = missing
        else:
            fix.pop("unbound_names", None)
