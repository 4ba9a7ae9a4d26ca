"""Report validation (gpusight.schema_check): the same verdict as a draft-07 validator, messages
that name the deepest field in one bounded line, and what JSON cannot hold refused."""

from __future__ import annotations

import copy
import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
from gpusight import ReportValidationError, load_report
from gpusight.report_schema import MAX_WORLD_SIZE, load_schema, validate
from gpusight.schema_check import SchemaError, compile_schema
from html_support import typical_report


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    data: dict[str, Any] = typical_report().to_dict()
    return data


def bad(data: dict[str, Any]) -> ReportValidationError:
    with pytest.raises(ReportValidationError) as err:
        validate(data)
    assert "\n" not in str(err.value)
    return err.value


def test_names_the_deepest_field_under_one_of(report: dict[str, Any]) -> None:
    data = copy.deepcopy(report)
    data["run"]["step_time_ms"] = -1
    err = bad(data)
    assert str(err) == "invalid report at run.step_time_ms: -1 is less than the minimum of 0"
    assert err.path == "run.step_time_ms"


def test_message_is_bounded_for_a_huge_value(report: dict[str, Any]) -> None:
    data = copy.deepcopy(report)
    data["run"]["timeline"][7]["util_pct"] = "x" * 1_000_000
    err = bad(data)
    assert err.path == "run.timeline[7].util_pct"
    assert len(str(err)) < 200
    data = copy.deepcopy(report)
    data["run"] = [copy.deepcopy(report["run"])] * 1000  # was: the whole value in the message
    assert len(str(bad(data))) < 300


def test_nan_and_infinity_are_refused(report: dict[str, Any], tmp_path: Path) -> None:
    for value in (math.nan, math.inf, -math.inf):
        data = copy.deepcopy(report)
        data["run"]["step_times_ms"][3] = value
        err = bad(data)
        assert err.path == "run.step_times_ms[3]"
        assert "not a finite number" in str(err)
    data = copy.deepcopy(report)
    data["findings"][0]["evidence"][0]["value"] = math.nan  # a Scalar: any type, but finite
    assert bad(data).path == "findings[0].evidence[0].value"
    text = json.dumps(report).replace('"step_time_ms": ', '"step_time_ms": NaN, "x": ', 1)
    with pytest.raises(ReportValidationError, match="NaN is not a JSON number"):
        load_report(text)


def test_numeric_schema_version_gets_a_precise_error(report: dict[str, Any]) -> None:
    data = dict(report, schema_version=1.0)
    err = bad(data)
    assert err.path == "schema_version"
    assert 'must be a string such as "1.' in str(err) and "not the number 1.0" in str(err)
    assert "missing" not in str(err)


def test_absurd_world_size_is_refused(report: dict[str, Any]) -> None:
    data = copy.deepcopy(report)
    data["run"]["kernels"] = {"dist_rank": 0, "dist_world_size": 1e9}
    err = bad(data)
    assert err.path == "run.kernels.dist_world_size"
    assert str(MAX_WORLD_SIZE) in str(err)


def test_unreadable_files_are_one_line_errors(tmp_path: Path, report: dict[str, Any]) -> None:
    utf16 = tmp_path / "utf16.json"
    utf16.write_text(json.dumps(report), "utf-16")
    with pytest.raises(ReportValidationError, match=r"not UTF-8 text .it looks like UTF-16."):
        load_report(utf16)
    latin = tmp_path / "latin1.json"
    latin.write_bytes(b'{"title": "caf\xe9"}')
    with pytest.raises(ReportValidationError, match="byte 0xe9 at offset 14"):
        load_report(latin)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(ReportValidationError, match="nested too deeply"):
        load_report(deep)
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps(report).encode())
    assert load_report(bom)["kind"] == report["kind"]


def test_unknown_schema_keywords_are_not_ignored() -> None:
    with pytest.raises(ValueError, match="unsupported schema keywords"):
        compile_schema({"type": "string", "format": "date-time"})


def _mutate(data: Any, rng: random.Random) -> Any:
    """One random change somewhere in the report: a value of another type or out of range, a
    key removed or added."""
    path: list[Any] = []
    node = data
    while isinstance(node, (dict, list)) and node and rng.random() < 0.8:
        key = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
        path.append(key)
        node = node[key]
    parent: Any = data
    for key in path[:-1]:
        parent = parent[key]
    choice = rng.randrange(6)
    if not path:
        return data
    key = path[-1]
    if choice == 0 and isinstance(parent, dict):
        del parent[key]
    elif choice == 1 and isinstance(parent, dict):
        parent["unexpected_" + str(rng.randrange(9))] = 1
    else:
        parent[key] = rng.choice([-1, -0.5, 1.5, 2, 101, "x", None, True, [], {}, [1, 2, 3]])
    return data


def test_same_verdict_as_jsonschema_draft7(report: dict[str, Any]) -> None:
    """Seeded mutations of a real report: valid exactly when jsonschema's Draft7Validator says so
    (without format checkers, which the schema does not use)."""
    jsonschema = pytest.importorskip("jsonschema")
    reference = jsonschema.Draft7Validator(load_schema())
    ours = compile_schema(load_schema())
    rng = random.Random(18)
    small = copy.deepcopy(report)
    small["run"]["timeline"] = small["run"]["timeline"][:5]
    small["run"]["step_times_ms"] = small["run"]["step_times_ms"][:5]
    invalid = 0
    for _ in range(300):
        data = _mutate(copy.deepcopy(small), rng)
        expected = reference.is_valid(data)
        try:
            ours(data)
            got = True
        except SchemaError:
            got = False
        assert got == expected, json.dumps(data)[:2000]
        invalid += not expected
    assert invalid > 100  # the mutations do reach invalid reports


def test_large_reports_are_written_compact_and_read_back_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Indented JSON takes Python's pure-Python encoder (~20x slower): only small files get it."""
    import gpusight.report as report_module

    small = typical_report()
    path = small.save(tmp_path / "small.json")
    assert path.read_text().startswith('{\n  "schema_version"')
    monkeypatch.setattr(report_module, "PRETTY_LIMIT", 1000)
    path = small.save(tmp_path / "large.json")
    text = path.read_text()
    assert text.startswith('{"schema_version": "1.') and text.count("\n") == 1
    assert load_report(path) == load_report(tmp_path / "small.json")


def test_absurdly_long_series_are_refused_by_length_first(
    report: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import gpusight.report_schema as report_schema

    monkeypatch.setattr(report_schema, "MAX_SERIES", len(report["run"]["timeline"]))
    data = copy.deepcopy(report)
    validate(data)  # as long as the limit: valid
    data["run"]["step_times_ms"] = [1.0] * (report_schema.MAX_SERIES + 1)
    err = bad(data)
    assert err.path == "run.step_times_ms"
    assert f"{report_schema.MAX_SERIES + 1} items, more than" in str(err)


def test_a_string_no_report_holds_is_refused_with_its_path() -> None:
    from gpusight.report_schema import MAX_STRING_CHARS

    data = typical_report().to_dict()
    data["notes"].append("x" * (MAX_STRING_CHARS + 1))
    with pytest.raises(ReportValidationError, match=r"notes\[\d+\]: a string of") as err:
        validate(data)
    assert err.value.path.startswith("notes[")
    data["notes"][-1] = "x" * MAX_STRING_CHARS  # the longest allowed
    validate(data)
