"""Loading a script of ``benchmarks/`` as a module, for the tests of its logic."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_benchmark(name: str) -> ModuleType:
    """``benchmarks/NAME.py`` as the module ``NAME_bench``; a dotted name is a module of one of
    its packages (``cost.parts``: ``benchmarks/cost/parts.py``). ``benchmarks/`` goes on
    ``sys.path`` first, for the harness and the packages (the folders the module puts there stay
    there: see ``benchmark``)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    path = BENCHMARKS.joinpath(*name.split(".")).with_suffix(".py")
    spec = importlib.util.spec_from_file_location(f"{name.replace('.', '_')}_bench", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@contextmanager
def benchmark(name: str) -> Iterator[ModuleType]:
    """``load_benchmark``, with ``sys.path`` put back afterwards (for a module-scoped fixture)."""
    saved = list(sys.path)
    try:
        yield load_benchmark(name)
    finally:
        sys.path[:] = saved
