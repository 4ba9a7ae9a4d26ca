"""Size gates for python_pkg/gpusight: no module over 800 lines, no function over 150.

A module's size is its line count; a function's (or method's, nested ones too) runs from its
``def`` line to its last line, as ``ast`` reports them. Past these sizes a module holds more than
one job and a function more than one step: split it by what the parts hold.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG_ROOT = Path(__file__).resolve().parents[1] / "gpusight"
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 150


def modules() -> list[Path]:
    return sorted(PKG_ROOT.rglob("*.py"))


def module_lines(source: str) -> int:
    return len(source.splitlines())


def function_lines(source: str) -> list[tuple[str, int, int]]:
    """(qualified name, first line, length in lines) of every function and method."""
    found: list[tuple[str, int, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                end = child.end_lineno or child.lineno
                found.append((name, child.lineno, end - child.lineno + 1))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def _rel(path: Path) -> str:
    return path.relative_to(PKG_ROOT.parent).as_posix()


def test_the_counters_measure() -> None:
    source = (
        "import os\n"
        "\n"
        "class A:\n"
        "    def m(self):\n"
        "        def inner():\n"
        "            return 1\n"
        "        return inner()\n"
        "\n"
        "async def f(\n"
        "    x,\n"
        "):\n"
        "    return x\n"
    )
    assert module_lines(source) == 12
    assert function_lines(source) == [("A.m", 4, 4), ("A.m.inner", 5, 2), ("f", 9, 4)]


def test_the_scan_sees_the_package() -> None:
    paths = modules()
    names = {_rel(p) for p in paths}
    # A few modules that exist, so that an empty scan cannot pass.
    assert {"gpusight/report.py", "gpusight/rules/workload.py"} <= names
    report = (PKG_ROOT / "report.py").read_text("utf-8")
    assert any(name.endswith("to_dict") for name, _, _ in function_lines(report))


def test_no_module_is_too_long() -> None:
    long = []
    for path in modules():
        n = module_lines(path.read_text("utf-8"))
        if n > MAX_MODULE_LINES:
            long.append(f"{_rel(path)}: {n} lines")
    assert not long, f"modules over {MAX_MODULE_LINES} lines: " + "; ".join(long)


def test_no_function_is_too_long() -> None:
    long = []
    for path in modules():
        for name, line, n in function_lines(path.read_text("utf-8")):
            if n > MAX_FUNCTION_LINES:
                long.append(f"{_rel(path)}:{line} {name}: {n} lines")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: " + "; ".join(long)
