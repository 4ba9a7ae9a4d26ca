"""benchmarks/magic_speed.py's logic without timing: the result line, the split of a run by the
stages its progress named, the medians over runs, and the clear stop where IPython is missing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from bench_support import benchmark

MARKS = [
    (0.10, "checking the environment"),
    (0.60, "cpu"),
    (0.65, "cpu matmul"),
    (0.80, "matmul"),
    (0.85, "matmul bf16"),
    (1.40, "copies"),
    (1.90, "launch"),
    (2.20, "done"),
]


@pytest.fixture(scope="module")
def summary() -> Iterator[ModuleType]:
    with benchmark("magictime.summary") as mod:
        yield mod


@pytest.fixture(scope="module")
def entry() -> Iterator[ModuleType]:
    with benchmark("magic_speed") as mod:
        yield mod


def test_the_last_result_line_is_read(summary: ModuleType) -> None:
    out = "\r[####] 50%  cpu\n" + summary.MARK + json.dumps({"a": 1}) + "\n"
    out += summary.MARK + json.dumps({"a": 2}) + "\nbye\n"
    assert summary.parse(out) == {"a": 2}
    assert summary.parse("no result here") is None


def test_a_run_is_split_by_the_stages_its_progress_named(summary: ModuleType) -> None:
    parts = summary.split(MARKS, 2.25)
    assert parts["before check"] == pytest.approx(0.10)
    assert parts["check"] == pytest.approx(0.50)
    assert parts["cpu"] == pytest.approx(0.20)
    assert parts["matmul"] == pytest.approx(0.60)
    assert parts["copies"] == pytest.approx(0.50)
    assert parts["launch"] == pytest.approx(0.30)
    assert parts["after bench"] == pytest.approx(0.05)
    # The parts add up to the whole.
    assert sum(v for v in parts.values() if v is not None) == pytest.approx(2.25)


def test_a_stage_never_named_is_none_and_the_rest_still_add_up(summary: ModuleType) -> None:
    marks = [m for m in MARKS if m[1] not in ("copies",)]
    parts = summary.split(marks, 2.25)
    assert parts["copies"] is None
    assert parts["matmul"] == pytest.approx(1.10)  # until the next stage named: launch


def test_each_fine_stage_lasts_until_the_next(summary: ModuleType) -> None:
    stages = dict(summary.stage_times(MARKS, 2.25))
    assert stages["matmul bf16"] == pytest.approx(0.55)
    assert stages["done"] == pytest.approx(0.05)


def _run(total: float, value: float, findings: list[str]) -> dict[str, object]:
    return {
        "total_s": total,
        "load_ext_s": 0.05,
        "magic_s": total - 0.05,
        "wall_s": total + 1,
        "marks": MARKS,
        "end_s": 2.25,
        "parts": {"probe.torch": total / 10},
        "report": {
            "rows": {"cpu.matmul.fp32": value},
            "findings": findings,
            "checks": {"nvml": "not_checked"},
            "skipped": {},
            "summary": "fine",
        },
    }


def test_medians_over_runs_and_failed_runs_kept_apart(summary: ModuleType) -> None:
    runs = [
        _run(2.0, 10.0, ["a"]),
        _run(3.0, 30.0, ["a", "b"]),
        _run(2.5, 20.0, ["a"]),
        {"error": "rc 1: boom"},
    ]
    s = summary.summarise(runs)
    assert (s["runs"], s["ok"]) == (4, 3)
    assert s["total_s"] == 2.5
    assert s["rows"]["cpu.matmul.fp32"] == 20.0
    assert s["check_parts_s"]["probe.torch"] == 0.25
    assert s["findings"] == ["a", "b"]
    assert s["errors"] == ["rc 1: boom"]
    text = summary.table({"warm": s}, 3.0)
    assert "warm <= 3 s" in text.splitlines()[-1] and "yes" in text.splitlines()[-1]
    assert "NO" in summary.table({"warm": s}, 2.0).splitlines()[-1]


def test_a_python_without_ipython_stops_with_the_reason(
    entry: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = entry.main(["--python", "/nonexistent/python3", "--out", str(tmp_path), "--repeats", "1"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "IPython is missing" in err and "/nonexistent/python3" in err
    assert "--without-ipython" in err
    assert not list(tmp_path.iterdir())  # nothing timed, nothing written


def test_a_run_is_kept_slim_with_its_split(summary: ModuleType) -> None:
    run = {**_run(2.25, 12.5, ["a"]), "import_torch_cuda_init_s": 4.4}
    kept = summary.slim(run)
    assert kept["total_s"] == 2.25 and kept["import_torch_cuda_init_s"] == 4.4
    assert kept["split_s"]["check"] == pytest.approx(0.5)
    assert kept["rows"] == {"cpu.matmul.fp32": 12.5} and kept["findings"] == ["a"]
    assert "marks" not in kept
    assert summary.slim({"error": "rc 1", "wall_s": 3.0}) == {"error": "rc 1", "wall_s": 3.0}


def test_the_table_names_the_longest_stages_first(summary: ModuleType) -> None:
    s = summary.summarise([_run(2.0, 10.0, [])])
    lines = summary.table({"warm": s}, 3.0).splitlines()
    at = next(i for i, ln in enumerate(lines) if "longest stages (warm)" in ln)
    named = [ln.strip() for ln in lines[at + 1 : at + 4]]
    # matmul bf16 0.55 s, then the check and copies at 0.50 s each (in the order they ran).
    assert named[0].startswith("matmul bf16") and named[0].endswith("0.550")
    assert named[1].startswith("checking the environment") and named[2].startswith("copies")
