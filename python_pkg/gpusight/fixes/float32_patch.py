"""The float64 finding's fix as a change to the user's own lines: ``.double()`` becomes
``.float()``, a float64 dtype (``torch.float64``, ``torch.double``, ``np.float64``, ``"float64"``)
becomes float32, and a tensor made from a float64 array (``torch.from_numpy(a)``,
``torch.tensor(a)``) is made float32 where it is made (``.float()`` after the call). Where no
line is known, the generic snippet in the user's names (the model and the input of the line
that calls the model).

Only expressions on one line, on the lines named, are edited, and the result is compiled before
its diff is returned; anything else leaves the snippet alone. Pure text work: no torch.
"""

from __future__ import annotations

import ast

from ..report import Fix
from ..rules.float64_source import float64_nodes
from ..rules.workload_evidence import CodeSource, Float64Line
from .kernel_names import rename
from .workload_patches import statement_fix

MAKERS = frozenset({"from_numpy", "tensor", "as_tensor"})
_FLOAT32 = {"float64": "float32", "double": "float32", "DoubleTensor": "FloatTensor"}
_TYPED = frozenset({"float", "double", "to", "type", "half", "bfloat16"})
"""Methods that give a maker's result its dtype right after it: no ``.float()`` is added."""

Edit = tuple[int, int, int, str]
"""(line, start, end, replacement), columns in bytes of the line's UTF-8 text (as ``ast``)."""


def _one_line(node: ast.AST, lines: set[int]) -> bool:
    line = getattr(node, "lineno", None)
    return line in lines and getattr(node, "end_lineno", None) == line


def _string_edits(call: ast.Call) -> list[Edit]:
    """The dtype strings of a call (``astype("float64")``, ``dtype="double"``), as float32."""
    values = [*call.args, *(k.value for k in call.keywords if k.arg == "dtype")]
    out: list[Edit] = []
    for v in values:
        if isinstance(v, ast.Constant) and isinstance(v.value, str) and v.end_col_offset:
            new = v.value.replace("float64", "float32").replace("double", "float32")
            if new != v.value:
                out.append((v.lineno, v.col_offset + 1, v.end_col_offset - 1, new))
    return out


def _dtype_edits(tree: ast.AST, lines: set[int]) -> list[Edit]:
    """``.double()`` -> ``.float()``; a float64 dtype -> float32 (the attribute or string)."""
    out: list[Edit] = []
    for node, what in float64_nodes(tree):
        if not _one_line(node, lines):
            continue
        if what == ".double()":
            assert isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            end = node.func.end_col_offset or 0
            out.append((node.lineno, end - len("double"), end, "float"))
        elif isinstance(node, ast.Attribute) and node.end_col_offset:
            end = node.end_col_offset
            out.append((node.lineno, end - len(node.attr), end, _FLOAT32[node.attr]))
        elif isinstance(node, ast.Call):
            out.extend(_string_edits(node))
    return out


def _maker_edits(tree: ast.AST, lines: set[int]) -> list[Edit]:
    """``torch.from_numpy(a)`` -> ``torch.from_numpy(a).float()``, where the call gives no
    dtype of its own and none is given right after it."""
    parents = {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    out: list[Edit] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _one_line(node, lines)):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name not in MAKERS or any(k.arg == "dtype" for k in node.keywords):
            continue
        parent = parents.get(id(node))
        if isinstance(parent, ast.Attribute) and parent.attr in _TYPED:
            continue
        end = node.end_col_offset or 0
        out.append((node.lineno, end, end, ".float()"))
    return out


def _apply(text: str, edits: list[Edit]) -> str:
    lines = text.splitlines(keepends=True)
    taken: dict[int, int] = {}  # line -> start of the last edit made on it (edits go right to left)
    for line, start, end, new in sorted(edits, key=lambda e: (e[0], -e[1])):
        if end > taken.get(line, 1 << 30):
            continue  # overlaps an edit already made
        raw = lines[line - 1].encode("utf-8")
        lines[line - 1] = (raw[:start] + new.encode("utf-8") + raw[end:]).decode("utf-8")
        taken[line] = start
    return "".join(lines)


def float32_text(text: str, lines: list[int]) -> str | None:
    """``text`` with the float64 on ``lines`` made float32; None where nothing could be changed
    safely."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    wanted = set(lines)
    edits = _dtype_edits(tree, wanted) + _maker_edits(tree, wanted)
    if not edits:
        return None
    new = _apply(text, edits)
    try:
        ast.parse(new)
    except SyntaxError:
        return None
    return new if new != text else None


def forward_names(src: CodeSource | None) -> dict[str, str]:
    """The user's names for the snippet's ``model`` and ``x``: the callee and first argument
    of the line that calls the model, where they are plain names."""
    if src is None:
        return {}
    try:
        tree = ast.parse(src.text)
    except SyntaxError:
        return {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and node.lineno <= src.line <= (node.end_lineno or node.lineno)
            and isinstance(node.func, ast.Name)
            and node.args
            and isinstance(node.args[0], ast.Name)
        ):
            return {"model": node.func.id, "x": node.args[0].id}
    return {}


def float32_fix(f: Fix, lines: list[Float64Line], forward: CodeSource | None) -> Fix:
    """The fix with the float64 lines of the first file (or cell) that holds one made float32;
    else its snippet in the user's names."""
    if f.code:
        f.code = rename(f.code, forward_names(forward))
    first = next((ln.source for ln in lines if ln.source is not None), None)
    if first is None:
        return f
    same = [ln.source.line for ln in lines
            if ln.source is not None and ln.source.text == first.text]  # fmt: skip
    return statement_fix(f, first, lambda code, _line, _alias: float32_text(code, same))
