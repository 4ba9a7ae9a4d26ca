"""Objects a step's statements make and fill themselves: a confusion matrix counted item by
item, a list of the batch's predictions. Filling one changes nothing the training reads, so a
record of the step may do it (``statement_thinning``), and what fills it from the model's output
is part of that record (``rules.output_reads``). Pure ``ast``."""

from __future__ import annotations

import ast

from .patch import called_name

# Calls that make a new object.
_NEW = frozenset(
    {"zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like",
     "array", "tensor", "list", "dict", "set", "defaultdict", "Counter", "OrderedDict", "copy",
     "deepcopy", "clone", "bincount", "arange"}
)  # fmt: skip
_FRESH = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp, ast.Constant)
# Methods that fill the object they are called on.
_FILLS = frozenset(
    {"append", "extend", "add", "update", "insert", "setdefault", "add_", "copy_", "fill_",
     "index_add_", "scatter_add_"}
)  # fmt: skip


def made_here(stmt: ast.stmt) -> set[str]:
    """The names ``stmt`` binds to an object it makes (``cm = np.zeros((10, 10))``,
    ``rows = []``): changing that object changes nothing else."""
    if not isinstance(stmt, ast.Assign) or not all(isinstance(t, ast.Name) for t in stmt.targets):
        return set()
    v = stmt.value
    fresh = isinstance(v, _FRESH) or (isinstance(v, ast.Call) and called_name(v) in _NEW)
    return {t.id for t in stmt.targets if isinstance(t, ast.Name)} if fresh else set()


def _root(node: ast.expr) -> str | None:
    """The plain name an item or attribute chain starts from (``cm`` of ``cm[t, p]``)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def root_in(node: ast.expr, local: frozenset[str]) -> bool:
    """Whether ``node`` is an item or attribute of a name in ``local`` (``cm[t, p]``,
    ``hist.append``)."""
    if not isinstance(node, (ast.Attribute, ast.Subscript)):
        return False
    return _root(node) in local


def filled(stmt: ast.stmt) -> set[str]:
    """The names whose objects ``stmt`` changes in place: an item or attribute written
    (``cm[t, p] += 1``), a filling method called (``preds.append(...)``). ``self`` is left out:
    the module or trainer is not an object of the step's."""
    targets: list[ast.expr] = []
    for n in ast.walk(stmt):
        if isinstance(n, (ast.Subscript, ast.Attribute)) and isinstance(n.ctx, ast.Store):
            targets.append(n)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            if n.func.attr in _FILLS:
                targets.append(n.func.value)
    names = {_root(t) for t in targets} | {t.id for t in targets if isinstance(t, ast.Name)}
    return {n for n in names if n is not None and n != "self"}
