"""What the scenario and corpus scripts print and declare.

A scenario (``scenarios/_common.py``) prints one line ``SCENARIO_RESULT {json}`` when it ends
and, with ``--step-log FILE``, writes every step's time to FILE; a corpus script
(``corpus/_corpus.py``) prints ``CORPUS_RESULT {json}``. Their top-level constants (``LABEL``,
``EXPECTED``, ``REQUIRES_CUDA``, ...) are read without importing them: their libraries may be
missing where the benchmark runs.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any


def scenario_result(stdout: str) -> dict[str, Any] | None:
    """The last ``SCENARIO_RESULT {json}`` line of a scenario's output (None: none, or not a
    JSON object)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("SCENARIO_RESULT "):
            try:
                parsed = json.loads(line.split(" ", 1)[1])
            except ValueError:
                return None
            return parsed if isinstance(parsed, dict) else None
    return None


def scenario_results(text: str) -> list[dict[str, Any]]:
    """Every ``SCENARIO_RESULT {...}`` in the output; the ranks' lines can run into each other."""
    return [json.loads(m) for m in re.findall(r"SCENARIO_RESULT (\{[^{}]*\})", text)]


def items_per_s(out: str) -> float | None:
    """Items per second from a scenario's ``SCENARIO_RESULT`` or a corpus script's
    ``CORPUS_RESULT`` line (its own clock; its steady rate where it has one)."""
    for ln in out.splitlines():
        if ln.startswith("CORPUS_RESULT "):
            r = json.loads(ln.split(" ", 1)[1])
            # Where the script marks its batches' shapes: the steady rate (``_corpus.steady``).
            return r.get("steady_items_per_s") or r.get("items_per_s")
    line = next((ln for ln in out.splitlines() if ln.startswith("SCENARIO_RESULT ")), None)
    if line is None:
        return None
    r = json.loads(line.split(" ", 1)[1])
    mean = r.get("mean_step_ms") or r.get("median_step_ms")
    return r["samples_per_step"] / mean * 1000.0 if mean else None


def step_log(path: Path) -> list[float]:
    """Every step's time (ms) from a scenario's ``--step-log`` file."""
    data = json.loads(path.read_text("utf-8"))
    return [float(x) for x in data["step_ms"]]


def top_level(path: Path, names: dict[str, Any] | tuple[str, ...]) -> dict[str, Any]:
    """The script's module-level constants of these names (literals), read without importing
    it; a ``dict`` gives each name's default."""
    meta: dict[str, Any] = dict(names) if isinstance(names, dict) else {}
    wanted = set(names)
    for node in ast.parse(path.read_text("utf-8")).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id in wanted:
                meta[target.id] = ast.literal_eval(node.value)
    return meta


def read_meta(path: Path) -> dict[str, Any]:
    """LABEL, EXPECTED and REQUIRES_CUDA from a scenario's top level, without importing it."""
    return top_level(path, {"LABEL": path.stem, "EXPECTED": {}, "REQUIRES_CUDA": False})
