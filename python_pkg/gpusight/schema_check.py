"""A JSON-Schema (draft-07 subset) validator compiled once into closures, for the report schema.

Why not ``jsonschema``: importing it pulls its format checkers (``rfc3987_syntax`` compiles dozens
of grammars at import: seconds), it takes ~100 ms for a typical report, and its message for a bad
value under a ``oneOf`` is the whole object. Here a report is checked in a few milliseconds, the
first failing field is named by its full path (``run.step_time_ms``), the message is bounded in
length, and NaN/Infinity are refused (they are not JSON).

Only the keywords the report schema uses are supported; compiling a schema with any other keyword
raises, so an extension of the schema cannot be silently ignored.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Check = Callable[[Any], None]

#: Annotations: no effect on validation.
_IGNORED = frozenset(
    {"$schema", "$id", "definitions", "title", "description", "default", "examples", "$comment"}
)
SUPPORTED = frozenset(
    {
        "type",
        "enum",
        "pattern",
        "required",
        "properties",
        "additionalProperties",
        "items",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "oneOf",
        "anyOf",
        "$ref",
    }
)

#: Longest value quoted in a message.
VALUE_CHARS = 60


class SchemaError(Exception):
    """One failing value: ``path`` from the root (keys and indices), and what is wrong."""

    def __init__(self, message: str, path: tuple[str | int, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.path = path


def short(value: Any) -> str:
    """A value for a message: its repr, cut to VALUE_CHARS (a 50 MB dict stays one line)."""
    if isinstance(value, dict):
        return f"an object with {len(value)} keys"
    if isinstance(value, list):
        return f"an array of {len(value)} items"
    text = repr(value)
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 3] + "..."


def json_type(value: Any) -> str:
    """The JSON type name of a parsed value (a bool is ``boolean``, not ``number``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_integer(v: Any) -> bool:
    # draft-07: 2.0 is an integer.
    return _is_number(v) and (isinstance(v, int) or float(v).is_integer())


_TYPE_TESTS: dict[str, Callable[[Any], bool]] = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "number": _is_number,
    "integer": _is_integer,
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}
# Exact types that pass each JSON type without further thought (the common case, one set lookup).
_FAST_TYPES: dict[str, frozenset[type]] = {
    "null": frozenset({type(None)}),
    "boolean": frozenset({bool}),
    "number": frozenset({int, float}),
    "integer": frozenset({int}),
    "string": frozenset({str}),
    "array": frozenset({list}),
    "object": frozenset({dict}),
}


def _not_finite(v: Any) -> bool:
    return isinstance(v, float) and v - v != 0.0


class Compiler:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.refs: dict[str, Check] = {}

    def ref(self, pointer: str) -> Check:
        if pointer in self.refs:
            return self.refs[pointer]
        if not pointer.startswith("#/"):
            raise ValueError(f"only local $ref is supported, not {pointer!r}")
        target: Any = self.root
        for part in pointer[2:].split("/"):
            target = target[part]
        box: list[Check] = []
        # Recursive definitions: the slot exists before its body is compiled.
        self.refs[pointer] = lambda v: box[0](v)
        box.append(self.compile(target))
        self.refs[pointer] = box[0]
        return box[0]

    def compile(self, schema: dict[str, Any]) -> Check:
        unknown = set(schema) - SUPPORTED - _IGNORED
        if unknown:
            raise ValueError(f"unsupported schema keywords {sorted(unknown)}")
        keys = set(schema) - _IGNORED
        types = schema.get("type")
        # The common shapes get one closure each (a report has thousands of leaves).
        if types == "object" and keys <= {"type", "properties", "required", "additionalProperties"}:
            return self._object(schema, typed=True)
        if types == "array" and keys <= {"type", "items", "minItems", "maxItems"}:
            return _array_check(
                self.compile(schema["items"]) if "items" in schema else None,
                schema.get("minItems"),
                schema.get("maxItems"),
            )
        if types is not None and keys <= {"type", "minimum", "maximum"}:
            return _type_check(types, schema.get("minimum"), schema.get("maximum"))
        checks: list[Check] = []
        if "$ref" in schema:
            checks.append(self.ref(schema["$ref"]))
        if "type" in schema:
            checks.append(_type_check(schema["type"]))
        if "enum" in schema:
            checks.append(_enum_check(schema["enum"]))
        if "pattern" in schema:
            checks.append(_pattern_check(schema["pattern"]))
        if "minimum" in schema or "maximum" in schema:
            checks.append(_range_check(schema.get("minimum"), schema.get("maximum")))
        if "minItems" in schema or "maxItems" in schema or "items" in schema:
            item = self.compile(schema["items"]) if "items" in schema else None
            checks.append(
                _array_check(item, schema.get("minItems"), schema.get("maxItems"), typed=False)
            )
        if {"properties", "required", "additionalProperties"} & keys:
            checks.append(self._object(schema, typed=False))
        for key in ("oneOf", "anyOf"):
            if key in schema:
                checks.append(
                    _one_of([self.compile(s) for s in schema[key]], exactly=key == "oneOf")
                )
        if len(checks) == 1:
            return checks[0]

        def all_of(v: Any) -> None:
            for c in checks:
                c(v)

        return all_of

    def _object(self, schema: dict[str, Any], *, typed: bool) -> Check:
        props = {k: self.compile(s) for k, s in schema.get("properties", {}).items()}
        required = tuple(schema.get("required", ()))
        extra = schema.get("additionalProperties", True)
        extra_check = self.compile(extra) if isinstance(extra, dict) else None
        closed = extra is False

        def check(v: Any) -> None:
            if not isinstance(v, dict):
                if typed:
                    raise SchemaError(f"{short(v)} is not of type object (it is {json_type(v)})")
                return  # not an object: only "type" may object to it
            for name in required:
                if name not in v:
                    raise SchemaError(f"{short(name)} is a required property")
            for key, item in v.items():
                c = props.get(key)
                if c is None:
                    if closed:
                        raise SchemaError(
                            f"Additional properties are not allowed ({short(key)} was unexpected)"
                        )
                    c = extra_check
                    if c is None:
                        continue
                try:
                    c(item)
                except SchemaError as exc:
                    exc.path = (key, *exc.path)
                    raise

        return check


def _type_check(
    types: str | list[str], low: float | None = None, high: float | None = None
) -> Check:
    names = [types] if isinstance(types, str) else list(types)
    fast = frozenset().union(*(_FAST_TYPES[n] for n in names))
    tests = [_TYPE_TESTS[n] for n in names]
    wanted = " or ".join(names)
    bounded = low is not None or high is not None
    in_range = _range_check(low, high)

    def check(v: Any) -> None:
        if type(v) in fast or any(t(v) for t in tests):
            if type(v) is float and v - v != 0.0:
                raise SchemaError(f"{v!r} is not a finite number (NaN and Infinity are not JSON)")
            if bounded:
                in_range(v)
            return
        if _not_finite(v):
            raise SchemaError(f"{v!r} is not a finite number (NaN and Infinity are not JSON)")
        raise SchemaError(f"{short(v)} is not of type {wanted} (it is {json_type(v)})")

    return check


def _enum_check(values: list[Any]) -> Check:
    allowed = frozenset(values)
    listed = ", ".join(map(repr, values[:6])) + (", ..." if len(values) > 6 else "")

    def check(v: Any) -> None:
        try:
            ok = v in allowed
        except TypeError:  # unhashable
            ok = False
        if not ok:
            raise SchemaError(f"{short(v)} is not one of {listed}")

    return check


def _pattern_check(pattern: str) -> Check:
    compiled = re.compile(pattern)

    def check(v: Any) -> None:
        if isinstance(v, str) and not compiled.search(v):
            raise SchemaError(f"{short(v)} does not match {pattern!r}")

    return check


def _range_check(low: float | None, high: float | None) -> Check:
    def check(v: Any) -> None:
        if not _is_number(v):
            return
        if low is not None and v < low:
            raise SchemaError(f"{short(v)} is less than the minimum of {low}")
        if high is not None and v > high:
            raise SchemaError(f"{short(v)} is greater than the maximum of {high}")

    return check


def _array_check(
    item: Check | None, low: int | None, high: int | None, *, typed: bool = True
) -> Check:
    def check(v: Any) -> None:
        if not isinstance(v, list):
            if typed:
                raise SchemaError(f"{short(v)} is not of type array (it is {json_type(v)})")
            return
        if low is not None and len(v) < low:
            raise SchemaError(f"{short(v)} has fewer than {low} items")
        if high is not None and len(v) > high:
            raise SchemaError(f"{short(v)} has more than {high} items")
        if item is None:
            return
        i = 0
        try:
            for i, x in enumerate(v):  # noqa: B007 (i names the failing item)
                item(x)
        except SchemaError as exc:
            exc.path = (i, *exc.path)
            raise

    return check


def _one_of(branches: list[Check], *, exactly: bool) -> Check:
    def check(v: Any) -> None:
        errors: list[SchemaError] = []
        passed = 0
        for b in branches:
            try:
                b(v)
                passed += 1
            except SchemaError as exc:
                errors.append(exc)
        if passed == 1 or (passed > 1 and not exactly):
            return
        if passed > 1:
            raise SchemaError(f"{short(v)} matches more than one of the allowed forms")
        # The branch that got furthest into the value names the field best; a branch that failed
        # at the value itself (null where an object is allowed) only if none got further.
        best = max(errors, key=lambda e: len(e.path))
        if not best.path:
            raise SchemaError("; ".join(dict.fromkeys(e.message for e in errors[:3])))
        raise SchemaError(best.message, best.path)

    return check


def compile_schema(schema: dict[str, Any]) -> Check:
    """A function that returns None for a valid value and raises SchemaError for the first
    invalid one."""
    return Compiler(schema).compile(schema)
