"""A costly statement of the training loop run less often, or not at all (issue #50): which
statement that is for a line the host spends its time on, whether leaving it out of a step can
change what the training computes (then it is refused, with the reason), and the source with
the change made, which the what-if runs and the fix hands over as a diff.

A statement may be thinned where all it does is report or clean up: a call whose result is
discarded and that logs, prints, writes a file or a metric, or collects garbage / empties the
allocator's cache; a block made only of such statements (a loop over the parameters writing
their histograms); a call of the user's own function whose body is only that. Anything that can
change the training is refused: a name assigned there and read later, an attribute or an item
written, an in-place tensor method, ``backward``/``step``/an optimizer's or a scheduler's
update, drawing random numbers (the rest of the run would draw others), advancing an iterator,
control flow. Cleanup (``gc.collect()``, ``torch.cuda.empty_cache()``) is skipped; reporting
runs every ``every`` steps of the loop's own counter, or of one ``enumerate`` adds to the loop;
where no loop of the user's holds the model's call, of the counter a framework hands its step
hook (``step_hooks``: Lightning's ``batch_idx``). Objects the statements make and fill
themselves (a confusion matrix) are theirs to change (``fresh_objects``).
Pure text work with ``ast``: no imports of the user's code.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Literal

from .fresh_objects import made_here
from .fresh_objects import root_in as _root
from .patch import unified_diff
from .statement_patches import bodies, compiles, indent_of, is_log_name, step_counter
from .step_hooks import Function, batch_hook, reads_counter, step_hook

Mode = Literal["skip", "every"]

EVERY = 10
"""Steps between two runs of a thinned statement: a measured window of 20 steps runs it twice."""

_CLEANUP = frozenset(
    {"collect", "empty_cache", "ipc_collect", "synchronize", "reset_peak_memory_stats",
     "reset_max_memory_allocated", "sleep", "malloc_trim"}
)  # fmt: skip
_REPORT = frozenset(
    {"print", "pprint", "info", "debug", "warning", "warn", "error", "critical", "exception",
     "log", "write", "writelines", "flush", "set_postfix", "set_postfix_str", "set_description",
     "display", "log_dict", "log_metrics", "log_metric"}
)  # fmt: skip
# A summary writer's methods (TensorBoard's ``add_histogram``), besides what names a logger.
_WRITER = re.compile(r"add_(scalars?|histogram|images?|text|figure|pr_curve|embedding|hparams|"
                     r"graph|audio|video|mesh)")  # fmt: skip
# Calls that change what the training computes: its updates, its data, its random numbers.
_CHANGES = frozenset(
    {"backward", "step", "zero_grad", "update", "append", "extend", "insert", "pop", "popleft",
     "clear", "remove", "discard", "put", "put_nowait", "send", "setdefault", "next", "train",
     "eval", "load_state_dict", "register_buffer", "register_parameter", "add_module",
     "manual_seed", "seed", "shuffle", "sample", "rand", "randn", "randint", "randperm",
     "random", "choice", "normal", "uniform", "bernoulli", "multinomial", "dropout", "save",
     "prefetch", "requires_grad_", "set_"}
)  # fmt: skip


_CLIMBED = (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)
Scope = ast.For | ast.While | Function
"""What runs once a step: the loop around the model's call, or a framework's step hook."""
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class Thinning:
    """One statement (or one line of simple statements) of the step's loop to change."""

    first: int
    last: int
    mode: Mode
    every: int
    code: str
    """The statement's first line, stripped: the change said in words."""
    counter: str | None
    """The loop's own step counter (``every``); None: ``enumerate`` adds ``step``."""
    loop_line: int


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _changes_training(node: ast.AST, local: frozenset[str] = frozenset()) -> str | None:
    """The first call in ``node`` that can change what the training computes (a method of
    an object the statements being thinned made themselves, ``local``, changes only that)."""
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and not _root(n.func, local):
            name = _name(n.func)
            in_place = name.endswith("_") and not name.endswith("__") and len(name) > 1
            if name in _CHANGES or in_place:
                return name
    return None


def _is_report(name: str) -> bool:
    return name in _REPORT or bool(_WRITER.fullmatch(name)) or is_log_name(name)


class _Reader:
    """Whether statements only report or clean up, the user's own functions of one file looked
    into (one level deep)."""

    def __init__(self, *trees: ast.Module, depth: int = 1) -> None:
        self.depth = depth
        self.trees = trees
        self.defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        for tree in trees:
            for n in ast.walk(tree):
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.defs.setdefault(n.name, n)

    def why_not(
        self, stmt: ast.stmt, in_def: bool = False, local: frozenset[str] = frozenset()
    ) -> str | None:
        """None where ``stmt`` only reports or cleans up; else what it does besides.
        A plain name assigned is its block's own: the caller checks who reads it. ``in_def``:
        inside a function of the user's (a ``return`` ends only that). ``local``: names bound
        to objects the statements before it made (``made_here``), which it may fill."""
        bad = _changes_training(stmt, local)
        if bad is not None:
            return f"it calls `{bad}()`, which can change what the training computes"
        if isinstance(stmt, ast.Expr):
            return self._call_why_not(stmt.value, local)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, (ast.Attribute, ast.Subscript)) and not _root(n, local):
                        return f"it writes `{ast.unparse(n)}`, which the training may read"
            return None
        if isinstance(stmt, ast.AugAssign):
            if _root(stmt.target, local):
                return None
            return f"it updates `{ast.unparse(stmt.target)}`"
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.If, ast.With, ast.AsyncWith, ast.Try)):
            for body in bodies(stmt):
                for s in body:
                    why = self.why_not(s, in_def, local)
                    if why is not None:
                        return why
                    local = local | made_here(s)
            return None
        if isinstance(stmt, ast.Pass):
            return None
        if isinstance(stmt, ast.Return) and in_def:
            return None
        kind = type(stmt).__name__.lower()
        return f"it is a `{kind}` statement, which steers the loop"

    def _call_why_not(self, value: ast.expr, local: frozenset[str] = frozenset()) -> str | None:
        if isinstance(value, (ast.Constant, ast.Name)):
            return None
        if isinstance(value, ast.Await):
            value = value.value
        if not isinstance(value, ast.Call):
            return f"`{ast.unparse(value)[:40]}` is not a call gpusight can judge"
        name = _name(value.func)
        if name in _CLEANUP or _is_report(name) or _root(value.func, local):
            return None
        own = self.defs.get(name)
        if own is not None and self.depth > 0:
            inner = _Reader(*self.trees, depth=self.depth - 1)
            for s in own.body:
                why = inner.why_not(s, in_def=True)
                if why is not None:
                    return f"it calls `{name}()` (line {own.lineno}), where {why}"
            return None
        return (
            f"it calls `{name or ast.unparse(value.func)}()`, which gpusight cannot tell only "
            "reports: it may change what the training computes"
        )


def is_cleanup(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and _name(stmt.value.func) in _CLEANUP
    )


def _chain(body: list[ast.stmt], line: int) -> list[ast.stmt]:
    """The statements from ``body`` down to the innermost one spanning ``line``."""
    for stmt in body:
        if stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno):
            for inner in bodies(stmt):
                if inner[0].lineno <= line <= (inner[-1].end_lineno or inner[-1].lineno):
                    return [stmt, *_chain(inner, line)]
            return [stmt]
    return []


def step_loop(tree: ast.Module, call_line: int) -> ast.For | ast.While | None:
    """The loop of the training steps around the line that calls the model: the innermost that
    also takes the optimizer's step (a loop of micro-batches inside it, as in gradient
    accumulation, is not), else the innermost."""
    loops = [s for s in _chain(tree.body, call_line) if isinstance(s, (ast.For, ast.While))]
    stepping = [lp for lp in loops if _calls_name(lp, "step")]
    return stepping[-1] if stepping else (loops[-1] if loops else None)


def step_scope(tree: ast.Module, call_line: int) -> tuple[Scope, str | None] | None:
    """What runs once a step around the model's call, with its step counter: the loop
    (``_counter``), else the framework's step hook that holds the call (``step_hooks``)."""
    loop = step_loop(tree, call_line)
    if loop is not None:
        return loop, _counter(loop)
    hook = step_hook(tree, call_line)
    return None if hook is None else (hook.function, hook.counter)


def _names_read(nodes: list[ast.stmt]) -> set[str]:
    return {
        n.id
        for s in nodes
        for n in ast.walk(s)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }


def _assigned(stmt: ast.stmt) -> set[str]:
    """The plain names ``stmt`` binds: assignments, loop targets, ``with ... as``."""
    return {
        n.id
        for s in ast.walk(stmt)
        if isinstance(s, ast.Name) and isinstance(s.ctx, ast.Store)
        for n in [s]
    }


def _names_read_outside(loop: Scope, group: list[ast.stmt]) -> set[str]:
    inside = {id(n) for s in group for n in ast.walk(s)}
    return {
        n.id
        for n in ast.walk(loop)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in inside
    }


def _calls_name(stmt: ast.stmt, name: str) -> bool:
    return any(isinstance(n, ast.Call) and _name(n.func) == name for n in ast.walk(stmt))


def plan(
    source: str,
    call_line: int,
    line: int,
    *,
    function: str | None = None,
    elsewhere: str | None = None,
    every: int = EVERY,
    through: int | None = None,
) -> Thinning | str:
    """What to change for the costly ``line`` of ``source`` (its loop around the model's call
    at ``call_line``), or why it cannot be left out of a step. ``function``: where the line is
    in a function of the user's called from the loop (``Logger.add_histogram``), its name; the
    call of it in the loop is then the statement. ``elsewhere``: the text of the file that holds
    ``line`` where that is not ``source``. ``through``: the statements after it in its block
    up to this line go with it (a metric and the logger's line that reads it)."""
    try:
        tree = ast.parse(source)
        other = ast.parse(elsewhere) if elsewhere is not None else None
    except SyntaxError:
        return "the file does not parse"
    # A framework's once-a-batch hook that holds the line is its step (a callback's
    # ``on_train_batch_end``), wherever the model's call is.
    own = batch_hook(tree, line) if other is None else None
    scope = (own.function, own.counter) if own is not None else step_scope(tree, call_line)
    if scope is None:
        return f"no loop around the model's call (line {call_line}) in this file"
    loop, counter = scope
    end = loop.end_lineno or loop.lineno
    target_line = line
    if other is not None or not (loop.body[0].lineno <= line <= end):
        short = (function or "").rsplit(".", 1)[-1]
        if in_forward(function):
            return (
                f"line {line} is in `{function}`, which the model's call runs: the step "
                "computes with it on every step"
            )
        if in_loading(function):
            return (
                f"line {line} is in `{function}`, which the DataLoader runs to make each batch: "
                "every item needs it; DataLoader workers run it beside the step"
            )
        calls = [s for s in ast.walk(loop) if isinstance(s, ast.stmt) and short
                 and not any(True for _ in bodies(s)) and _calls_name(s, short)]  # fmt: skip
        if not calls:
            return f"line {line} is not in the loop around the model's call (line {call_line})"
        target_line = calls[0].lineno
    chain = _chain(loop.body, target_line)
    if not chain:
        return f"line {line} is in the loop's header"
    reader = _Reader(tree) if other is None else _Reader(tree, other)
    kept = through if other is None else None
    return _choose(source, tree, reader, (loop, counter), chain, every, kept)


def _choose(
    source: str,
    tree: ast.Module,
    reader: _Reader,
    scope: tuple[Scope, str | None],
    chain: list[ast.stmt],
    every: int,
    through: int | None = None,
) -> Thinning | str:
    loop, counter = scope
    inner = chain[-1]
    why = reader.why_not(inner)
    if why is not None:
        return f"line {inner.lineno} cannot be left out of a step: {why}"
    # The outermost loop or ``with`` of the chain that only reports: a loop over the
    # parameters around one histogram call is thinned whole (an ``if`` stays: its test may be
    # on the step already).
    at = len(chain) - 1
    while at > 0 and isinstance(chain[at - 1], _CLIMBED) and reader.why_not(chain[at - 1]) is None:
        at -= 1
    block = _block_of(loop, chain, at)
    group = _on_its_lines(block, chain[at])
    if through is not None:
        group += [s for s in block[block.index(group[-1]) + 1 :] if s.lineno <= through]
    local: frozenset[str] = frozenset()
    for s in group:
        why = reader.why_not(s, local=local)
        if why is not None:
            return f"line {s.lineno} cannot be left out of a step: {why}"
        local = local | made_here(s)
    watched = _monitored_log(tree, group)
    if watched is not None:
        return watched
    first, last = group[0].lineno, max(s.end_lineno or s.lineno for s in group)
    # Who reads what the group assigns: the rest of the loop (its next step too), its header,
    # the code after it.
    # A step hook's names are its own call's: no code after it reads them.
    after = [] if isinstance(loop, _FUNCTIONS) else _after_loop(tree, loop)
    read = _names_read_outside(loop, group) | _names_read(after)
    kept = sorted({n for s in group for n in _assigned(s)} & read)
    if kept:
        return (
            f"line {first} assigns `{kept[0]}`, which other code of the loop reads: leaving "
            "it out of a step would change what the loop does"
        )
    lines = source.splitlines(keepends=True)
    if len(indent_of(lines, first).encode("utf-8")) != group[0].col_offset:
        return f"line {first} holds another statement before this one"
    mode: Mode = "skip" if all(is_cleanup(s) for s in group) else "every"
    if mode == "every":
        if isinstance(loop, ast.While) and counter is None:
            return f"the loop at line {loop.lineno} has no step counter to run line {first} by"
        if counter is not None and any(
            isinstance(p, ast.If) and reads_counter(p.test, counter) for p in chain[:at]
        ):
            return f"line {first} already runs only on some steps (a condition on `{counter}`)"
    return Thinning(first, last, mode, every, lines[first - 1].strip(), counter, loop.lineno)


def _monitored(tree: ast.Module) -> set[str]:
    """The metrics a ``monitor`` names: a checkpoint's, early stopping's
    (``ModelCheckpoint(monitor="val_loss")``), a scheduler's (``{"monitor": "train_loss"}``)."""
    out = set()
    for n in ast.walk(tree):
        value: ast.expr | None
        if isinstance(n, ast.keyword) and n.arg == "monitor":
            value = n.value
        elif isinstance(n, ast.Dict):
            pairs = zip(n.keys, n.values, strict=True)
            value = next((v for k, v in pairs if isinstance(k, ast.Constant)
                          and k.value == "monitor"), None)  # fmt: skip
        else:
            continue
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            out.add(value.value)
    return out


def _monitored_log(tree: ast.Module, group: list[ast.stmt]) -> str | None:
    """Why a logger's line of ``group`` must run on every step: it logs a metric that a
    ``monitor`` reads, whose choice (the checkpoint kept, when to stop, the learning rate)
    would change if it were logged on fewer steps."""
    watched = _monitored(tree)
    for s in group:
        for n in ast.walk(s):
            if not (isinstance(n, ast.Call) and n.args):
                continue
            keys = [n.args[0]]
            if isinstance(keys[0], ast.Dict):
                keys = [k for k in keys[0].keys if k is not None]
            for k in keys:
                if isinstance(k, ast.Constant) and k.value in watched:
                    return (
                        f"line {n.lineno} logs `{k.value}`, which a `monitor=` reads (a "
                        "checkpoint, early stopping or a learning-rate schedule): logged on "
                        "fewer steps, it could choose otherwise"
                    )
    return None


def _block_of(loop: Scope, chain: list[ast.stmt], at: int) -> list[ast.stmt]:
    """The block that holds ``chain[at]``."""
    parent: ast.stmt = loop if at == 0 else chain[at - 1]
    return next(b for b in bodies(parent) if chain[at] in b)


def _on_its_lines(block: list[ast.stmt], stmt: ast.stmt) -> list[ast.stmt]:
    """``stmt`` and the statements sharing a line with it (``gc.collect(); empty_cache()``)."""
    group = [stmt]
    i = block.index(stmt)
    for s in block[i + 1 :]:
        if s.lineno != (group[-1].end_lineno or group[-1].lineno):
            break
        group.append(s)
    return group


def in_forward(function: str | None) -> bool:
    """Whether a line of ``function`` is a module's ``forward``: the step's computation, which
    every step runs and none is thinned."""
    return (function or "").rsplit(".", 1)[-1] == "forward"


_LOADING = frozenset({"__getitem__", "__getitems__", "__iter__", "__next__", "collate_fn"})


def in_loading(function: str | None) -> bool:
    """Whether a line of ``function`` makes the batches: a Dataset's ``__getitem__`` (or an
    iterable one's ``__iter__``), a collate function."""
    return (function or "").rsplit(".", 1)[-1] in _LOADING


def _after_loop(tree: ast.Module, loop: ast.stmt) -> list[ast.stmt]:
    """The statements after the loop in its own block."""
    for node in ast.walk(tree):
        # A lambda's or a conditional expression's body is an expression, not a block.
        blocks = bodies(node) if isinstance(node, ast.stmt) else [getattr(node, "body", [])]
        for body in (b for b in blocks if isinstance(b, list)):
            if loop in body:
                return body[body.index(loop) + 1 :]
    return []


def _counter(loop: ast.For | ast.While) -> str | None:
    """The loop's own step counter (``enumerate``'s, ``range``'s), else a name its body counts
    up by one once a step (``iter_num += 1``, as in a ``while True:``)."""
    if isinstance(loop, ast.For) and (name := step_counter(loop)) is not None:
        return name
    counted = [
        s.target.id
        for s in loop.body
        if isinstance(s, ast.AugAssign)
        and isinstance(s.op, ast.Add)
        and isinstance(s.target, ast.Name)
        and isinstance(s.value, ast.Constant)
        and s.value.value == 1
    ]
    return counted[0] if len(counted) == 1 else None


def _free_name(tree: ast.Module) -> str:
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return next(n for n in ("step", "gs_step", "gs_step_") if n not in used)


def _enumerated(lines: list[str], tree: ast.Module, loop: ast.For) -> tuple[list[str], str] | None:
    """The loop's header as ``for step, target in enumerate(iter):``, where it is on one line."""
    t, it = loop.target, loop.iter
    if not (loop.lineno == t.lineno == it.lineno == (it.end_lineno or it.lineno)):
        return None
    raw = lines[loop.lineno - 1].encode("utf-8")
    tc, tend = t.col_offset, t.end_col_offset or t.col_offset
    ic, iend = it.col_offset, it.end_col_offset or it.col_offset
    name = _free_name(tree)
    target = raw[tc:tend].decode("utf-8")
    if isinstance(t, ast.Tuple) and not target.startswith("("):
        target = f"({target})"
    new = (
        raw[:tc].decode("utf-8") + f"{name}, {target}" + raw[tend:ic].decode("utf-8")
        + f"enumerate({raw[ic:iend].decode('utf-8')})" + raw[iend:].decode("utf-8")
    )  # fmt: skip
    out = list(lines)
    out[loop.lineno - 1] = new
    return out, name


def thinned_text(source: str, t: Thinning) -> str | None:
    """``source`` with the change made and compiled; None where it cannot be made."""
    lines = source.splitlines(keepends=True)
    tree = ast.parse(source)
    first, last = t.first, t.last
    indent = indent_of(lines, first)
    if t.mode == "skip":
        kept = lines[: first - 1] + lines[last:]
        if _only_statement(tree, first, last):
            kept.insert(first - 1, indent + "pass\n")
        new = "".join(kept)
        return new if new != source and compiles(new) else None
    loop = next((n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While, *_FUNCTIONS))
                 and n.lineno == t.loop_line), None)  # fmt: skip
    if loop is None:
        return None
    counter = t.counter
    if counter is None:
        if not isinstance(loop, ast.For):
            return None
        got = _enumerated(lines, tree, loop)
        if got is None:
            return None
        lines, counter = got
    unit = _unit_of(lines, loop, indent)
    block = [unit + ln if ln.strip() else ln for ln in lines[first - 1 : last]]
    if not block[-1].endswith("\n"):
        block[-1] += "\n"
    head = f"{indent}if {counter} % {t.every} == 0:  # gpusight: every {t.every} steps\n"
    new = "".join([*lines[: first - 1], head, *block, *lines[last:]])
    return new if new != source and compiles(new) else None


def _only_statement(tree: ast.Module, first: int, last: int) -> bool:
    """Whether the lines ``first``..``last`` hold all of their block (removed, ``pass``
    stands in)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt):
            for body in bodies(node):
                if body[0].lineno == first and (body[-1].end_lineno or body[-1].lineno) <= last:
                    return True
    return False


def _unit_of(lines: list[str], loop: Scope, indent: str) -> str:
    """One indentation level as the loop writes it."""
    outer = indent_of(lines, loop.lineno)
    inner = indent_of(lines, loop.body[0].lineno)
    if inner.startswith(outer) and len(inner) > len(outer):
        return inner[len(outer) :]
    return "\t" if "\t" in indent else "    "


def thinned_patch(source: str, t: Thinning, shown: str) -> str | None:
    new = thinned_text(source, t)
    return None if new is None else unified_diff(source, new, shown)


def said(t: Thinning, offset: int = 0) -> str:
    """The change in words: "line 24 `gc.collect()` skipped", "lines 27-29 `acc = ...` every 10
    steps" (``offset``: lines the user is shown above the code, a cell's magic line)."""
    code = t.code if len(t.code) <= 48 else t.code[:45] + "..."
    where = f"line {t.first + offset}" if t.last == t.first else f"lines {span(t, offset)}"
    if t.mode == "skip":
        return f"{where} `{code}` skipped"
    return f"{where} `{code}` every {t.every} steps"


def span(t: Thinning, offset: int = 0) -> str:
    """``27`` for one line, ``27-29`` for more."""
    a, b = t.first + offset, t.last + offset
    return str(a) if a == b else f"{a}-{b}"
