"""The loops of the user's file around a timed line (pure: ``ast`` on the file's text as the run
saw it). A ``for`` header's time is the wait for the next batch, except where the loop iterates
a model's tensors: that header is host work of its own (``zip(ema.parameters(),
model.parameters())`` to update an EMA copy). The lines of a loop over a model's tensors are
one piece of work: a Python loop that runs an op per tensor, where one ``torch._foreach_*``
call would do."""

from __future__ import annotations

import ast
import functools
import os
from dataclasses import replace

from .host_line_fix import TENSOR_ITERS, HostLine, kind_of, reads_values


@functools.lru_cache(maxsize=8)
def parsed(text: str) -> ast.Module | None:
    """The user's file as the run saw it, parsed once for every rule that reads it; None where
    it does not parse."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


@functools.lru_cache(maxsize=8)
def _loops(text: str) -> tuple[tuple[int, int, str], ...]:
    """Each ``for`` statement's first and last line and its iterable's source."""
    tree = parsed(text)
    if tree is None:
        return ()
    return tuple(
        (node.lineno, node.end_lineno or node.lineno, ast.unparse(node.iter))
        for node in ast.walk(tree)
        if isinstance(node, ast.For | ast.AsyncFor)
    )


def same_file(ln: HostLine, path: str) -> bool:
    return os.path.basename(ln.file) == os.path.basename(path)


def is_tensor_loop(text: str, header: int) -> bool:
    """The ``for`` statement at ``header`` iterates a model's tensors. Another loop's header
    stays the wait for data: the loop around the model's call may be in another function than
    the call (``for batch in loader: train_step(batch)``)."""
    return any(a == header and any(t in it for t in TENSOR_ITERS) for a, _, it in _loops(text))


def parameter_loop(text: str, line: int) -> tuple[int, int] | None:
    """The innermost loop over a model's tensors that holds ``line``, as (first, last) line."""
    spans = [
        (a, b) for a, b, it in _loops(text) if a <= line <= b and any(t in it for t in TENSOR_ITERS)
    ]
    return max(spans) if spans else None


def grouped(lines: list[HostLine], text: str | None, path: str | None) -> list[HostLine]:
    """``lines`` (costliest first) with each loop over a model's tensors as one line from its
    header to its last line (``HostLine.last_line``), holding the loop's time. Its code is the
    header's, or that of a line of it that has a kind of its own (a logger, numpy): that
    line's fix is the one that fits."""
    if text is None or path is None:
        return lines
    spans: dict[tuple[int, int], list[HostLine]] = {}
    for ln in lines:
        span = parameter_loop(text, ln.line) if same_file(ln, path) and not ln.in_forward else None
        if span is not None:
            spans.setdefault(span, []).append(ln)
    out, source = list(lines), text.splitlines()
    for (a, b), members in spans.items():
        own = [m.code for m in members if kind_of(m) != "other" or reads_values(m)]
        code = own[0] if own else (source[a - 1].strip() if a <= len(source) else None)
        loop = replace(members[0], line=a, code=code, ms=sum(m.ms for m in members),
                       share_pct=sum(m.share_pct for m in members), last_line=b)  # fmt: skip
        out = [ln for ln in out if ln not in members] + [loop]
    return sorted(out, key=lambda ln: -ln.ms)
