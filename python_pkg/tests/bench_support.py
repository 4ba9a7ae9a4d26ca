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
    """``benchmarks/NAME.py`` as the module ``NAME_bench`` (the folders it puts on ``sys.path``
    stay there: see ``benchmark``)."""
    spec = importlib.util.spec_from_file_location(f"{name}_bench", BENCHMARKS / f"{name}.py")
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
