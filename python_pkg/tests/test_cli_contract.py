"""The CLI contract: every verb, given bad input, prints one line on stderr, exits 2, and shows no
traceback (in-process calls of ``gpusight.cli.main``; the same function the script runs)."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest
from gpusight.cli import main
from gpusight.report import Report
from html_support import typical_report


def rank_report(world: Any = 2) -> dict[str, Any]:
    data: dict[str, Any] = typical_report().to_dict()
    data["run"]["kernels"] = {"dist_rank": 0, "dist_world_size": world}
    return data


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("bad")
    good: dict[str, Any] = typical_report().to_dict()

    def put(name: str, content: str | bytes) -> str:
        p = d / name
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, "utf-8")
        return str(p)

    nan = json.dumps(good).replace('"step_time_ms": ', '"step_time_ms": NaN, "x": ', 1)
    bad_field = copy.deepcopy(good)
    bad_field["run"]["step_time_ms"] = -1
    huge = copy.deepcopy(good)
    huge["run"] = [copy.deepcopy(good["run"])] * 200
    return {
        "good": put("good.json", json.dumps(good)),
        "rank": put("rank0.json", json.dumps(rank_report())),
        "rank_world_1e9": put("rank_1e9.json", json.dumps(rank_report(1e9))),
        "utf16": put("utf16.json", json.dumps(good).encode("utf-16")),
        "latin1": put("latin1.json", b'{"title": "caf\xe9"}'),
        "deep": put("deep.json", "[" * 100_000 + "]" * 100_000),
        "nan": put("nan.json", nan),
        "version_number": put("version.json", json.dumps(dict(good, schema_version=1.0))),
        "not_object": put("list.json", "[1, 2]"),
        "truncated": put("truncated.json", json.dumps(good)[:5000]),
        "bad_field": put("bad_field.json", json.dumps(bad_field)),
        "huge_bad": put("huge_bad.json", json.dumps(huge)),
        "empty": put("empty.json", ""),
        "missing": str(d / "missing.json"),
        "dir": str(d),
        "empty_dir": str(tmp_path_factory.mktemp("empty")),
        "no_dir": str(d / "no" / "such" / "out.json"),
        "script": put("script.py", "print(1)\n"),
    }


# (argv with {placeholders}, what the one line must say)
CASES: list[tuple[str, str]] = [
    ("check --json {no_dir}", "no such directory"),
    ("bench --budget nan", "--budget must be a positive number"),
    ("bench --budget -1", "--budget must be a positive number"),
    ("bench --budget inf", "--budget must be a positive number"),
    ("bench --quick --json {no_dir}", "no such directory"),
    ("bench --quick --json {dir}", "is a directory"),
    ("run --warmup -5 {script}", "--warmup must be 0 or more"),
    ("run --profile-steps -1 {script}", "--profile-steps must be 0 or more"),
    ("run --steps 0 {script}", "--steps must be at least 1"),
    ("run --merge-timeout nan {script}", "--merge-timeout"),
    ("run {missing}", "no such script"),
    ("merge --world-size 0 {rank}", "--world-size must be 1 to"),
    ("merge --world-size 1000000000 {rank}", "--world-size must be 1 to"),
    ("merge --json {no_dir} {rank}", "no such directory"),
    ("merge {rank_world_1e9}", "dist_world_size"),
    ("merge {good}", "not a rank's report"),
    ("merge {empty_dir}", "no rank reports found"),
    ("html {dir}", "Is a directory"),
    ("html {good} -o {good}", "refusing to overwrite"),
    ("html {good} -o {no_dir}", "cannot write"),
    ("diff {good} {good} --html {no_dir}", "cannot write"),
]
BAD_REPORTS: list[tuple[str, str]] = [
    ("utf16", "not UTF-8 text (it looks like UTF-16)"),
    ("latin1", "not UTF-8 text"),
    ("deep", "nested too deeply"),
    ("nan", "NaN is not a JSON number"),
    ("version_number", 'schema_version must be a string such as "1.'),
    ("not_object", "must be a JSON object"),
    ("truncated", "not valid JSON"),
    ("bad_field", "run.step_time_ms: -1 is less than the minimum of 0"),
    ("huge_bad", "invalid report at run"),
    ("empty", "not valid JSON"),
    ("missing", "cannot read report"),
]
for name, says in BAD_REPORTS:
    CASES += [
        (f"html {{{name}}} -o {{no_dir}}", says),
        (f"diff {{{name}}} {{good}}", says),
        (f"diff {{good}} {{{name}}}", says),
        (f"merge {{{name}}}", says),
    ]


@pytest.mark.parametrize(("argv", "says"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_exit_2(
    argv: str, says: str, files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(argv.format(**files).split())
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert code == 2, out.err
    assert len(lines) == 1, out.err
    assert "Traceback" not in out.err + out.out
    assert says in lines[0]
    assert len(lines[0]) <= 400


def test_an_unexpected_error_is_one_line_unless_debugging(
    monkeypatch: pytest.MonkeyPatch, files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr("gpusight.compare.compare_reports", broken)
    assert main(["diff", files["good"], files["good"]]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "internal error (ZeroDivisionError: float division by zero)" in err
    monkeypatch.setenv("GPUSIGHT_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        main(["diff", files["good"], files["good"]])


def test_good_input_still_works(files: dict[str, str], tmp_path: Path) -> None:
    assert main(["diff", files["good"], files["good"]]) == 0
    assert main(["merge", files["rank"], "--json", str(tmp_path / "m.json")]) == 0
    merged = json.loads((tmp_path / "m.json").read_text())
    assert merged["kind"] == "distributed"


def test_merge_names_a_bounded_list_of_missing_ranks() -> None:
    from gpusight.rules.distributed import merge_reports

    merged = merge_reports([rank_report()], world_size=1_000_000)
    note = next(n for n in merged.notes if n.startswith("no report from rank(s)"))
    assert "1, 2, 3" in note and "... and 999967 more" in note
    assert len(note) < 400
    assert not math.isnan(Report.to_dict(merged)["run"]["step_time_ms"])
