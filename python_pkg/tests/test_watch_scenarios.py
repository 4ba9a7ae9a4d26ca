"""The planted-bottleneck scenarios run (CPU, toy sizes), planted and fixed, and say what they are.

Their GPU verdicts come from ``benchmarks/accuracy.py`` on a real GPU; here each script must at
least run end to end, print its result line, and declare a known bottleneck and finding id.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import torch
from gpusight.report_schema import bottlenecks, finding_ids

SCENARIOS = Path(__file__).resolve().parents[2] / "benchmarks" / "scenarios"
NAMES = sorted(p.stem for p in SCENARIOS.glob("*.py") if not p.name.startswith("_"))


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"scenario_{name}", SCENARIOS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def scenario_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.syspath_prepend(str(SCENARIOS))
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.benchmark = False


def test_suite_covers_the_planted_bottlenecks() -> None:
    assert len(NAMES) >= 11
    expected = {load(n).EXPECTED["bottleneck"] for n in NAMES}
    assert {
        "input_pipeline",
        "host_cpu",
        "launch_overhead",
        "host_sync",
        "device_placement",
        "precision",
        "memory_transfer",
        "compute",
    } <= expected


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("fix", [False, True])
def test_scenario_runs(
    name: str, fix: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    module = load(name)
    assert module.LABEL and module.EXPECTED["bottleneck"] in bottlenecks()
    assert module.EXPECTED["finding"] is None or module.EXPECTED["finding"] in finding_ids()
    argv = [
        f"{name}.py",
        "--iters",
        "3",
        "--warmup",
        "1",
        "--device",
        "cpu",
        *(["--fix"] if fix else []),
    ]
    monkeypatch.setattr(sys, "argv", argv)
    module.main()
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("SCENARIO_RESULT "))
    result = json.loads(line.split(" ", 1)[1])
    assert result["scenario"] == name and result["fix"] is fix and result["steps"] == 3
    assert result["median_step_ms"] > 0
    # The throughput: the timed steps' total over their count. Two timed steps (3 less the one
    # warm-up): their mean is their median.
    assert result["mean_step_ms"] == pytest.approx(result["median_step_ms"], abs=1e-3)
    assert result["samples_per_step"] > 0
