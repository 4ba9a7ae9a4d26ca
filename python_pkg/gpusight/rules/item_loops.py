"""Loops over the batch's items in the step (pure: ``ast`` on the file's text as the run saw
it). ``for i in range(len(y)): loss = loss + crit(out[i : i + 1], y[i : i + 1])`` or a flip
per image runs one op per item from Python, where one call over the whole batch would do: on a
GPU each is a kernel launch of its own. Such a loop is one piece of work, its header included
(not the wait for the next batch, which is the header of the loop around the model's call)."""

from __future__ import annotations

import ast
import functools
from dataclasses import replace

from .host_line_fix import HostLine
from .host_line_loops import parsed, same_file

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef)
_LOSSES = ("cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
           "mse_loss", "l1_loss", "nll_loss", "smooth_l1_loss")  # fmt: skip


def _over_items(loop: ast.For | ast.AsyncFor) -> bool:
    """The loop walks items one by one (``range(len(y))``, ``range(x.size(0))``,
    ``enumerate(y)``; not a range with a step, which walks batches, nor a dict's fields) and
    its body indexes something with its variable (``out[i]``, ``x[i : i + 1]``). A loop that
    takes the items themselves (``zip(out, y)``) is not told from one over a list of
    callbacks, and is left out."""
    it = loop.iter
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range":
        if len(it.args) == 3:
            return False
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute):
        if it.func.attr in ("items", "keys", "values"):
            return False  # a batch's fields (``for k, v in batch.items()``), a few at most
    names = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    for node in ast.walk(loop):
        if isinstance(node, ast.Subscript) and node is not loop.target:
            used = {n.id for n in ast.walk(node.slice) if isinstance(n, ast.Name)}
            if used & names:
                return True
    return False


def _scope(tree: ast.Module, line: int) -> ast.AST:
    """The innermost function holding ``line``, else the module."""
    funcs = [
        n
        for n in ast.walk(tree)
        if isinstance(n, _SCOPES) and n.lineno <= line <= (n.end_lineno or n.lineno)
    ]
    return max(funcs, key=lambda n: n.lineno) if funcs else tree


def _loop_at(tree: ast.Module, header: int) -> ast.For | ast.AsyncFor | None:
    return next(
        (n for n in ast.walk(tree) if isinstance(n, ast.For | ast.AsyncFor) and n.lineno == header),
        None,
    )


@functools.lru_cache(maxsize=32)
def what_it_does(text: str, header: int) -> str:
    """What the loop at ``header`` computes per item, as its fix needs it: ``loss`` (a loss
    function's call), ``transform`` (an item of a tensor written: ``x[i] = x[i].flip(-1)``),
    else ``other``."""
    tree = parsed(text)
    loop = _loop_at(tree, header) if tree is not None else None
    if loop is None:
        return "other"
    names = [_last(n.func) for n in ast.walk(loop) if isinstance(n, ast.Call)]
    if any("loss" in n.lower() or "crit" in n.lower() or n in _LOSSES for n in names):
        return "loss"
    stores = [
        t
        for n in ast.walk(loop)
        if isinstance(n, ast.Assign | ast.AugAssign)
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
    ]
    return "transform" if any(isinstance(t, ast.Subscript) for t in stores) else "other"


def _last(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


@functools.lru_cache(maxsize=32)
def item_loop(text: str, call_line: int, line: int) -> tuple[int, int] | None:
    """The innermost loop over the batch's items that holds ``line``, as (first, last) line:
    in the same function as the model's call at ``call_line`` and not around it."""
    tree = parsed(text)
    if tree is None:
        return None
    scope = _scope(tree, call_line)
    spans = [
        (n.lineno, n.end_lineno or n.lineno)
        for n in ast.walk(scope)
        if isinstance(n, ast.For | ast.AsyncFor)
        and n.lineno <= line <= (n.end_lineno or n.lineno)
        and not n.lineno <= call_line <= (n.end_lineno or n.lineno)
        and _scope(tree, n.lineno) is scope
        and _over_items(n)
    ]
    return max(spans) if spans else None


def in_item_loop(text: str | None, call_line: int | None, line: int) -> bool:
    """``line`` is in a loop over the batch's items, or is its header: the user's own work,
    its loss included (the loop is the waste, not the loss)."""
    if text is None or call_line is None:
        return False
    return item_loop(text, call_line, line) is not None


def grouped_items(
    lines: list[HostLine], text: str | None, path: str | None, call_line: int | None
) -> list[HostLine]:
    """``lines`` (costliest first) with each loop over the batch's items as one line from its
    header to its last line, holding the loop's time, marked ``per_item`` with what it does."""
    if text is None or path is None or call_line is None:
        return lines
    spans: dict[tuple[int, int], list[HostLine]] = {}
    for ln in lines:
        if same_file(ln, path) and not ln.in_forward:
            span = item_loop(text, call_line, ln.line)
            if span is not None:
                spans.setdefault(span, []).append(ln)
    out, source = list(lines), text.splitlines()
    for (a, b), members in spans.items():
        code = source[a - 1].strip() if a <= len(source) else members[0].code
        loop = replace(members[0], line=a, code=code, ms=sum(m.ms for m in members),
                       share_pct=sum(m.share_pct for m in members), last_line=b,
                       per_item=what_it_does(text, a), on_output=False)  # fmt: skip
        out = [ln for ln in out if ln not in members] + [loop]
    return sorted(out, key=lambda ln: -ln.ms)
