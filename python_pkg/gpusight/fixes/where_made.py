"""Fixes made where a tensor or model is made, before the loop that uses it: a pageable host
tensor that the loop copies to the GPU is pinned once; a conv model that runs under autocast in
NCHW is converted to ``channels_last`` once (and its input on the line that calls it); a
launch-bound model is compiled once (``model.compile()``).

The line the watch knows is inside the loop (the copy, the model's call); the change goes after
the last statement that binds the name before that loop, in the same function (or module), at
that statement's indentation. Where the name is bound by the loop itself or inside it, is a
parameter never rebound, or is bound in a way that is not a plain assignment, there is no patch:
the fix's generic snippet stands alone. Pure text work: no torch, no imports of the code.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .statement_patches import bodies, compiles, indent_of, torch_name

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
LOOPS = (ast.For, ast.AsyncFor, ast.While)
_COPIES = frozenset({"to", "cuda"})
# Values that are not tensors: ``.pin_memory()`` on them would raise.
_CONTAINERS = (ast.Tuple, ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)


@dataclass
class At:
    """The statement holding a line, with the blocks that lead to it."""

    chain: list[tuple[list[ast.stmt], ast.stmt]]
    """(block, statement in it), from the innermost function's (or module's) body down."""

    @property
    def anchor(self) -> int:
        """Index in ``chain`` of the outermost loop holding the line (else the statement):
        whatever it binds changes every step, so a fix goes before it."""
        loops = [i for i, (_, s) in enumerate(self.chain) if isinstance(s, LOOPS)]
        return loops[0] if loops else len(self.chain) - 1

    @property
    def inner_loop(self) -> int | None:
        """Index in ``chain`` of the innermost loop around the line's statement: the loop that
        makes each batch and calls the model."""
        loops = [i for i, (_, s) in enumerate(self.chain[:-1]) if isinstance(s, LOOPS)]
        return loops[-1] if loops else None


def spans(first: ast.stmt | ast.expr, line: int, last: ast.AST | None = None) -> bool:
    end = last if last is not None else first
    return first.lineno <= line <= (getattr(end, "end_lineno", None) or first.lineno)


def at_line(tree: ast.Module, line: int) -> At | None:
    found = At([])
    body: list[ast.stmt] | None = tree.body
    while body is not None:
        stmt = next((s for s in body if spans(s, line)), None)
        if stmt is None:
            break
        if isinstance(stmt, _SCOPES):
            found = At([])  # a new scope: what is outside it is not its own
        else:
            found.chain.append((body, stmt))
        body = next((b for b in bodies(stmt) if spans(b[0], line, b[-1])), None)
    return found if found.chain else None


def dotted(node: ast.expr) -> str | None:
    """``model`` or ``self.model``: a name, or attributes of a name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def stored(node: ast.AST, target: str) -> bool:
    return any(
        isinstance(n, (ast.Name, ast.Attribute))
        and isinstance(n.ctx, ast.Store)
        and dotted(n) == target
        for n in ast.walk(node)
    )


def _plain(stmt: ast.stmt, target: str) -> bool:
    """``stmt`` binds ``target`` only by plain assignments (``x = ...``, ``a, x = ...``, also
    inside an ``if``/``with``/``try`` block), to a value that may be a tensor or a model."""
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        names = [
            t for x in targets for t in (x.elts if isinstance(x, ast.Tuple | ast.List) else [x])
        ]
        if not any(dotted(t) == target for t in names):
            return False
        single = len(names) == 1
        return stmt.value is not None and not (single and isinstance(stmt.value, _CONTAINERS))
    if isinstance(stmt, (ast.If, ast.With, ast.Try)):
        inner = [s for b in bodies(stmt) for s in b if stored(s, target)]
        return bool(inner) and all(_plain(s, target) for s in inner)
    return False


def made_before(at: At, target: str, *also: str) -> ast.stmt | None:
    """The statement before the loop after which ``target`` is what the loop uses: the last
    one that binds it (or one of ``also``: ``args`` for ``args.batch_size``), when that is a
    plain assignment; None where the loop rebinds it or it comes from elsewhere (a parameter
    not rebound, an outer scope)."""
    names = (target, *also)
    k = at.anchor
    if any(stored(at.chain[k][1], n) for n in names):
        return None  # the loop's target, or made anew inside the loop
    for block, stmt in reversed(at.chain[: k + 1]):
        for s in reversed(block[: block.index(stmt)]):
            hit = [n for n in names if stored(s, n)]
            if hit:
                return s if all(_plain(s, n) for n in hit) else None
    return None


def _unit(lines: list[str], at: At) -> str:
    """One indentation level as the file writes it (between two nested blocks of the chain)."""
    for (_, outer), (_, inner) in zip(at.chain, at.chain[1:], strict=False):
        a, b = indent_of(lines, outer.lineno), indent_of(lines, inner.lineno)
        if b.startswith(a) and len(b) > len(a):
            return b[len(a) :]
    return "    "


def insert_after(lines: list[str], after: ast.stmt, block: list[str]) -> list[str]:
    end = after.end_lineno or after.lineno
    indent = indent_of(lines, after.lineno)
    if not lines[end - 1].endswith("\n"):
        lines = [*lines[: end - 1], lines[end - 1] + "\n", *lines[end:]]
    return [*lines[:end], *(indent + b + "\n" for b in block), *lines[end:]]


def insert_before(lines: list[str], before: ast.stmt, block: list[str]) -> list[str]:
    start = before.lineno - 1
    indent = indent_of(lines, before.lineno)
    return [*lines[:start], *(indent + b + "\n" for b in block), *lines[start:]]


def _root(node: ast.expr) -> str | None:
    """``host`` of ``host[i % n]`` or ``host``; None for a dict's entry (``batch["x"]``), an
    attribute or a call's result."""
    while isinstance(node, ast.Subscript):
        if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            return None
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _copied(stmt: ast.stmt, line: int) -> list[str]:
    """The names whose tensors ``.to(...)`` / ``.cuda(...)`` calls on ``line`` copy."""
    out: list[str] = []
    for n in ast.walk(stmt):
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr in _COPIES
            and spans(n, line)
        ):
            name = _root(n.func.value)
            if name is not None and name not in out:
                out.append(name)
    return out


def _torch(tree: ast.Module, alias: str | None) -> str | None:
    bound = torch_name(tree)
    return bound[0] if bound else alias


def pin_source_text(source: str, lines: list[int], torch_alias: str | None = None) -> str | None:
    """``source`` with the host tensors that the copies on ``lines`` read pinned once, after
    the statement that makes them before the loop (only where CUDA is there: ``pin_memory``
    raises without it); compiled first. None where no copied name is made before its loop by
    a plain assignment, or the file has no name for torch (``torch_alias``: the kernel's, in
    a notebook)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    t = _torch(tree, torch_alias)
    text = source.splitlines(keepends=True)
    pins: dict[int, tuple[ast.stmt, list[str], str]] = {}  # by the statement they go after
    for line in lines:
        at = at_line(tree, line)
        if at is None:
            continue
        for name in _copied(at.chain[-1][1], line):
            after = made_before(at, name)
            if after is not None:
                got = pins.setdefault(id(after), (after, [], _unit(text, at)))
                if name not in got[1]:
                    got[1].append(name)
    if t is None or not pins:
        return None
    # From the bottom up, so that the lines of what is still to insert do not move.
    for after, names, unit in sorted(pins.values(), key=lambda p: -p[0].lineno):
        block = [f"if {t}.cuda.is_available():  # pinned once: non_blocking copies overlap"]
        text = insert_after(text, after, block + [f"{unit}{n} = {n}.pin_memory()" for n in names])
    new = "".join(text)
    return new if new != source and compiles(new) else None


def calls_a_name(call: ast.Call) -> bool:
    """An argument calls a plain name: ``crit(model(x), y)`` is the loss, not the model."""
    args = [*call.args, *(k.value for k in call.keywords)]
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
               for a in args for n in ast.walk(a))  # fmt: skip


def _model_call(at: At, line: int, source: str) -> tuple[ast.Call, str, ast.stmt] | None:
    """The call of the model on ``line`` (a name, or ``self.model``, made before the loop), and
    the statement that makes it: not one that calls another name in its arguments (the loss,
    around the model's call); of several, the one whose ``.parameters()`` the file reads."""
    calls = []
    for n in ast.walk(at.chain[-1][1]):
        if isinstance(n, ast.Call) and spans(n, line) and not calls_a_name(n):
            name = dotted(n.func)
            after = None if name is None else made_before(at, name)
            if name is not None and after is not None:
                calls.append((n, name, after))
    if len(calls) > 1:
        calls = [c for c in calls if f"{c[1]}.parameters(" in source]
    return calls[0] if len(calls) == 1 else None


def _converted(at: At, model: str) -> bool:
    """A statement that always runs before the loop already puts ``model`` in channels_last
    (one under an ``if`` may not run: the watch saw it NCHW)."""
    for block, stmt in at.chain[: at.anchor + 1]:
        for s in block[: block.index(stmt)]:
            simple = isinstance(s, (ast.Assign, ast.AnnAssign, ast.Expr))
            if simple and "channels_last" in ast.unparse(s):
                if any(dotted(n) == model for n in ast.walk(s) if isinstance(n, ast.expr)):
                    return True
    return False


def _utf8_col(line: str, col: int) -> int:
    """ast's column (UTF-8 bytes) as a string index."""
    return len(line.encode("utf-8")[:col].decode("utf-8", "replace"))


@dataclass
class ModelSite:
    """The model's call on the line the watch knows, and where the model is made."""

    tree: ast.Module
    at: At
    call: ast.Call
    model: str
    """The file's own name for the model (``model``, ``self.net``)."""
    made: ast.stmt
    """The last statement that binds it before the loop: a fix of the model goes after it."""


def model_site(source: str, line: int) -> ModelSite | None:
    """The call of the model on ``line`` and the statement that makes it before the loop, in
    the same scope; None where the source does not parse or the model is not made there."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    at = at_line(tree, line)
    got = None if at is None else _model_call(at, line, source)
    if at is None or got is None:
        return None
    return ModelSite(tree, at, *got)


def channels_last_text(
    source: str, line: int, torch_alias: str | None = None, inputs: bool = True
) -> str | None:
    """``source`` with the model called on ``line`` converted to ``channels_last`` once, after
    the statement that makes it before the loop, and (``inputs``) its first positional argument
    made channels_last on that line; compiled first. None where the model is not made in that
    scope, is converted already, or the file has no name for torch."""
    site = model_site(source, line)
    t = None if site is None else _torch(site.tree, torch_alias)
    if site is None or t is None:
        return None
    call, model, after = site.call, site.model, site.made
    if _converted(site.at, model):
        return None
    text = source.splitlines(keepends=True)
    first = call.args[0] if call.args else None
    # The input's change first: it is below the insertion, whose lines would move it.
    if inputs and isinstance(first, (ast.Name, ast.Attribute, ast.Subscript)):
        end = first.end_lineno or first.lineno
        row = text[end - 1]
        col = _utf8_col(row, first.end_col_offset or 0)
        text[end - 1] = f"{row[:col]}.contiguous(memory_format={t}.channels_last){row[col:]}"
    text = insert_after(text, after, [f"{model} = {model}.to(memory_format={t}.channels_last)"])
    new = "".join(text)
    return new if new != source and compiles(new) else None


def _compiled(at: At, model: str) -> bool:
    """A statement before the loop already compiles ``model`` (``torch.compile(model)``,
    ``model.compile()``, ``model = torch.compile(Net())``)."""
    for block, stmt in at.chain[: at.anchor + 1]:
        for s in block[: block.index(stmt)]:
            for n in ast.walk(s):
                if isinstance(n, ast.Call) and (dotted(n.func) or "").endswith("compile"):
                    inside = [n.func, *n.args]
                    if stored(s, model) or any(
                        dotted(x) in (model, f"{model}.compile") for x in inside
                    ):
                        return True
    return False


def compile_text(source: str, line: int, mode: str = "default") -> str | None:
    """``source`` with the model called on ``line`` compiled in place once it is made, before
    the loop: ``model.compile()`` (its ``state_dict`` keeps its keys, where ``model =
    torch.compile(model)`` would prefix them); None where the model is not made in that scope
    or is compiled already."""
    site = model_site(source, line)
    if site is None or _compiled(site.at, site.model):
        return None
    arg = "" if mode == "default" else f"mode={mode!r}"
    text = insert_after(
        source.splitlines(keepends=True), site.made, [f"{site.model}.compile({arg})"]
    )
    new = "".join(text)
    return new if new != source and compiles(new) else None
