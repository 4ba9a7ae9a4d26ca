"""Which notebook cell built the DataLoader: the cell a fix changes, as the kernel ran it.

Two ways to know it, both read from the running IPython (never imported here: without it there
are no cells):

- the watch saw the ``DataLoader(...)`` call: its frame's file name is a cell's compiled name
  (``<ipython-input-…>``, ``/tmp/ipykernel_…/….py``), which IPython's compiler maps to the
  cell's execution count; the history holds the cell's text for that count, ``linecache`` the
  code that ran;
- the loader was built in an earlier cell, before the watch: the names the user's namespace
  binds to it lead to the latest cell in the history that assigns one of them a
  ``DataLoader(...)`` call at the top level.

Either way the cell's text must still be what ran on the call's lines (``fixes/cell_patch.py``
checks), or there is no cell to change.
"""

from __future__ import annotations

import ast
import linecache
import sys
from typing import Any

from ..fixes.cell_patch import CellSource
from ..fixes.patch import LOADER_NAMES, called_name

# The sidebar's "watch next cell" runs the cell below a %%gpusight line the notebook never had.
_OWN_MAGIC = "%%gpusight"


def current_shell() -> Any | None:
    """The running IPython shell, or None (not in IPython, or IPython never imported)."""
    ipython = sys.modules.get("IPython")
    get = getattr(ipython, "get_ipython", None)
    if get is None:
        return None
    try:
        return get()
    except Exception:
        return None


def _history(shell: Any) -> list[str]:
    hist = getattr(getattr(shell, "history_manager", None), "input_hist_raw", None)
    return list(hist) if isinstance(hist, list) else []


def _raw(shell: Any, count: int) -> str | None:
    hist = _history(shell)
    return hist[count] if 0 < count < len(hist) and isinstance(hist[count], str) else None


def current_count(shell: Any) -> int | None:
    """The execution count of the cell now running, where the history holds it (its last
    entry); None without one."""
    n = len(_history(shell)) - 1
    return n if n > 0 else None


def running_count(shell: Any, body: str) -> int:
    """The execution count of the cell now running, whose text ends with ``body``.

    IPython 9 counts the cell up before running it (``shell.execution_count`` is then the next
    cell's); older versions after. The history's last entry is the running cell either way."""
    hist = _history(shell)
    text = body.rstrip("\n")
    if text.strip() and len(hist) > 1 and isinstance(hist[-1], str) and hist[-1].endswith(text):
        return len(hist) - 1
    return int(getattr(shell, "execution_count", 0) or 0)


def cell_at(
    filename: str, line: int, offset: int = 0, shell: Any | None = None
) -> CellSource | None:
    """The cell whose compiled name is ``filename``, with ``line`` (a line of that code).

    ``offset``: lines of the cell above the compiled code (the watched cell's magic line)."""
    shell = shell if shell is not None else current_shell()
    if shell is None:
        return None
    count = getattr(getattr(shell, "compile", None), "_filename_map", {}).get(filename)
    compiled = "".join(linecache.getlines(filename))
    raw = _raw(shell, count) if isinstance(count, int) else None
    if raw is None or not compiled:
        return None
    if offset == 0 and raw.startswith(_OWN_MAGIC):
        raw = raw.split("\n", 1)[1] if "\n" in raw else ""
    return CellSource(raw, compiled, line, offset, count)


def _binds(node: ast.stmt, names: set[str]) -> bool:
    targets = (
        node.targets
        if isinstance(node, ast.Assign)
        else [node.target]
        if isinstance(node, ast.AnnAssign | ast.AugAssign | ast.For | ast.AsyncFor)
        else [item.optional_vars for item in node.items if item.optional_vars is not None]
        if isinstance(node, ast.With | ast.AsyncWith)
        else []
    )
    return any(isinstance(n, ast.Name) and n.id in names for t in targets for n in ast.walk(t))


def _loader_call(node: ast.stmt) -> ast.Call | None:
    value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
    if not isinstance(value, ast.Call):
        return None
    return value if called_name(value) in LOADER_NAMES else None


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements that bind names in the module: blocks walked, functions and classes not."""
    out: list[ast.stmt] = []
    for node in body:
        out.append(node)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for attr in ("body", "orelse", "finalbody"):
            inner = getattr(node, attr, None)
            if isinstance(inner, list):
                out.extend(_module_level(inner))
        for handler in getattr(node, "handlers", []):
            out.extend(_module_level(handler.body))
    return out


def _loaders(dataset_id: int, shell: Any) -> dict[str, Any]:
    """The user's names bound to a DataLoader over the dataset whose ``id`` is ``dataset_id``,
    with the loaders."""
    data = sys.modules.get("torch.utils.data")
    cls = getattr(data, "DataLoader", None)
    if cls is None:
        return {}
    ns = getattr(shell, "user_ns", {}) or {}
    return {
        name: value
        for name, value in list(ns.items())
        if not name.startswith("_")
        and isinstance(value, cls)
        and id(getattr(value, "dataset", None)) == dataset_id
    }


def loader_names(dataset_id: int, shell: Any) -> set[str]:
    """The user's names bound to a DataLoader over the dataset whose ``id`` is ``dataset_id``."""
    return set(_loaders(dataset_id, shell))


_CHECKED = ("batch_size", "num_workers", "pin_memory", "prefetch_factor", "persistent_workers")


def agrees(call: ast.Call, loaders: list[Any]) -> bool:
    """Whether the call's literal settings are those of one of the live loaders: a cell whose
    call says ``num_workers=2`` beside a loader with 0 did not make it (it raised before the
    assignment, a NameError say, and an earlier cell's loader is still the one in use)."""
    said = {
        kw.arg: kw.value.value
        for kw in call.keywords
        if kw.arg in _CHECKED and isinstance(kw.value, ast.Constant)
    }
    return any(all(getattr(ld, k, v) == v for k, v in said.items()) for ld in loaders)


def loader_cell(dataset_id: int, shell: Any | None = None) -> CellSource | None:
    """The latest cell that assigned the user's DataLoader (over that dataset) to its name."""
    shell = shell if shell is not None else current_shell()
    if shell is None:
        return None
    loaders = _loaders(dataset_id, shell)
    names = set(loaders)
    if not names:
        return None
    hist = _history(shell)
    for count in range(len(hist) - 1, 0, -1):
        raw = hist[count]
        if not isinstance(raw, str) or not any(n in raw for n in names):
            continue
        try:
            compiled = shell.transform_cell(raw)
            tree = ast.parse(compiled)
        except Exception:  # a cell that never parsed built nothing
            continue
        # The cell's last binding of the name is the one in effect: a DataLoader(...) call, or
        # something this cannot change (a factory's result, a loop variable).
        for node in reversed(_module_level(tree.body)):
            if _binds(node, names):
                call = _loader_call(node)
                if call is None:
                    return None
                if not agrees(call, list(loaders.values())):
                    break  # this cell did not make the loader in use: an earlier one did
                # IPython drops a cell's leading blank lines before it compiles it.
                return CellSource(raw, compiled, call.lineno, _leading_blank(raw), count)
    return None


def _leading_blank(raw: str) -> int:
    """Blank lines at the top of a cell (IPython's transform drops them)."""
    n = 0
    for line in raw.splitlines():
        if line.strip():
            break
        n += 1
    return n


def torch_alias(shell: Any | None = None) -> str | None:
    """The kernel's name for the torch module (``torch``, or an alias), or None."""
    shell = shell if shell is not None else current_shell()
    ns = getattr(shell, "user_ns", None) or {}
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    if ns.get("torch") is torch:
        return "torch"
    return next((n for n, v in list(ns.items()) if v is torch and not n.startswith("_")), None)
