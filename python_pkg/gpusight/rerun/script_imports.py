"""What a script imports that a process may import ahead of it (``warm_server.preload``).

Module-level imports in order, up to the first statement that could change what a later import
finds or how it sets itself up (``os.environ``, ``sys.path``, a dotenv file: a library reads
constants from the environment as it imports); imports inside functions only where there is
none. A module of the script's folder that it imports is read the same way where it is imported
(a package of its folder is a stop). A setting of the environment to constants
(``os.environ["K"] = "v"``, ``os.environ.setdefault``, ``os.environ.update`` of constants) is
no such statement: it is passed on in its place (``=K=v``, or ``?K=v`` where it sets only an
unset one), and made before the imports that follow it, as the script makes it. Relative
imports and names the script's folder defines (its ``utils.py`` would shadow an installed
``utils``) are left out.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path


def script_imports(script: str) -> list[str]:
    """What ``script`` imports that may be imported ahead of it, in order (``pkg.mod``, or
    ``pkg.mod:name`` for ``from pkg.mod import name``), with its settings of the environment
    to constants in their places (``=K=v``, ``?K=v``)."""
    folder = os.path.dirname(os.path.abspath(script))
    walk = _Walk(folder, own_names(folder))
    body = walk.parsed(script)
    if body is None:
        return []
    walk.module(body, 0)
    names = walk.found + (walk.later if not walk.stopped else [])
    return [n for i, n in enumerate(names) if n[0] in "=?" or n not in names[:i]]


class _Walk:
    """The statements a script runs at import, in order, its own modules' included (as they
    run where the script imports them: ``helpers.py`` imported first thing, say)."""

    DEPTH = 4

    def __init__(self, folder: str, own: set[str]) -> None:
        self.folder, self.own = folder, own
        self.found: list[str] = []
        self.later: list[str] = []  # inside functions and classes: run after what precedes
        self.stopped = False
        self.seen: set[str] = set()

    def parsed(self, path: str) -> list[ast.stmt] | None:
        try:
            return ast.parse(Path(path).read_text("utf-8"), path).body
        except (OSError, SyntaxError, ValueError):
            return None

    def module(self, body: list[ast.stmt], depth: int) -> None:
        for stmt in body:
            if (env := environment_set(stmt)) is not None:
                self.found += env
            elif (mine := [t for t in map(_top, _imported(stmt)) if t in self.own]) and (
                isinstance(stmt, ast.Import | ast.ImportFrom)
            ):
                self.own_import(mine, depth)
                self.found += [n for n in _imported(stmt) if _top(n) not in self.own]
            elif mine or _sets_up(stmt):
                self.stopped = True
            else:
                names = [n for n in _imported(stmt) if _top(n) != "__future__"]
                is_def = isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                (self.later if is_def else self.found).extend(names)
            if self.stopped:
                return

    def own_import(self, names: list[str], depth: int) -> None:
        """The script's own modules ``names`` run where imported (a package, or too deep: a
        stop)."""
        for name in names:
            if name in self.seen:
                continue  # imported once: a second import runs nothing
            self.seen.add(name)
            path = os.path.join(self.folder, f"{name}.py")
            body = self.parsed(path) if os.path.isfile(path) and depth < self.DEPTH else None
            if body is None:
                self.stopped = True
                return
            self.module(body, depth + 1)
            if self.stopped:
                return


_SETS_UP = {"environ", "putenv", "load_dotenv", "find_dotenv"}


def _sets_up(stmt: ast.stmt) -> bool:
    """Whether ``stmt`` reads or changes what later imports depend on (see ``script_imports``)."""
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and node.id in _SETS_UP:
            return True
        if isinstance(node, ast.Attribute) and (
            node.attr in _SETS_UP
            or (node.attr == "path" and isinstance(node.value, ast.Name) and node.value.id == "sys")
        ):
            return True
        if isinstance(node, ast.ImportFrom) and (
            node.level > 0 or any(a.name in _SETS_UP for a in node.names)
        ):
            return True
    return False


def _top(name: str) -> str:
    return name.split(".")[0].split(":")[0]


def _imported(node: ast.AST) -> list[str]:
    """The modules the import statements in ``node`` name."""
    found: list[str] = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Import):
            found += [a.name for a in sub.names]
        elif isinstance(sub, ast.ImportFrom) and sub.level == 0 and sub.module:
            found += [f"{sub.module}:{a.name}" if a.name != "*" else sub.module
                      for a in sub.names]  # fmt: skip
    return found


def own_names(folder: str) -> set[str]:
    """The top-level module names a script in ``folder`` imports from there: its modules, and
    its folders that hold code. A folder of outputs (``wandb/``, ``lightning_logs/``) holds
    none and shadows nothing: an installed ``wandb`` is found past it."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return set()
    names = {e.name[:-3] for e in entries if e.name.endswith(".py") and e.is_file()}
    return names | {e.name for e in entries if e.name.isidentifier() and _holds_code(e.path)}


def _holds_code(path: str) -> bool:
    """Whether ``path`` is a folder with Python modules in it (a package, or a namespace
    package's part)."""
    try:
        return os.path.isdir(path) and any(n.endswith(".py") for n in os.listdir(path))
    except OSError:
        return False


def environment_set(stmt: ast.stmt) -> list[str] | None:
    """``stmt``'s settings if it only sets the environment to constants (``=K=v``: set;
    ``?K=v``: set where unset); None for any other statement."""
    if (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(t := stmt.targets[0], ast.Subscript)
        and _is_environ(t.value)
        and (k := _text(t.slice)) is not None
        and (v := _text(stmt.value)) is not None
    ):
        return None if "=" in k else [f"={k}={v}"]
    if not (isinstance(stmt, ast.Expr) and isinstance(call := stmt.value, ast.Call)):
        return None
    f = call.func
    if not (isinstance(f, ast.Attribute) and _is_environ(f.value)):
        return None
    if f.attr == "setdefault" and len(call.args) == 2 and not call.keywords:
        k, v = _text(call.args[0]), _text(call.args[1])
        return None if k is None or v is None or "=" in k else [f"?{k}={v}"]
    if f.attr == "update" and len(call.args) <= 1:
        pairs: list[tuple[str | None, str | None]] = []
        if call.args:  # the mapping first, then the keywords, as dict.update takes them
            if not isinstance(d := call.args[0], ast.Dict):
                return None
            for key, value in zip(d.keys, d.values, strict=True):
                pairs.append((None if key is None else _text(key), _text(value)))
        pairs += [(kw.arg, _text(kw.value)) for kw in call.keywords]
        if all(k is not None and v is not None and "=" not in k for k, v in pairs):
            return [f"={k}={v}" for k, v in pairs]
    return None


def _is_environ(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "environ"
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    )


def _text(node: ast.expr) -> str | None:
    """A string constant's value."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None
