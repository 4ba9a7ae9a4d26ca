"""The lines of the loop that work on what the model's call returned (pure: ``ast`` on the
file's text as the run saw it). After ``out = model(x)``, a line that reads ``out``, or a name a
line before it made from ``out`` (``pred = out.detach().cpu().numpy()``, then
``np.mean(np.argmax(pred, 1) == y)``), computes a metric or a log of the step: the fix is to
compute it on the device and read it every N steps, not to move it into the DataLoader's
workers as a transform of the batch would be."""

from __future__ import annotations

import ast
import functools
from dataclasses import replace

from ..fixes.fresh_objects import filled, made_here
from .host_line_fix import HostLine, kind_of
from .host_line_loops import parsed, same_file

# A backward call: torch's, and Lightning's manual optimization's (``self.manual_backward(loss)``).
_BACKWARDS = ("backward", "manual_backward")
_SCOPES = (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef)
_COMPOUND = (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith, ast.Try,
             ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Match)  # fmt: skip


def _simple(node: ast.AST) -> list[ast.stmt]:
    """The statements under ``node`` that hold no others, in the order of their lines."""
    out = [n for n in ast.walk(node) if isinstance(n, ast.stmt) and not isinstance(n, _COMPOUND)]
    return sorted(out, key=lambda n: n.lineno)


def _loop_around(tree: ast.Module, line: int) -> ast.AST | None:
    """The innermost loop whose body holds ``line``; the function (or module) holding it where
    no loop does (a ``train_step`` called from the loop)."""
    spans = [
        n
        for n in ast.walk(tree)
        if isinstance(n, _SCOPES) and n.lineno < line <= (n.end_lineno or n.lineno)
    ]
    loops = [n for n in spans if isinstance(n, ast.For | ast.AsyncFor | ast.While)]
    inner = max(loops or spans, key=lambda n: n.lineno, default=None)
    return inner if inner is not None else tree


def _names(stmt: ast.stmt, ctx: type[ast.expr_context]) -> set[str]:
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}


@functools.lru_cache(maxsize=32)
def _after_call(text: str, call_line: int) -> tuple[tuple[int, int, bool], ...]:
    """Each statement after the model's call at ``call_line``, in the loop around it, as (first
    line, last line, whether it reads the call's output or a name made from it). A statement
    right after one that does, which copies a value to the host (``labels.extend(y.cpu()
    .tolist())`` beside the predictions'), is part of the same record; so is an object made
    for it to fill (``cm = np.zeros(...)`` before the loop over the predictions that counts
    them into it), and a loop's header over what the call made."""
    tree = parsed(text)
    if tree is None:
        return ()
    made: set[str] = set()
    out: list[tuple[int, int, bool]] = []
    record = False  # the statement before is of the step's record (not its backward or update)
    scope = _loop_around(tree, call_line) or tree
    feeds = _feeding_backward(_simple(scope))
    units = _units(scope)
    for stmt in units:
        end = stmt.end_lineno or stmt.lineno
        if stmt.lineno <= call_line <= end:
            made |= _names(stmt, ast.Store)
        elif stmt.lineno > call_line and made:
            reads = bool(_names(stmt, ast.Load) & made) or (record and _to_host(stmt))
            if reads:
                made |= _names(stmt, ast.Store) | filled(stmt)
            # What the backward differentiates (the loss, a meta-learning step's inner
            # gradients and fast weights), and the backward and update themselves, are the
            # step's computation, not its record.
            # A step function's ``return`` hands the loss to the framework's backward.
            reads = reads and not (_names(stmt, ast.Store) & feeds) and not _updates(stmt)
            reads = reads and not isinstance(stmt, ast.Return)
            record = reads
            out.append((stmt.lineno, end, reads))
    return _with_made_objects(out, units, made)


def _units(scope: ast.AST) -> list[ast.stmt]:
    """The simple statements under ``scope`` and, in their place, each ``for`` loop's header
    as an assignment of its target from its iterable (``for p, t in zip(pred, y)``)."""
    heads: list[ast.stmt] = [
        ast.Assign(
            targets=[n.target],
            value=n.iter,
            lineno=n.lineno,
            end_lineno=n.iter.end_lineno or n.lineno,
        )
        for n in ast.walk(scope)
        if isinstance(n, ast.For | ast.AsyncFor) and n is not scope
    ]
    return sorted(_simple(scope) + heads, key=lambda n: n.lineno)


def _with_made_objects(
    out: list[tuple[int, int, bool]], units: list[ast.stmt], made: set[str]
) -> tuple[tuple[int, int, bool], ...]:
    """``out`` with each object made for the record (``made_here``) counted in it, where the
    statement after it is the record's."""
    at = {u.lineno: u for u in units}
    marked = list(out)
    for i in range(len(out) - 2, -1, -1):
        a, b, reads = marked[i]
        fresh = made_here(at[a]) if a in at else set()
        if not reads and fresh and fresh <= made and marked[i + 1][2]:
            marked[i] = (a, b, True)
    return tuple(marked)


def _feeding_backward(stmts: list[ast.stmt]) -> set[str]:
    """The names the step's backward differentiates, and those they are made from: the
    receiver or argument of a ``.backward(...)`` call (``loss.backward()``,
    ``accelerator.backward(loss)``, ``scaler.scale(loss).backward()``), back through the
    statements that assign them; in a step function with no backward of its own (Lightning's
    ``training_step``), what it returns as the loss (``_loss_returned``)."""
    feeds: set[str] = set()
    backward = any(_calls_backward(s) for s in stmts)
    for stmt in reversed(stmts):
        if not backward and isinstance(stmt, ast.Return) and stmt.value is not None:
            feeds |= _loss_returned(stmt.value)
        for n in ast.walk(stmt):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                if n.func.attr in _BACKWARDS:
                    parts = [n.func.value, *n.args]
                    feeds |= {m.id for p in parts for m in ast.walk(p) if isinstance(m, ast.Name)}
        if _names(stmt, ast.Store) & feeds:
            feeds |= _names(stmt, ast.Load)
    return feeds


def _calls_backward(stmt: ast.stmt) -> bool:
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _BACKWARDS
        for n in ast.walk(stmt)
    )


def _loss_returned(value: ast.expr) -> set[str]:
    """The names a step function with no backward of its own returns for its caller's (a
    framework's) backward: Lightning's ``training_step`` returns the loss, alone, as a dict's
    ``"loss"`` or first in a tuple; the rest of a dict or tuple is the step's record."""
    if isinstance(value, ast.Dict):
        parts = [v for k, v in zip(value.keys, value.values, strict=True)
                 if isinstance(k, ast.Constant) and k.value == "loss"]  # fmt: skip
    elif isinstance(value, ast.Tuple) and value.elts:
        named: list[ast.expr] = [
            e for e in value.elts if isinstance(e, ast.Name) and "loss" in e.id
        ]
        parts = named or value.elts[:1]
    else:
        parts = [value]
    return {m.id for p in parts for m in ast.walk(p) if isinstance(m, ast.Name)}


def feeds_backward(text: str | None, call_line: int | None, line: int) -> bool:
    """The statement at ``line``, in the loop around the model's call, computes what the step's
    backward differentiates (``_feeding_backward``): a second view's forward in a contrastive
    step, a meta-learning step's outer loss."""
    return text is not None and call_line is not None and line in _fed_lines(text, call_line)


@functools.lru_cache(maxsize=32)
def _fed_lines(text: str, call_line: int) -> frozenset[int]:
    """Every line of the statements, in the loop around the call, that assign a name the
    backward differentiates (read once per file and call, for each timed line's question)."""
    tree = parsed(text)
    if tree is None:
        return frozenset()
    stmts = _simple(_loop_around(tree, call_line) or tree)
    feeds = _feeding_backward(stmts)
    return frozenset(
        n
        for stmt in stmts
        if _names(stmt, ast.Store) & feeds
        for n in range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1)
    )


def _updates(stmt: ast.stmt) -> bool:
    """The step's own calls on what it computed (``loss.backward()``, ``opt.step()``)."""
    return any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in (*_BACKWARDS, "step", "zero_grad")
        for n in ast.walk(stmt)
    )


def _to_host(stmt: ast.stmt) -> bool:
    """The statement reads a tensor's value on the host (``.cpu()``, ``.item()``, ...)."""
    return any(
        isinstance(n, ast.Attribute) and n.attr in ("cpu", "item", "tolist", "numpy")
        for n in ast.walk(stmt)
    )


SHOWN_CHARS = 120


def statement_text(text: str, line: int) -> str | None:
    """The simple statement that starts at ``line``, on one line, where that is at most
    ``SHOWN_CHARS`` long: a statement over several lines is shown whole, not by its first
    (``log.write(``); a longer one by its first line (cut, it would not parse for its kind)."""
    tree = parsed(text)
    if tree is None:
        return None
    stmt = next((n for n in _simple(tree) if n.lineno == line), None)
    if stmt is None:
        return None
    lines = text.splitlines()[stmt.lineno - 1 : stmt.end_lineno or stmt.lineno]
    one = " ".join(ln.strip() for ln in lines).replace("( ", "(").replace("{ ", "{")
    return one if len(one) <= SHOWN_CHARS else None


def output_lines(text: str, call_line: int) -> frozenset[int]:
    """The lines after the model's call that read its output or a name made from it (each
    line of a statement that goes on over several)."""
    return frozenset(
        n for a, b, reads in _after_call(text, call_line) if reads for n in range(a, b + 1)
    )


def output_runs(text: str | None, call_line: int | None) -> list[tuple[int, int]]:
    """The runs of statements, one after another, that all read the model's output, as (first
    line, last line): ``acc = (out.argmax(1) == y).float().mean()`` then a logger's line that
    reads ``acc`` and ``loss`` are one piece of work, the step's record."""
    if text is None or call_line is None:
        return []
    runs: list[tuple[int, int]] = []
    last = False
    for a, b, reads in _after_call(text, call_line):
        if reads and last:
            runs[-1] = (runs[-1][0], b)
        elif reads:
            runs.append((a, b))
        last = reads
    return runs


def reads_output(text: str | None, call_line: int | None, line: int) -> bool:
    """``line`` works on the model's output (``output_lines``)."""
    if text is None or call_line is None:
        return False
    return line in output_lines(text, call_line)


def grouped_output(
    lines: list[HostLine], text: str | None, path: str | None, call_line: int | None
) -> list[HostLine]:
    """``lines`` (costliest first) with the user's lines of each run of ``output_runs`` as one
    line from the run's first line to its last, holding their time. Its code is that of a line
    of it with a kind of its own (a logger, numpy), else the first's: that line's fix fits."""
    if text is None or path is None:
        return lines
    out = list(lines)
    for a, b in output_runs(text, call_line):
        # A loop already taken as one piece (over the items, over the tensors) stays its own.
        members = [
            ln for ln in lines if same_file(ln, path) and a <= ln.line <= b and ln.last_line is None
        ]
        if len(members) < 2:
            continue
        members.sort(key=lambda ln: ln.line)
        own = [m for m in members if kind_of(m) not in ("other", "metric")]
        chosen = max(own or members, key=lambda m: m.ms)
        code = statement_text(text, chosen.line) or chosen.code
        run = replace(members[0], code=code, ms=sum(m.ms for m in members), on_output=True,
                      share_pct=sum(m.share_pct for m in members), last_line=b)  # fmt: skip
        out = [ln for ln in out if ln not in members] + [run]
    return sorted(out, key=lambda ln: -ln.ms)
