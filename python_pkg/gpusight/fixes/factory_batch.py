"""Where the batch of a tensor the script makes itself is sized: the model's input (or the
tensor it is indexed from) made by a torch factory whose batch dimension is a knob name.

``x = torch.randn(bs, 3, 224, 224)`` before the loop that calls ``model(x)``, or
``model(xs[i % 16])`` where ``xs = torch.randn(16, batch, width)`` is returned by a helper of
the same file (``model, opt, xs, ys = build(...)``): the knob is ``bs`` / ``batch``, and the
batch-knob patch (batch_knob.py) sets it once where it is last bound before the factory, in the
function that makes the tensor, so that labels made from the same knob follow. The input is
followed back through plain assignments, moves (``.to(dev)``, ``.float()``), integer indexing
(which drops the dimensions in front of the batch's), whole slices of the batch's dimension,
and one helper's ``return``. Where anything is unsure (a literal size, the knob bound in the
loop, labels sized otherwise, a helper called with other arguments), there is no site.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from .statement_patches import torch_name
from .where_made import LOOPS, At, at_line, made_before, stored

# The factories that take sizes (not ``*_like``: their size is another tensor's).
_FACTORIES = frozenset({"randn", "rand", "zeros", "ones", "empty", "full", "randint"})
# Tensor methods that keep every dimension: the input followed through them.
_KEEPS = frozenset(
    {"to", "cuda", "cpu", "float", "half", "bfloat16", "double", "long", "int", "bool"}
    | {"contiguous", "detach", "clone", "requires_grad_", "pin_memory"}
)
_INT_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Mod, ast.FloorDiv)
# Bindings to follow back from the model's input to its factory.
_HOPS = 8


@dataclass(frozen=True)
class Sized:
    """The knob that sizes a batch, and where a patch sets it: after ``after`` (its last binding
    before the factory), else before ``before`` (the first statement of the function whose
    parameter it is). Equal when the knob and both statements are (ast nodes by identity)."""

    knob: str
    after: ast.stmt | None = None
    before: ast.stmt | None = None


def bound_before(at: At, knob: str) -> ast.stmt | None:
    """The last statement that binds ``knob`` (or, for ``args.batch_size``, its object) before
    ``at``'s loop: where a patch sets the knob."""
    root = knob.split(".")[0]
    return made_before(at, knob, *([root] if root != knob else []))


def _counters(at: At) -> set[str]:
    """The loop variables that are integers: ``i`` of ``for i in range(...)`` or
    ``for i, b in enumerate(...)`` around the statement."""
    out: set[str] = set()
    for _, s in at.chain:
        if not (isinstance(s, ast.For) and isinstance(s.iter, ast.Call)):
            continue
        fn = s.iter.func
        name = fn.id if isinstance(fn, ast.Name) else None
        t = s.target
        if name == "range" and isinstance(t, ast.Name):
            out.add(t.id)
        elif name == "enumerate" and isinstance(t, ast.Tuple) and isinstance(t.elts[0], ast.Name):
            out.add(t.elts[0].id)
    return out


def _is_int(node: ast.expr, counters: set[str]) -> bool:
    """An index that is one integer (it drops its dimension): a literal, a loop counter, or
    arithmetic on one (``i % 16``, ``(i + 1) % n``). A tensor of indices would keep it."""
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _is_int(node.operand, counters)
    if isinstance(node, ast.Name):
        return node.id in counters
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len":
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, _INT_OPS):
        sides = (node.left, node.right)
        known = [_is_int(s, counters) for s in sides]
        return any(known) and all(k or isinstance(s, (ast.Name, ast.Attribute))
                                  for k, s in zip(known, sides, strict=True))  # fmt: skip
    return False


def _indexed_dim(key: ast.expr, dim: int, counters: set[str]) -> int | None:
    """The dimension of ``t`` that is ``dim`` of ``t[key]``: each integer index in front of it
    drops one; the batch's own dimension may only be sliced whole (``[:]``)."""
    parts = key.elts if isinstance(key, ast.Tuple) else [key]
    if not all(isinstance(p, ast.Slice) or _is_int(p, counters) for p in parts):
        return None  # None, ..., or a tensor of indices: dimensions move or appear
    src = out = 0
    for p in parts:
        if isinstance(p, ast.Slice):
            if out == dim:
                whole = p.lower is None and p.upper is None and p.step is None
                return src if whole else None
            out += 1
        src += 1
    return src + dim - out


def _sizes(call: ast.Call, factory: str) -> list[ast.expr] | None:
    """The sizes a factory call is given: separate positionals, one tuple/list, ``size=``
    (``randint``'s size after its low/high, ``full``'s before its fill value)."""
    kw = {k.arg: k.value for k in call.keywords}
    if None in kw or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    n = len(call.args)
    size: ast.expr | None
    if "size" in kw:
        size = kw["size"]
    elif factory == "randint":
        size = call.args[-1] if n in (2, 3) else None
    elif factory == "full" or n == 1:
        size = call.args[0] if n else None  # one positional that is not a tuple may be a shape
    else:
        return list(call.args) or None
    elts = size.elts if isinstance(size, (ast.Tuple, ast.List)) else None
    return None if elts is None or any(isinstance(e, ast.Starred) for e in elts) else elts


def _knob_name(node: ast.expr) -> str | None:
    """``bs`` or ``args.batch_size``: the knobs a patch may set (a literal's labels would not
    follow; another object's attribute may be shared)."""
    if isinstance(node, ast.Name):
        return node.id
    v = node.value if isinstance(node, ast.Attribute) else None
    if isinstance(node, ast.Attribute) and isinstance(v, ast.Name) and v.id == "args":
        return f"args.{node.attr}"
    return None


def _own(fn: ast.FunctionDef) -> Iterator[ast.AST]:
    """The nodes of ``fn``'s body, not those of functions or classes inside it."""
    todo: list[ast.AST] = list(fn.body)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))


def _unmoved(node: ast.expr) -> ast.expr:
    """``x`` of ``x.to(dev).float()``: what calls that keep every dimension are of."""
    while (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _KEEPS
    ):
        node = node.func.value
    return node


def _at(tree: ast.Module, stmt: ast.stmt) -> At | None:
    at = at_line(tree, stmt.lineno)
    return at if at is not None and at.chain[-1][1] is stmt else None


def _last_store(at: At, name: str) -> ast.stmt | None:
    """The last statement that binds ``name`` before ``at``'s: in its innermost loop before
    it, else before its outermost loop (None where a loop around it rebinds the name)."""
    k = at.inner_loop
    if k is not None:
        inner = [s for block, stmt in at.chain[k + 1 :] for s in block[: block.index(stmt)]]
        hit = next((s for s in reversed(inner) if stored(s, name)), None)
        if hit is not None or stored(at.chain[at.anchor][1], name):
            return hit
    outer = [s for block, stmt in at.chain[: at.anchor + 1] for s in block[: block.index(stmt)]]
    return next((s for s in reversed(outer) if stored(s, name)), None)


@dataclass
class _Trace:
    """One input followed back to its factory; a helper's ``return`` entered once at most."""

    tree: ast.Module
    torch: str
    entered: bool = False

    def sized(self, at: At, node: ast.expr, dim: int) -> Sized | None:
        """Where dimension ``dim`` of ``node`` (evaluated at ``at``'s statement) is sized."""
        for _ in range(_HOPS):
            node = _unmoved(node)
            while isinstance(node, ast.Subscript):  # indexing: the batch's dimension moves
                d = _indexed_dim(node.slice, dim, _counters(at))
                if d is None:
                    return None
                node, dim = _unmoved(node.value), d
            if isinstance(node, ast.Call):
                return self._factory(at, node, dim)
            got = self._bound(at, node.id) if isinstance(node, ast.Name) else None
            if got is None:
                return None
            at, node = got
        return None

    def _bound(self, at: At, name: str) -> tuple[At, ast.expr] | None:
        """The statement that binds ``name`` for ``at``'s (a plain assignment), and its value
        for the name: a tuple's item, or what a helper of the module returns there."""
        s = _last_store(at, name)
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1):
            return None
        at_s = _at(self.tree, s)
        target, value = s.targets[0], s.value
        if at_s is None:
            return None
        if isinstance(target, ast.Name):
            return (at_s, value) if target.id == name else None
        names = [e.id if isinstance(e, ast.Name) else None for e in getattr(target, "elts", [])]
        if names.count(name) != 1 or None in names:
            return None
        i = names.index(name)
        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(names):
            return None if isinstance(value.elts[i], ast.Starred) else (at_s, value.elts[i])
        return self._returned(value, i, len(names)) if isinstance(value, ast.Call) else None

    def _returned(self, call: ast.Call, i: int, n: int) -> tuple[At, ast.expr] | None:
        """Item ``i`` of the ``n`` that a module-level function returns (its one ``return``,
        outside loops), where every call of it in the file passes the same arguments."""
        name = call.func.id if isinstance(call.func, ast.Name) else None
        defs = [s for s in self.tree.body if isinstance(s, ast.FunctionDef) and s.name == name]
        if self.entered or name is None or len(defs) != 1 or defs[0].decorator_list:
            return None
        fn = defs[0]
        args = ast.dump(ast.Tuple([*call.args, *(k.value for k in call.keywords)]))
        for c in ast.walk(self.tree):  # another call with other arguments: not one batch size
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == name:
                if ast.dump(ast.Tuple([*c.args, *(k.value for k in c.keywords)])) != args:
                    return None
        if any(stored(s, name) for s in self.tree.body):
            return None  # the name is rebound: the call may not be this function's
        returns = [r for r in _own(fn) if isinstance(r, ast.Return)]
        r = returns[0] if len(returns) == 1 else None
        at_r = None if r is None else _at(self.tree, r)
        if r is None or at_r is None or any(isinstance(s, LOOPS) for _, s in at_r.chain):
            return None
        v = r.value
        if not (isinstance(v, ast.Tuple) and len(v.elts) == n) or isinstance(
            v.elts[i], ast.Starred
        ):
            return None
        self.entered = True
        return at_r, v.elts[i]

    def _factory(self, at: At, call: ast.Call, dim: int) -> Sized | None:
        """The knob at ``dim`` of a factory's sizes, and where it is last bound before the
        factory (or, a parameter never rebound, the function's first statement)."""
        f = call.func
        t = f.value if isinstance(f, ast.Attribute) else None
        if not (isinstance(f, ast.Attribute) and isinstance(t, ast.Name) and t.id == self.torch):
            return None
        sizes = _sizes(call, f.attr) if f.attr in _FACTORIES else None
        knob = None if sizes is None or dim >= len(sizes) else _knob_name(sizes[dim])
        if knob is None:
            return None
        after = bound_before(at, knob)
        if after is not None:
            return Sized(knob, after=after)
        fn = next((s for s in ast.walk(self.tree) if isinstance(s, ast.FunctionDef)
                   and s.body is at.chain[0][0]), None)  # fmt: skip
        params = [] if fn is None else [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
        if fn is None or knob not in [p.arg for p in params]:
            return None
        if any(stored(s, knob) for s in fn.body):
            return None  # rebound, but not plainly before the factory
        first = fn.body[0]  # set before all else the function does (after its docstring)
        v = first.value if isinstance(first, ast.Expr) else None
        doc = isinstance(v, ast.Constant) and isinstance(v.value, str)
        return Sized(knob, after=first) if doc else Sized(knob, before=first)


def _beside(tree: ast.Module, at: At, model: ast.Call) -> Iterator[tuple[At, ast.expr]]:
    """The values that must keep the input's batch: the model call's other arguments, and
    those beside its output in the loop's calls that take it (the labels of ``crit(model(x),
    y)``, or of ``crit(out, y)`` on a later line)."""
    yield from ((at, a) for a in [*model.args[1:], *(k.value for k in model.keywords)])
    stmt = at.chain[-1][1]
    outs = {t.id for t in getattr(stmt, "targets", []) if isinstance(t, ast.Name)}
    calls = [n for n in ast.walk(at.chain[at.anchor][1]) if isinstance(n, ast.Call)]
    for n in calls:
        args = [*n.args, *(k.value for k in n.keywords)]
        taken = [a for a in args for x in ast.walk(a)
                 if x is model or (isinstance(x, ast.Name) and x.id in outs)]  # fmt: skip
        at_n = at_line(tree, n.lineno) if taken else None
        yield from ((at_n, a) for a in args if at_n is not None and a not in taken)


def factory_site(
    tree: ast.Module, at: At, calls: list[ast.Call], torch_alias: str | None = None
) -> Sized | None:
    """Where the batch of the model's input on ``at``'s line is sized by a factory's knob
    (``calls``: the calls that may be the model's), where the labels beside it on the line
    (the loss's other arguments) are sized there too; None where that is not known for sure."""
    bound = torch_name(tree)
    t = bound[0] if bound else torch_alias
    if t is None:
        return None
    found = [(c, s) for c in calls if (s := _Trace(tree, t).sized(at, c.args[0], 0))]
    site = found[0][1] if found else None
    if site is None or any(s != site for _, s in found):
        return None  # no factory's knob, or two that differ
    loop = at.chain[at.anchor][1]
    if stored(loop, site.knob) or stored(loop, site.knob.split(".")[0]):
        return None  # the loop rebinds the knob (or its object)
    for c, _ in found:
        for at_a, a in _beside(tree, at, c):
            if isinstance(a, ast.Constant) or _is_int(a, _counters(at_a)):
                continue  # not a tensor
            lab = _Trace(tree, t).sized(at_a, a, 0)
            if lab is None or lab != site:
                return None  # labels sized otherwise (or not known): they would not follow
    return site
