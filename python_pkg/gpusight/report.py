"""The report model: findings, checks, benchmarks and the verdict, serialised to the schema."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ._version import __version__
from .report_schema import SCHEMA_VERSION, ReportValidationError, validate

Severity = Literal["info", "warn", "critical"]
CheckStatus = Literal["pass", "warn", "fail", "info", "not_checked"]
Scalar = str | int | float | bool | None

SEVERITY_ORDER: dict[str, int] = {"critical": 0, "warn": 1, "info": 2}


@dataclass
class SourceLine:
    file: str
    line: int
    code: str | None = None
    count: int | None = None


@dataclass
class Evidence:
    label: str
    value: Scalar
    unit: str | None = None
    source: SourceLine | None = None


@dataclass
class Impact:
    basis: Literal["measured", "estimated", "none"] = "none"
    text: str = ""
    speedup: float | None = None
    recoverable_pct: float | None = None
    speedup_range: tuple[float, float] | None = None
    """An estimate for a change of the work per step: the range the true gain falls in."""


@dataclass
class PatchFile:
    """A file a patch changes, as the run saw it: how a stale patch is told apart."""

    path: str
    """As the diff names it, without ``a/`` or ``b/``."""
    sha256: str
    """Of the file's text (UTF-8) when the patch was made."""


@dataclass
class CellPatch:
    """The fix as a change to a notebook cell (since 1.2): what a notebook needs to find the cell
    (its text as it ran) and to show or apply the change (the changed text, the call's lines)."""

    source: str
    """The cell's text as it ran (trailing newlines stripped): the cell is found by it."""
    patched: str
    """The same cell with the fix applied."""
    line: int
    """First line of the changed call in the cell, counted from 1."""
    end_line: int | None = None
    """Last line of the changed call in the patched cell."""
    execution_count: int | None = None
    """The kernel's execution count of that run of the cell (``In[n]``)."""
    label: str | None = None
    """How the report names the cell: ``cell [5]``."""


@dataclass
class Fix:
    text: str
    snippet_id: str | None = None
    code: str | None = None
    language: Literal["python", "shell", "text"] | None = None
    patch: str | None = None
    """The fix as a change to the user's own lines: a unified diff (``patch -p1``)."""
    patch_files: list[PatchFile] | None = None
    """What ``patch`` was made from: a file whose hash differs now makes the patch stale."""
    cell: CellPatch | None = None
    """Where the change is to a notebook cell: that cell, found by its text, and its new text."""
    unbound_names: list[str] | None = None
    """Names ``code`` reads that the user's kernel did not define when the report was made or
    shown: the code is then offered for Copy only (``fixes/kernel_names.py``)."""


@dataclass
class Finding:
    id: str
    severity: Severity
    title: str
    evidence: list[Evidence] = field(default_factory=list)
    impact: Impact = field(default_factory=Impact)
    fix: Fix = field(default_factory=lambda: Fix(text=""))
    detail: str | None = None
    gpu_index: int | None = None


@dataclass
class Check:
    id: str
    label: str
    status: CheckStatus
    value: str
    detail: str | None = None
    finding_id: str | None = None


@dataclass
class Benchmark:
    id: str
    label: str
    value: float | None
    unit: str
    ceiling: float | None = None
    ceiling_source: str | None = None
    spread: tuple[float, float] | None = None
    repeats: int | None = None
    params: dict[str, Scalar] | None = None
    skipped: str | None = None
    series: list[dict[str, Any]] | None = None


@dataclass
class Verdict:
    bottleneck: str = "none"
    gpu_busy_pct: float | None = None
    summary: str = ""


@dataclass
class WhatIf:
    change: str
    before_ms: float | None
    after_ms: float | None
    speedup: float | None
    finding_id: str | None = None
    params: dict[str, Scalar] | None = None
    noise_pct: float | None = None
    skipped: str | None = None
    series: list[dict[str, Any]] | None = None
    fix: Fix | None = None  # the code that was measured (e.g. every winner combined)
    # What the timing covered: the user's whole step with their loader ("end_to_end"), or the
    # step's compute alone on batches cached from the loader ("compute_only").
    scope: Literal["end_to_end", "compute_only"] | None = None


def _required(f: dataclasses.Field[Any]) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def _drop_none(value: Any) -> Any:
    """Dataclass -> JSON-ready value; optional fields left as None are omitted.

    Fields without a default are required by the schema and kept even when None (an
    Evidence whose value is null, a WhatIf that has no after_ms)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _drop_none(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if getattr(value, f.name) is not None or _required(f)
        }
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_drop_none(v) for v in value]
    return value


#: Longest report (compact JSON characters) written indented; beyond it, compact. Python's
#: C encoder only runs without indent: a 40 MB report takes ~10 s indented, ~0.5 s compact.
PRETTY_LIMIT = 2_000_000


def report_json(data: dict[str, Any]) -> str:
    """A report's file text: indented for reading, compact when it is large."""
    text = json.dumps(data, allow_nan=False)
    if len(text) <= PRETTY_LIMIT:
        text = json.dumps(data, indent=2, allow_nan=False)
    return text


LEADS = frozenset({"code.cpu_model", "cfg.anomaly_detection", "env.launch_blocking"})
"""Findings that come before every other: the whole model on the CPU beside a usable GPU, where
every other figure of the step was measured on the CPU; a debugging switch that slowed every
measured step (``rules/debug_switches.py``); as information (a check's "unset"), none leads.
``src/view/findings.ts`` keeps the same."""


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """``LEADS`` first, then measured gains (a measurement outranks any estimate), then the
    largest recoverable share, then severity, then catalogue id for a stable order."""

    def key(f: Finding) -> tuple[int, int, float, int, str]:
        share = f.impact.recoverable_pct or 0.0
        speed = f.impact.speedup or 1.0
        return (
            0 if f.id in LEADS and f.severity != "info" else 1,
            0 if f.impact.basis == "measured" and speed > 1 else 1,
            -max(share, (1 - 1 / speed) * 100 if speed > 1 else 0.0),
            SEVERITY_ORDER[f.severity],
            f.id,
        )

    return sorted(findings, key=key)


@dataclass
class Report:
    """A gpusight report. ``to_dict()`` is always schema-valid (``validate()`` proves it)."""

    kind: str
    machine: dict[str, Any]
    checks: list[Check] = field(default_factory=list)
    benchmarks: list[Benchmark] = field(default_factory=list)
    verdict: Verdict = field(default_factory=Verdict)
    findings: list[Finding] = field(default_factory=list)
    what_if: list[WhatIf] = field(default_factory=list)
    run: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    title: str | None = None
    created_at: str = field(
        default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "gpusight_version": __version__,
            "kind": self.kind,
            "created_at": self.created_at,
        }
        if self.title is not None:
            out["title"] = self.title
        out.update(
            machine=self.machine,
            checks=_drop_none(self.checks),
            benchmarks=_drop_none(self.benchmarks),
            run=self.run,
            verdict=_drop_none(self.verdict) | {"gpu_busy_pct": self.verdict.gpu_busy_pct},
            findings=_drop_none(sort_findings(self.findings)),
            what_if=_drop_none(self.what_if),
            notes=list(self.notes),
        )
        return out

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def validate(self) -> None:
        validate(self.to_dict())

    def save(self, path: str | Path) -> Path:
        """Write the report as JSON after validating it."""
        data = self.to_dict()
        validate(data)
        from .atomic_write import write_text

        return write_text(path, report_json(data) + "\n")

    def finding(self, finding_id: str) -> Finding | None:
        return next((f for f in self.findings if f.id == finding_id), None)

    @property
    def finding_ids(self) -> list[str]:
        return [f.id for f in sort_findings(self.findings)]

    def save_html(self, path: str | Path) -> Path:
        """Write the report as one self-contained HTML file (as ``gpusight html``), validated."""
        if RENDERERS.save_html is None:
            raise RuntimeError("Report.save_html needs gpusight.html_export: import gpusight first")
        return RENDERERS.save_html(self, path)

    def _repr_html_(self) -> str | None:
        """Frontends without the extension (nbconvert, VS Code, Colab): the same elements, from
        the standalone bundle (``html_export.notebook_html``). None if the bundle was not built."""
        if RENDERERS.repr_html is None:
            return None
        return RENDERERS.repr_html(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        """IPython's text form: the readable report (``text_report``), not the dataclass fields."""
        if RENDERERS.text is None:
            p.text(repr(self))
            return
        p.text("Report(...)" if cycle else RENDERERS.text(self).rstrip("\n"))

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any] | None:
        """In a Jupyter kernel: the report as ``application/vnd.gpusight.report+json`` (drawn by
        the extension), the self-contained HTML fallback and one line of text, one copy each
        (``jupyter.display``). Elsewhere None, leaving the text report above."""
        if RENDERERS.mimebundle is None:
            return None
        return RENDERERS.mimebundle(self, include, exclude)


@dataclass
class Renderers:
    """How a Report shows itself. The renderer modules (``html_export``, ``text_report``,
    ``jupyter.display``) fill these slots when they load, and ``gpusight/__init__`` loads them:
    renderers depend on the report, the report never on them, so neither can import the other
    half-initialised."""

    save_html: Callable[[Report, str | Path], Path] | None = None
    repr_html: Callable[[Report], str | None] | None = None
    text: Callable[[Report], str] | None = None
    mimebundle: Callable[[Report, Any, Any], dict[str, Any] | None] | None = None


RENDERERS = Renderers()


def load_report(source: str | Path | dict[str, Any]) -> dict[str, Any]:
    """Read a report (path, JSON text or dict) and validate it; returns the plain dict.

    Raises ReportValidationError naming the offending field, or for unreadable JSON (not UTF-8,
    NaN/Infinity, nested too deeply): always one line.
    """
    if isinstance(source, dict):
        data: Any = source
    else:
        text = str(source)
        if isinstance(source, Path) or not text.lstrip().startswith("{"):
            text = read_report_text(Path(source))
        data = parse_report_json(text)
    validate(data)
    return dict(data)


MAX_REPORT_BYTES = 1 << 30


def read_report_text(path: Path) -> str:
    """A report file's text: UTF-8 (a byte-order mark is allowed), else one clear error. Only
    a regular file is read (``/dev/zero`` reads forever, a FIFO blocks), up to a bound."""
    import stat

    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            what = "Is a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise ReportValidationError(f"cannot read report {path}: {what}")
        if st.st_size > MAX_REPORT_BYTES:
            raise ReportValidationError(
                f"cannot read report {path}: {st.st_size >> 20} MiB, more than a report holds "
                f"({MAX_REPORT_BYTES >> 20} MiB)"
            )
        raw = path.read_bytes()
    except OSError as exc:
        raise ReportValidationError(
            f"cannot read report {path}: {exc.strerror or type(exc).__name__}"
        ) from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        hint = " (it looks like UTF-16)" if raw[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        raise ReportValidationError(
            f"report {path} is not UTF-8 text{hint}: byte {raw[exc.start]:#04x} at offset "
            f"{exc.start}; a gpusight report is UTF-8 JSON"
        ) from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_report_json(text: str) -> Any:
    """JSON text -> value; NaN/Infinity and runaway nesting are refused in one line."""
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise ReportValidationError(
            f"report is not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}"
        ) from None
    except ValueError as exc:  # from _refuse_constant, or an integer of thousands of digits
        if "int_max_str_digits" in str(exc) or "digits" in str(exc):
            raise ReportValidationError(
                "report is not valid JSON for gpusight: it holds an integer of more than "
                f"{sys.get_int_max_str_digits()} digits, which no report field takes"
            ) from None
        raise ReportValidationError(
            f"report is not valid JSON: {exc} (NaN and Infinity have no place in a report)"
        ) from None
    except RecursionError:
        raise ReportValidationError("report is not valid JSON: nested too deeply") from None
