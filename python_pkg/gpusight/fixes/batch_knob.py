"""A larger batch as a change of the user's own knob, where the script cuts each batch from a
sequence by hand (``load.small_batch``, ``infer.unbatched`` without a DataLoader to change).

The model's input on the line the watch knows (its first positional argument, or the statement
in the loop that binds that name) is a slice whose width is a knob: ``X[i : i + bs]``,
``X[i * bs : (i + 1) * bs]``, or ``X[i : ...]`` under ``for i in range(0, n, bs)``. The patch
sets the knob once, ``bs = N``, after the last statement that binds it before the loop (for
``args.batch_size``: after the one that binds ``args`` or it), so that the loop's step and the
slice grow together. Where the width is a literal, another expression, bound in the loop, a
parameter never rebound, or the slices disagree on it, there is no patch: the fix's generic
snippet stands alone. Where no slice cuts the batch, the input may be made by a torch factory
sized by a knob (``torch.randn(bs, ...)``, also in a helper of the file that returns it): the
knob is set where it is last bound before the factory (factory_batch.py). Pure text work: no
torch, no imports of the code.
"""

from __future__ import annotations

import ast

from .factory_batch import Sized, bound_before, factory_site
from .statement_patches import compiles, indent_of
from .where_made import (
    At,
    at_line,
    calls_a_name,
    dotted,
    insert_after,
    insert_before,
    spans,
    stored,
)

# How many bindings to follow back from the model's input (``xb = xb.to(dev)`` after the slice).
_HOPS = 4


def _same(a: ast.expr, b: ast.expr) -> bool:
    return ast.dump(a) == ast.dump(b)


def _plus(node: ast.expr | None, a: ast.expr) -> ast.expr | None:
    """``w`` of ``a + w`` (or ``w + a``)."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)):
        return None
    if _same(node.left, a):
        return node.right
    return node.left if _same(node.right, a) else None


def _times(node: ast.expr | None) -> list[tuple[ast.expr, ast.expr]]:
    """The (factor, other factor) pairs of ``a * w``."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)):
        return []
    return [(node.left, node.right), (node.right, node.left)]


def _scaled_width(lo: ast.expr, hi: ast.expr | None) -> ast.expr | None:
    """``w`` of ``[a * w : (a + 1) * w]``."""
    for a, w in _times(lo):
        for a1, w1 in _times(hi):
            one = _plus(a1, a)
            if _same(w, w1) and isinstance(one, ast.Constant) and one.value == 1:
                return w
    return None


def _range_step(at: At, k: int, name: str) -> ast.expr | None:
    """The step of ``for name in range(start, stop, step)`` among the loops that hold the line."""
    for _, s in reversed(at.chain[: k + 1]):
        if isinstance(s, ast.For) and isinstance(s.target, ast.Name) and s.target.id == name:
            it = s.iter
            ranged = isinstance(it, ast.Call) and dotted(it.func) == "range"
            if ranged and isinstance(it, ast.Call) and len(it.args) == 3 and not it.keywords:
                return it.args[2]
            return None
    return None


def _width(at: At, k: int, cut: ast.Slice) -> ast.expr | None:
    """The expression that sets how many items ``cut`` takes, where it is one of the shapes."""
    lo, hi = cut.lower, cut.upper
    if lo is None or cut.step is not None:
        return None
    w = _plus(hi, lo) or _scaled_width(lo, hi)
    step = _range_step(at, k, lo.id) if isinstance(lo, ast.Name) else None
    if step is not None and w is not None and not _same(step, w):
        return None  # the loop strides by another width than the slice takes: no one knob
    return w if w is not None else step


def _first_dim(node: ast.Subscript) -> ast.Slice | None:
    key = node.slice
    if isinstance(key, ast.Tuple) and key.elts:
        key = key.elts[0]  # the batch is the first dimension
    return key if isinstance(key, ast.Slice) else None


def _spine(node: ast.expr) -> ast.expr:
    """``xb`` of ``xb.to(dev).float()``: what a call of a method or an attribute is of."""
    while isinstance(node, (ast.Call, ast.Attribute)):
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Attribute):
                break
            node = node.func
        node = node.value
    return node


def _before_call(at: At, k: int) -> list[ast.stmt]:
    """The statements that run before the line's statement in the loop at ``at.chain[k]``."""
    return [s for block, stmt in at.chain[k + 1 :] for s in block[: block.index(stmt)]]


def _binding(before: list[ast.stmt], name: str) -> tuple[int, ast.expr] | None:
    """The last plain ``name = value`` among ``before``: its index and value."""
    for i in range(len(before) - 1, -1, -1):
        s = before[i]
        if stored(s, name):
            one = isinstance(s, ast.Assign) and len(s.targets) == 1
            if one and isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name):
                return i, s.value
            return None
    return None


def _input_expr(at: At, k: int, arg: ast.expr) -> ast.expr | None:
    """The expression that makes the model's input: ``arg``, or the value of the statement in
    the loop that binds it (followed while the value only moves it: ``xb = xb.to(dev)``)."""
    before = _before_call(at, k)
    node = arg
    for _ in range(_HOPS):
        cuts = [n for n in ast.walk(node) if isinstance(n, ast.Subscript) and _first_dim(n)]
        root = _spine(node)
        if cuts or not isinstance(root, ast.Name):
            return node
        got = _binding(before, root.id)
        if got is None:
            return None  # made before the loop, by the loop itself, or not plainly
        i, node = got
        before = before[:i]
    return None


def _knob(at: At, k: int, arg: ast.expr) -> str | None:
    """The knob the input's slices agree on; None where one is a literal or another shape."""
    node = _input_expr(at, k, arg)
    if node is None:
        return None
    found: set[str | None] = set()
    for n in ast.walk(node):
        cut = n if isinstance(n, ast.Subscript) else None
        dim = None if cut is None else _first_dim(cut)
        if dim is not None and dim.lower is not None:
            w = _width(at, k, dim)
            found.add(None if w is None else dotted(w))
    return found.pop() if len(found) == 1 else None


def _calls(at: At, line: int) -> list[ast.Call]:
    """The calls on ``line`` that may be the model's: of a name or attributes of one, with a
    positional argument, not around another name's call (the loss)."""
    return [n for n in ast.walk(at.chain[-1][1])
            if isinstance(n, ast.Call) and spans(n, line) and n.args
            and dotted(n.func) is not None and not calls_a_name(n)]  # fmt: skip


def _slice_site(at: At, knob: str | None) -> Sized | None:
    """The knob set after the last statement that binds it (or its object) before the loop."""
    after = None if knob is None else bound_before(at, knob)
    return None if knob is None or after is None else Sized(knob, after=after)


def _starts_line(lines: list[str], stmt: ast.stmt) -> bool:
    """``stmt`` begins its line (not ``def f(bs): x = ...``): its indentation is the block's."""
    return len(indent_of(lines, stmt.lineno)) == stmt.col_offset


def batch_knob_text(
    source: str, line: int, batch: int, torch_alias: str | None = None
) -> str | None:
    """``source`` with the knob that sets the width of the batch the model is called on at
    ``line`` set to ``batch`` once, after the statement that binds it before the loop (see the
    module's docstring), or where a factory that sizes the input by it binds it last
    (factory_batch.py; ``torch_alias``: the kernel's name for torch, in a notebook); compiled
    first. None where that knob is not known for sure."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    at = at_line(tree, line)
    k = None if at is None else at.inner_loop
    if at is None or k is None:
        return None
    calls = _calls(at, line)
    knobs = {_knob(at, k, c.args[0]) for c in calls} - {None}
    if knobs:
        site = _slice_site(at, knobs.pop()) if len(knobs) == 1 else None
    else:  # no slice cuts the batch: a factory may size it
        site = factory_site(tree, at, calls, torch_alias)
    where = None if site is None else site.after or site.before
    lines = source.splitlines(keepends=True)
    if site is None or where is None or not _starts_line(lines, where):
        return None
    knob_line = [f"{site.knob} = {batch}  # a larger batch: the same launches, more items"]
    if site.after is not None:
        text = insert_after(lines, site.after, knob_line)
    else:
        text = insert_before(lines, where, knob_line)
    new = "".join(text)
    return new if new != source and compiles(new) else None
