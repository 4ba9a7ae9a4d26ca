"""benchmarks/host_lines_check.py: its scripts run, and its table reads the report's host lines
(on the CPU here; the GPU run is the one that counts)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load() -> object:
    spec = importlib.util.spec_from_file_location(
        "host_lines_check", ROOT / "benchmarks" / "host_lines_check.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["host_lines_check"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_the_tokenizer_row_names_its_planted_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mod = _load()
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "python_pkg"))
    row = mod.check("tokenizer_in_loop", tmp_path, truth=False, timeout=120.0)  # type: ignore[attr-defined]
    assert row["rc"] == 0, row
    # The planted line is the costliest of the user's own: the verdict and the finding follow
    # the machine (on this CPU the model's compute is as large as the tokenizer's work).
    assert row["planted"] is True, row
    assert isinstance(row["share_pct"], float) and row["share_pct"] >= 20.0, row
