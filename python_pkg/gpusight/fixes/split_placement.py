"""Modules left on the CPU beside a model on the GPU, moved to its device as a change of the
user's own lines (``code.device_mismatch``, ``rules/split_placement.py``).

For each module the loop calls (``logits = head(feats.cpu())``), made before the loop in the same
scope: ``head = head.to(dev)`` after the statement that makes it (before an optimizer built after
it, which then sees the moved parameters), the copies to the CPU that feed its call removed, and
what meets its output in the loop moved with it: a name of the loop's batch is moved first thing
in the loop, a name bound in the loop by a copy to the CPU loses that copy. What reads the output
only on the host (``.item()``, ``.cpu()``) meets nothing. Where a name its input or output meets
is made in the loop any other way, a moved name is read on the host (``y.numpy()``), or the
module is not made before the loop, there is no patch: one that breaks the script is worse than
the finding's snippet. A name made before the loop is taken for what it mostly is there (a
function, a module, a number), not a host tensor. Pure text work: no torch.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .module_source import binding_in_loop, cpu_copies, module_site, to_cpu
from .placement import alone, host_only, target_batch
from .statement_patches import compiles, indent_of
from .where_made import At, ModelSite, at_line

_HOST_READS = frozenset({"item", "tolist", "numpy"})


def _host_read(node: ast.AST) -> bool:
    """A value brought to the host: a copy to the CPU, ``.item()``, ``.tolist()``, ``.numpy()``."""
    if to_cpu(node):
        return True
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _HOST_READS
    )


def _device_reads(node: ast.AST, skip: ast.AST | None = None) -> set[str]:
    """Names ``node`` reads as device values: not inside a host read, nor inside ``skip``."""
    out: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n is skip or _host_read(n):
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            out.add(n.id)
        stack.extend(ast.iter_child_nodes(n))
    return out


def _stored(stmt: ast.stmt) -> set[str]:
    return {
        n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }


@dataclass
class _Plan:
    """The edits, by position, so that several modules' edits combine into one text."""

    removed: dict[tuple[int, int], tuple[int, str]] = field(default_factory=dict)
    """(line, column) of a copy -> (its end column, the receiver's text that replaces it)."""
    dropped: set[int] = field(default_factory=set)
    """Lines of statements that only copied a name to the CPU (``y = y.cpu()``)."""
    after: dict[int, tuple[str, list[str]]] = field(default_factory=dict)
    """Line after which to insert -> (indentation, lines): the modules moved where made."""
    before: dict[int, tuple[str, list[str]]] = field(default_factory=dict)
    """Line before which to insert -> (indentation, batch names): the batch moved in the loop."""


def _remove(plan: _Plan, source: str, copy: ast.Call) -> bool:
    """The copy replaced by what it copies; False for one over several lines."""
    if copy.lineno != copy.end_lineno or not isinstance(copy.func, ast.Attribute):
        return False
    receiver = ast.get_source_segment(source, copy.func.value)
    if receiver is None:
        return False
    plan.removed[(copy.lineno, copy.col_offset)] = (copy.end_col_offset or 0, receiver)
    return True


def _only_copies(stmt: ast.stmt, name: str) -> bool:
    """``name = name.cpu()``: a statement that goes once its copy does."""
    v = stmt.value if isinstance(stmt, ast.Assign) else None
    return (
        isinstance(stmt, ast.Assign)
        and [getattr(t, "id", None) for t in stmt.targets] == [name]
        and v is not None
        and to_cpu(v)
        and isinstance(v, ast.Call)
        and isinstance(v.func, ast.Attribute)
        and getattr(v.func.value, "id", None) == name
    )


def _to_device(value: ast.expr) -> bool:
    """A value moved to a device in the loop (``x.to(dev)``, ``x.cuda()``), not to the CPU."""
    return any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in ("to", "cuda")
        and not to_cpu(n)
        for n in ast.walk(value)
    )


def _follow(plan: _Plan, source: str, at: At, name: str, outs: set[str], moves: list[str]) -> bool:
    """``name`` meets the module's input or output at ``at``: how it comes to the device with
    it (added to ``plan`` or ``moves``); False where that is not known."""
    if name in outs:
        return True
    bound = binding_in_loop(at, name)
    loop = at.chain[at.inner_loop or 0][1]
    if bound is None:
        if name in (target_batch(loop) or []) and name not in moves:
            moves.append(name)
        return True  # else made before the loop: a function, a module, a number
    if not isinstance(bound, ast.Assign):
        return False
    copies = cpu_copies(bound.value)
    if copies and _only_copies(bound, name) and bound.lineno == bound.end_lineno:
        plan.dropped.add(bound.lineno)
        return True
    if copies:
        return all(_remove(plan, source, c) for c in copies)
    return _to_device(bound.value) or bool(_stored(bound) & outs)


def _plan_module(plan: _Plan, source: str, site: ModelSite, device: str, lines: list[str]) -> bool:
    """The edits that move one module (see the module's docstring); False where not sure."""
    at, call = site.at, site.call
    k = at.inner_loop
    if k is None:
        return False
    loop = at.chain[k][1]
    body: list[ast.stmt] = getattr(loop, "body", [])
    moves: list[str] = []
    args: list[ast.expr] = [*call.args, *(kw.value for kw in call.keywords)]
    if not all(_remove(plan, source, c) for a in args for c in cpu_copies(a)):
        return False
    ins = {n for a in args for n in _device_reads(a)}
    stmt = at.chain[-1][1]
    outs = _stored(stmt) if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else set()
    meets = _device_reads(stmt, skip=call)
    for name in sorted(ins | meets):
        if not _follow(plan, source, at, name, set(), moves):
            return False
    if not _follow_output(plan, source, loop, stmt, outs, moves):
        return False
    if moves:
        if host_only(loop, moves) or not alone(lines, body, body[0]):
            return False
        got = plan.before.setdefault(body[0].lineno, (indent_of(lines, body[0].lineno), []))
        got[1].extend(n for n in moves if n not in got[1])
    name, made = site.model, site.made
    end = made.end_lineno or made.lineno
    got = plan.after.setdefault(end, (indent_of(lines, made.lineno), []))
    move = f"{name} = {name}.to({device})"
    if move not in got[1]:
        got[1].append(move)
    return True


def _follow_output(
    plan: _Plan, source: str, loop: ast.stmt, stmt: ast.stmt, outs: set[str], moves: list[str]
) -> bool:
    """The statements of the loop after ``stmt`` that use its output on the device: what they
    meet follows it, and what they bind is output too."""
    tree = ast.Module(body=[loop], type_ignores=[])
    later = [
        s
        for s in ast.walk(loop)
        if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return))
        and s.lineno > (stmt.end_lineno or stmt.lineno)
    ]
    for s in sorted(later, key=lambda s: s.lineno):
        reads = _device_reads(s)
        if not reads & outs:
            continue
        at = at_line(tree, s.lineno)
        if at is None or at.inner_loop is None:
            return False
        for name in sorted(reads - outs):
            if not _follow(plan, source, at, name, outs, moves):
                return False
        outs |= _stored(s)
    return True


def _apply(source: str, plan: _Plan, device: str) -> str:
    lines = source.splitlines(keepends=True)
    for (line, col), (end, receiver) in sorted(plan.removed.items(), reverse=True):
        row = lines[line - 1]
        raw = row.encode("utf-8")
        lines[line - 1] = (raw[:col] + receiver.encode("utf-8") + raw[end:]).decode("utf-8")
    edits: list[tuple[int, int, list[str]]] = []  # (index, lines removed, lines inserted)
    for line in plan.dropped:
        edits.append((line - 1, 1, []))
    for line, (indent, block) in plan.after.items():
        edits.append((line, 0, [f"{indent}{b}\n" for b in block]))
    for line, (indent, names) in plan.before.items():
        moved = ", ".join(f"{n}.to({device}, non_blocking=True)" for n in names)
        edits.append((line - 1, 0, [f"{indent}{', '.join(names)} = {moved}\n"]))
    for index, drop, block in sorted(edits, key=lambda e: (-e[0], -e[1])):
        if index > 0 and not lines[index - 1].endswith("\n"):
            lines[index - 1] += "\n"
        lines[index : index + drop] = block
    return "".join(lines)


def move_text(source: str, calls: list[tuple[int, int | None]], device: str) -> str | None:
    """``source`` with the modules called at ``calls`` (line, and the call's first column where
    the watch told) moved to ``device`` (the script's own expression for it: ``dev``,
    ``"cuda"``), the copies that feed them removed and what meets their output moved with it;
    compiled first. None where any of it is not known for sure (see the module's docstring)."""
    plan = _Plan()
    lines = source.splitlines(keepends=True)
    for line, col in calls:
        site = module_site(source, line, col)
        if site is None or not _plan_module(plan, source, site, device, lines):
            return None
    new = _apply(source, plan, device)
    return new if new != source and compiles(new) else None
