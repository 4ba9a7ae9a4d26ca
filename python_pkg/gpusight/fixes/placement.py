"""The model and its batches moved to the GPU (``code.cpu_model``), as a change of the user's own
lines: ``model = model.to("cuda")`` after the statement that makes the model before the loop,
and one statement in the loop that calls it moving the names that carry the batch.

The batch's names are the loop's own target where the model's input is one of them (``for x, y
in loader:``: all of them move, first thing in the loop), else the names that the statement
binding the input before the call binds, with those of like statements beside it (``x, y =
xs[i].to(dev), ys[i].to(dev)``, or ``y = ys[i]`` next to ``x = xs[i]``): the labels follow the
inputs, or the loss mixes devices. Where the input is not a plain name, the names are not found,
or one is a dict or read on the host (``batch["x"]``, ``**batch``, ``y.numpy()``), there is no
patch: a patch that breaks the script is worse than the generic snippet. Pure text work.
"""

from __future__ import annotations

import ast
import copy

from .statement_patches import compiles, indent_of
from .where_made import At, ModelSite, insert_after, model_site, stored

_Block = list[ast.stmt]


def _names(target: ast.expr) -> list[str] | None:
    """``x`` or ``x, y``: the names; None for a starred or nested target, an attribute."""
    elts = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
    names = [e.id for e in elts if isinstance(e, ast.Name)]
    return names if len(names) == len(elts) else None


def _enumerated(it: ast.expr) -> bool:
    """``enumerate(loader)``, also inside a wrapper (``tqdm(enumerate(loader))``)."""
    if not isinstance(it, ast.Call):
        return False
    if isinstance(it.func, ast.Name) and it.func.id == "enumerate":
        return True
    return bool(it.args) and _enumerated(it.args[0])


def target_batch(loop: ast.stmt) -> list[str] | None:
    """The names a ``for`` loop's target gives each batch (of ``for i, (x, y) in
    enumerate(loader)``: ``x, y``; its counter is no tensor)."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return None
    target = loop.target
    if _enumerated(loop.iter):
        if not (isinstance(target, ast.Tuple) and len(target.elts) == 2):
            return None
        target = target.elts[1]
    return _names(target)


def _assigned(stmt: ast.stmt) -> list[tuple[str, ast.expr | None]] | None:
    """The names a plain ``a = v`` / ``a, b = v, w`` binds, each with its own value where the
    statement shows it; None for any other statement."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
        return None
    names = _names(stmt.targets[0])
    if names is None:
        return None
    v = stmt.value
    if len(names) == 1:
        return [(names[0], v)]
    parts = v.elts if isinstance(v, ast.Tuple) and len(v.elts) == len(names) else None
    return [(n, None if parts is None else parts[i]) for i, n in enumerate(names)]


class _Blank(ast.NodeTransformer):
    """Names and integers left out of an expression: what is alike in ``xs[i % 8].to(dev)``
    and ``ys[i % 8].to(dev)``, or ``batch[0]`` and ``batch[1]``."""

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.Name("_", node.ctx)

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        return ast.Constant(0) if isinstance(node.value, int) else node


def _shape(node: ast.expr) -> str | None:
    """How a batch part is made, where it is an index or a call (not a bare name or a value)."""
    if not isinstance(node, (ast.Subscript, ast.Call)):
        return None
    return ast.dump(_Blank().visit(copy.deepcopy(node)))


def _alike(block: _Block, upto: int, shape: str) -> list[tuple[int, list[str]]]:
    """The statements of ``block`` before index ``upto`` that bind one name to a value made
    like the input's (``y = ys[i]`` beside ``x = xs[i]``)."""
    out = []
    for i, s in enumerate(block[:upto]):
        got = _assigned(s)
        if got is not None and len(got) == 1 and got[0][1] is not None:
            if _shape(got[0][1]) == shape:
                out.append((i, [got[0][0]]))
    return out


def _bound_batch(at: At, k: int, name: str) -> tuple[ast.stmt, _Block, list[str]] | None:
    """Inside the loop at ``at.chain[k]``: the last statement before the model's call that
    binds ``name``, with the like statements beside it; the one of them to insert after, its
    block and the names they bind. None where that statement is not a plain assignment."""
    for block, stmt in reversed(at.chain[k + 1 :]):
        upto = block.index(stmt)
        found = next((i for i in range(upto - 1, -1, -1) if stored(block[i], name)), None)
        if found is None:
            continue
        got = _assigned(block[found])
        if got is None:
            return None
        names = [n for n, _ in got]
        value = dict(got)[name]
        shape = None if value is None else _shape(value)
        last = found
        for i, more in _alike(block, upto, shape) if shape else []:
            names += [n for n in more if n not in names]
            last = max(last, i)
        return block[last], block, names
    return None


def _reads(loop: ast.stmt, name: str) -> bool:
    body = [n for s in getattr(loop, "body", []) for n in ast.walk(s)]
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
               for n in body)  # fmt: skip


def host_only(loop: ast.stmt, names: list[str]) -> bool:
    """A name the loop uses as a dict (``batch["x"]``, ``**batch``) or reads on the host
    (``y.numpy()``): moving it would break the script, or not move the tensors inside."""
    for n in ast.walk(loop):
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name):
            key = n.slice
            if n.value.id in names and isinstance(key, ast.Constant) and isinstance(key.value, str):
                return True
        if isinstance(n, ast.keyword) and n.arg is None and isinstance(n.value, ast.Name):
            if n.value.id in names:
                return True
        if isinstance(n, ast.Attribute) and n.attr == "numpy" and isinstance(n.value, ast.Name):
            if n.value.id in names:
                return True
    return False


def alone(lines: list[str], block: _Block, stmt: ast.stmt) -> bool:
    """``stmt`` starts its line and no other statement shares its lines, so that a line inserted
    before or after it is before or after it alone."""
    if getattr(stmt, "decorator_list", None):
        return False
    if len(indent_of(lines, stmt.lineno).encode("utf-8")) != stmt.col_offset:
        return False
    end = stmt.end_lineno or stmt.lineno
    return not any(s is not stmt and (s.end_lineno or s.lineno) >= stmt.lineno and s.lineno <= end
                   for s in block)  # fmt: skip


def _move(names: list[str], device: str) -> str:
    moved = ", ".join(f'{n}.to("{device}", non_blocking=True)' for n in names)
    return f"{', '.join(names)} = {moved}"


def _batch_move(site: ModelSite, lines: list[str], device: str) -> list[str] | None:
    """The lines with the batch moved in the loop that calls the model; None where the batch's
    names are not known for sure."""
    at, call = site.at, site.call
    k = at.inner_loop
    first = call.args[0] if call.args else None
    if k is None or not isinstance(first, ast.Name):
        return None
    loop = at.chain[k][1]
    body: _Block = getattr(loop, "body", [])
    target = target_batch(loop)
    if target is not None and first.id in target:
        names = [n for n in target if _reads(loop, n)]
        anchor, block, before = body[0], body, True
    else:
        got = _bound_batch(at, k, first.id)
        if got is None:
            return None
        anchor, block, names = got
        names, before = [n for n in names if _reads(loop, n)], False
    if not names or host_only(loop, names) or not alone(lines, block, anchor):
        return None
    move = _move(names, device)
    if before:
        at_line = anchor.lineno - 1
        indent = indent_of(lines, anchor.lineno)
        return [*lines[:at_line], f"{indent}{move}\n", *lines[at_line:]]
    return insert_after(lines, anchor, [move])


def to_device_text(source: str, line: int, device: str = "cuda") -> str | None:
    """``source`` with the model called on ``line`` moved to ``device`` once, after the
    statement that makes it before the loop, and the batch it is called on moved in that loop
    (see the module's docstring); compiled first. None where either is not known for sure."""
    site = model_site(source, line)
    if site is None:
        return None
    lines = source.splitlines(keepends=True)
    # The batch's line first: it is below the model's, whose insertion would move it.
    text = _batch_move(site, lines, device)
    if text is None:
        return None
    model = site.model
    text = insert_after(text, site.made, [f'{model} = {model}.to("{device}")'])
    new = "".join(text)
    return new if new != source and compiles(new) else None
