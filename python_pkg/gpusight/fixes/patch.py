"""A fix as a change to the user's own line: the DataLoader call they wrote, with new arguments.

Given the text of the user's file and the line where their ``DataLoader(...)`` call starts, the
call's keyword arguments are set (an existing one's value replaced, a missing one added after the
last argument, whatever the call's formatting), the new file is compiled to prove it still
parses, and the change comes back as a unified diff that ``patch -p1`` and ``git apply`` accept
from the directory the paths are relative to. Pure text work: no torch, no imports of the code.
"""

from __future__ import annotations

import ast
import difflib

LOADER_NAMES = ("DataLoader",)


def called_name(node: ast.Call) -> str | None:
    """The name a call calls: ``f`` for ``f(...)``, ``g`` for ``a.b.g(...)``."""
    f = node.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return None


def find_call(tree: ast.AST, line: int, names: tuple[str, ...] = LOADER_NAMES) -> ast.Call | None:
    """The call of one of ``names`` whose source spans ``line`` (the innermost if nested)."""
    best: ast.Call | None = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or called_name(node) not in names:
            continue
        end = node.end_lineno or node.lineno
        if node.lineno <= line <= end and (best is None or node.lineno >= best.lineno):
            best = node
    return best


def _offset(lines: list[str], line: int, col: int) -> int:
    """Character offset of (1-based line, 0-based UTF-8 byte column) in the joined text."""
    before = sum(len(x) for x in lines[: line - 1])
    return before + len(lines[line - 1].encode("utf-8")[:col].decode("utf-8", "replace"))


# DataLoader's parameters that may be given by position, in order.
LOADER_POSITIONAL = (
    "dataset",
    "batch_size",
    "shuffle",
    "sampler",
    "batch_sampler",
    "num_workers",
    "collate_fn",
    "pin_memory",
    "drop_last",
    "timeout",
    "worker_init_fn",
    "multiprocessing_context",
    "generator",
)


def set_call_keywords(
    source: str,
    line: int,
    values: dict[str, str],
    names: tuple[str, ...] = LOADER_NAMES,
    positional: tuple[str, ...] = LOADER_POSITIONAL,
) -> str | None:
    """``source`` with the call of one of ``names`` (the DataLoader's by default) at ``line``
    given ``values`` (keyword -> Python source), or None when there is no such call or the
    result would not compile. ``positional``: the call's parameters that may come by position."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    call = find_call(tree, line, names)
    if call is None or call.end_lineno is None or call.end_col_offset is None:
        return None
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        kw.arg is None for kw in call.keywords
    ):
        return None  # *args / **kwargs may hold the setting already: no safe edit
    present: dict[str, ast.expr] = {
        name: arg for name, arg in zip(positional, call.args, strict=False)
    }
    present.update({kw.arg: kw.value for kw in call.keywords if kw.arg is not None})
    missing = []
    for key, value in values.items():
        node = present.get(key)
        if node is not None and node.end_lineno is not None:
            # Given already (by keyword, or by position: DataLoader(ds, 32)): its value changes.
            a = _offset(lines, node.lineno, node.col_offset)
            b = _offset(lines, node.end_lineno, node.end_col_offset or 0)
            edits.append((a, b, value))
        else:
            missing.append(f"{key}={value}")
    if missing:
        last = [*call.args, *(kw.value for kw in call.keywords)]
        text = ", ".join(missing)
        if last:
            end = max(last, key=lambda n: (n.end_lineno or 0, n.end_col_offset or 0))
            at = _offset(lines, end.end_lineno or end.lineno, end.end_col_offset or 0)
            edits.append((at, at, ", " + text))
        else:
            # DataLoader() has no arguments to follow: just before the closing parenthesis.
            at = _offset(lines, call.end_lineno, call.end_col_offset) - 1
            edits.append((at, at, text))
    out = source
    for a, b, text in sorted(edits, reverse=True):
        out = out[:a] + text + out[b:]
    try:
        compile(out, "<patched>", "exec")
    except SyntaxError:
        return None
    return out


def unified_diff(old: str, new: str, path: str) -> str:
    """``old`` -> ``new`` as a unified diff of ``path`` (``a/path``, ``b/path``: ``patch -p1``)."""
    diff = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=f"a/{path}",
        tofile=f"b/{path}",
    )
    text = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                   for line in diff)  # fmt: skip
    return text


def call_patch(
    source: str, line: int, path: str, values: dict[str, object], names: tuple[str, ...]
) -> str | None:
    """The diff that sets keyword-only ``values`` in the call of one of ``names`` at ``line``."""
    new = set_call_keywords(source, line, {k: repr(v) for k, v in values.items()}, names, ())
    if new is None or new == source:
        return None
    return unified_diff(source, new, path)


def loader_patch(source: str, line: int, path: str, values: dict[str, object]) -> str | None:
    """The diff that sets ``values`` in the DataLoader call at ``line`` of ``path``, or None."""
    new = set_call_keywords(source, line, {k: repr(v) for k, v in values.items()})
    if new is None or new == source:
        return None
    return unified_diff(source, new, path)
