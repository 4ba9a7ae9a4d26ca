"""Load and check reports against the one contract, ``schema/report.schema.json``."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

SCHEMA_MAJOR = 1
SCHEMA_MINOR = 1
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


def _field_path(parts: Any) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(root)"


def check_version(data: Any) -> None:
    """Refuse reports from another major version with a message that says what to do."""
    if not isinstance(data, dict):
        raise ReportValidationError(
            f"report must be a JSON object, got {type(data).__name__}", "(root)"
        )
    version = data.get("schema_version")
    if not isinstance(version, str):
        raise ReportValidationError(
            "schema_version is missing: this is not a gpusight report", "schema_version"
        )
    try:
        major, minor = (int(x) for x in version.split(".", 1))
    except ValueError:
        raise ReportValidationError(
            f"schema_version {version!r} is not MAJOR.MINOR", "schema_version"
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


def validate(data: Any) -> None:
    """Raise ReportValidationError naming the first offending field, or return None."""
    import jsonschema

    check_version(data)
    validator = jsonschema.Draft7Validator(load_schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.absolute_path), str(e.path)))
    if errors:
        # The deepest, most specific error names the field best.
        err = max(errors, key=lambda e: len(e.absolute_path))
        path = _field_path(err.absolute_path)
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ReportValidationError(f"invalid report at {path}: {err.message}{more}", path)
