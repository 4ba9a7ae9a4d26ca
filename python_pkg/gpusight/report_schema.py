"""Load and check reports against the one contract, ``schema/report.schema.json``."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from importlib import resources
from typing import Any

SCHEMA_MAJOR = 1
SCHEMA_MINOR = 9
SCHEMA_VERSION = f"{SCHEMA_MAJOR}.{SCHEMA_MINOR}"


class ReportValidationError(ValueError):
    """A report does not match the schema; the message names the field."""

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path


@lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    text = resources.files("gpusight.schema").joinpath("report.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def finding_ids() -> tuple[str, ...]:
    """The finding catalogue, as the schema holds it."""
    return tuple(load_schema()["definitions"]["FindingId"]["enum"])


def bottlenecks() -> tuple[str, ...]:
    return tuple(load_schema()["definitions"]["Bottleneck"]["enum"])


def breakdown_keys() -> tuple[str, ...]:
    """The step-time breakdown's categories, in the order the schema lists (and the renderers
    draw) them."""
    return tuple(load_schema()["definitions"]["Breakdown"]["properties"])


def _field_path(parts: Any) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(root)"


#: More ranks than any job has had; a larger figure is a damaged report (and merging it would
#: try to account for each missing rank).
MAX_WORLD_SIZE = 1 << 20
#: More points than any series of a run holds (10 Hz for a year is 3e8 bytes of JSON already):
#: a longer one is a damaged or hostile file, refused before anything iterates over it.
MAX_SERIES = 10_000_000
MAX_STRING_CHARS = 4 << 20
"""The longest text a report may hold (a note, a patch): the widget drew a 30 MB note and its
tab ran out of memory on a 100 MB one."""
_SERIES = ("timeline", "step_times_ms", "step_starts_s", "syncs")


@lru_cache(maxsize=1)
def compiled_validator() -> Callable[[Any], None]:
    """The schema compiled once per process (a few ms), see ``schema_check``."""
    from .schema_check import compile_schema

    return compile_schema(load_schema())


def check_version(data: Any) -> None:
    """Refuse reports from another major version with a message that says what to do."""
    if not isinstance(data, dict):
        raise ReportValidationError(
            f"report must be a JSON object, got {type(data).__name__}", "(root)"
        )
    if "schema_version" not in data:
        raise ReportValidationError(
            "schema_version is missing: this is not a gpusight report", "schema_version"
        )
    version = data["schema_version"]
    if not isinstance(version, str):
        from .schema_check import json_type, short

        raise ReportValidationError(
            f'schema_version must be a string such as "{SCHEMA_VERSION}", not the '
            f"{json_type(version)} {short(version)} (write it in quotes)",
            "schema_version",
        )
    try:
        major, minor = (int(x) for x in version.split(".", 1))
    except ValueError:
        from .schema_check import short

        raise ReportValidationError(
            f"schema_version {short(version)} is not MAJOR.MINOR", "schema_version"
        ) from None
    if major > SCHEMA_MAJOR or (major == SCHEMA_MAJOR and minor > SCHEMA_MINOR):
        raise ReportValidationError(
            f"report uses schema {version}, newer than this gpusight reads ({SCHEMA_VERSION}): "
            "upgrade gpusight (pip install -U gpusight)",
            "schema_version",
        )
    if major < SCHEMA_MAJOR:
        raise ReportValidationError(
            f"report uses schema {version}, older than this gpusight reads ({SCHEMA_VERSION})",
            "schema_version",
        )


def _check_sizes(data: dict[str, Any]) -> None:
    """Figures the schema cannot bound but that no real run has (a damaged or hostile file)."""
    long = _long_string(data)
    if long is not None:
        path, n = long
        raise ReportValidationError(
            f"invalid report at {path}: a string of {n:,} characters, more than "
            f"{MAX_STRING_CHARS:,} (no report text is that long; a browser tab drawing it "
            "runs out of memory)",
            path,
        )
    run = data.get("run")
    if not isinstance(run, dict):
        return
    for key in _SERIES:
        series = run.get(key)
        if isinstance(series, list) and len(series) > MAX_SERIES:
            raise ReportValidationError(
                f"invalid report at run.{key}: {len(series)} items, more than {MAX_SERIES}",
                f"run.{key}",
            )
    kernels = run.get("kernels")
    if not isinstance(kernels, dict):
        return
    for key in ("dist_world_size", "dist_rank", "dist_local_world_size"):
        v = kernels.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            if not 0 <= v <= MAX_WORLD_SIZE:
                raise ReportValidationError(
                    f"invalid report at run.kernels.{key}: {v!r} is outside 0..{MAX_WORLD_SIZE}",
                    f"run.kernels.{key}",
                )


def _long_string(data: Any) -> tuple[str, int] | None:
    """The first string longer than ``MAX_STRING_CHARS`` (its field path and length): one
    plain walk, the paths only once such a string is there."""
    stack: list[Any] = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str) and len(value) > MAX_STRING_CHARS:
            return _path_to_long(data, ()), len(value)
    return None


def _path_to_long(value: Any, path: tuple[str | int, ...]) -> str:
    items: Any = value.items() if isinstance(value, dict) else enumerate(value)
    for k, v in items:
        if isinstance(v, str) and len(v) > MAX_STRING_CHARS:
            return _field_path((*path, k))
        if isinstance(v, (dict, list)) and _long_string(v) is not None:
            return _path_to_long(v, (*path, k))
    return _field_path(path)


def validate(data: Any) -> None:
    """Raise ReportValidationError naming the first offending field (its full path, e.g.
    ``run.step_time_ms``) in one bounded line, or return None."""
    from .schema_check import SchemaError

    check_version(data)
    _check_sizes(data)
    try:
        compiled_validator()(data)
    except SchemaError as exc:
        path = _field_path(exc.path)
        raise ReportValidationError(f"invalid report at {path}: {exc.message}", path) from None
    except RecursionError:
        raise ReportValidationError("invalid report: nested too deeply") from None
