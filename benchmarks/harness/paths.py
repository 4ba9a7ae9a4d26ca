"""Where things are, and the folders a benchmark imports from."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
SCENARIOS = BENCHMARKS / "scenarios"
CORPUS = BENCHMARKS / "corpus"
RESULTS = BENCHMARKS / "results"
PKG = ROOT / "python_pkg"


def on_path(*folders: Path) -> None:
    """Each folder put first on ``sys.path`` unless it is there already (the last named ends up
    first)."""
    for folder in folders:
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))


def scenarios_on_path() -> None:
    """The scenarios (which import ``_common``), ``benchmarks/`` and the package, importable."""
    on_path(SCENARIOS, BENCHMARKS, PKG)


def child_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a child process: this one's (or ``base``), the package first on its
    ``PYTHONPATH``."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PKG), env.get("PYTHONPATH", "")) if p)
    return env
