"""The import graph of python_pkg/gpusight has no cycles.

Built statically with ``ast``: every ``import`` counts, at module level and inside functions (a
function-level import is still a dependency, only a later one), except those under
``if TYPE_CHECKING:``, which never run. ``from pkg import name`` points at ``pkg.name`` where
that is a module, else at ``pkg`` itself. A package's ``__init__`` is the node of the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG_ROOT = Path(__file__).resolve().parents[1] / "gpusight"


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG_ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PKG_ROOT.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement in the tree, skipping the bodies of ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def edges(known: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the gpusight modules it imports."""
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        is_package = path.name == "__init__.py"
        package = name if is_package else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text("utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base_parts = package.split(".")
                    base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                    for alias in node.names
                ]
            for target in targets:
                # `import gpusight.a.b` names the deepest module that exists.
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """The strongly connected components with more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []

    def strongconnect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(tuple(sorted(component)))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return sorted(found)


def test_the_graph_sees_the_package() -> None:
    graph = edges(modules())
    # A few edges that exist, so that an empty graph cannot pass.
    assert "gpusight.report_schema" in graph["gpusight.report"]
    assert "gpusight.report" in graph["gpusight.text_report"]
    # A function-level import counts; a TYPE_CHECKING one does not.
    assert "gpusight.doctor" in graph["gpusight"]
    assert "gpusight.report" in graph["gpusight.html_export"]


def test_the_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [("a", "b", "c")]


def test_type_checking_imports_are_left_out(tmp_path: Path) -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from .b import B\nelse:\n    from .c import C\n"
        "def f():\n    from .d import D\n"
    )
    tree = ast.parse(source)
    assert [getattr(n, "module", None) for n in _imports(tree)] == ["typing", "c", "d"]


def test_the_report_does_not_import_its_renderers() -> None:
    graph = edges(modules())
    renderers = {"gpusight.html_export", "gpusight.text_report", "gpusight.jupyter.display"}
    assert not graph["gpusight.report"] & renderers


def test_no_import_cycles() -> None:
    found = cycles(edges(modules()))
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_two_what_if_drivers_import_neither_each_other() -> None:
    """``whatif/`` (copies in the kernel) and ``rerun/`` (the script re-run) share only
    ``knobs/``: what a change is lives there once, how each measures it stays its own."""
    graph = edges(modules())

    def crossing(a: str, b: str) -> list[str]:
        return sorted(
            f"{m} -> {t}"
            for m, targets in graph.items()
            if m.startswith(f"gpusight.{a}")
            for t in targets
            if t.startswith(f"gpusight.{b}")
        )

    assert crossing("rerun", "whatif") == []
    assert crossing("whatif", "rerun") == []
    assert crossing("knobs", "whatif") == []
    assert crossing("knobs", "rerun") == []
