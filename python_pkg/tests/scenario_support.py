"""Shared pieces for the tests that patch a public scenario script: a copy of the scenario in a
folder of its own, a diff applied with ``patch -p1`` as a user would, the patched script run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SCENARIOS = Path(__file__).resolve().parents[2] / "benchmarks" / "scenarios"
# Where ``gpusight`` is importable from, for the scripts run in their own folder.
ENV = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))


def copy_scenario(name: str, dest: Path) -> None:
    """``name.py`` and the ``_common.py`` it imports into ``dest``; the test is skipped where
    there is no ``patch`` program to apply a diff with."""
    if shutil.which("patch") is None:
        pytest.skip("no patch program")
    for f in (f"{name}.py", "_common.py"):
        shutil.copy(SCENARIOS / f, dest / f)


def apply_patch(dest: Path, diff: str | None = None) -> None:
    """``patch -p1 -i fix.diff`` in ``dest`` (``diff`` written there first, when given)."""
    if diff is not None:
        (dest / "fix.diff").write_text(diff)
    subprocess.run(["patch", "-p1", "-i", "fix.diff"], cwd=dest, check=True, capture_output=True)


def run_scenario(dest: Path, name: str, *args: str) -> dict[str, Any]:
    """Run ``name.py`` in ``dest`` with ``args``; it must succeed. Its ``SCENARIO_RESULT``."""
    done = subprocess.run(
        [sys.executable, f"{name}.py", *args],
        cwd=dest, env=ENV, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [ln for ln in done.stdout.splitlines() if ln.startswith("SCENARIO_RESULT ")]
    assert rows, done.stdout[-2000:]
    result: dict[str, Any] = json.loads(rows[-1].removeprefix("SCENARIO_RESULT "))
    return result


def watch_scenario(dest: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``gpusight run --quiet ARGS`` in ``dest`` (the script among them): as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "gpusight", "run", "--quiet", *args],
        cwd=dest, env=ENV, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
