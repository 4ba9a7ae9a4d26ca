"""A schema-valid report dict -> the :class:`~gpusight.report.Report` dataclasses again.

For tools that take a report written by another process (``gpusight run --what-if`` reads
each re-run's report) and go on working with it as objects. The dict is validated first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .report import (
    Benchmark,
    CellPatch,
    Check,
    Evidence,
    Finding,
    Fix,
    Impact,
    PatchFile,
    Report,
    SourceLine,
    Verdict,
    WhatIf,
    load_report,
)


def _fix(d: Mapping[str, Any] | None) -> Fix | None:
    if not d:
        return None
    files = d.get("patch_files")
    cell = d.get("cell")
    return Fix(
        **{
            **d,
            "patch_files": [PatchFile(**f) for f in files] if files else None,
            "cell": CellPatch(**cell) if cell else None,
        }
    )


def _impact(d: Mapping[str, Any]) -> Impact:
    rng = d.get("speedup_range")
    return Impact(**{**d, "speedup_range": (rng[0], rng[1]) if rng else None})


def finding_from_dict(d: Mapping[str, Any]) -> Finding:
    """A finding as a report holds it -> a :class:`Finding` (the inverse of ``to_dict``)."""
    return Finding(
        id=d["id"],
        severity=d["severity"],
        title=d["title"],
        evidence=[
            Evidence(
                label=e["label"],
                value=e.get("value"),
                unit=e.get("unit"),
                source=SourceLine(**e["source"]) if e.get("source") else None,
            )
            for e in d.get("evidence") or ()
        ],
        impact=_impact(d.get("impact") or {}),
        fix=_fix(d.get("fix")) or Fix(text=""),
        detail=d.get("detail"),
        gpu_index=d.get("gpu_index"),
    )


def _what_if(d: Mapping[str, Any]) -> WhatIf:
    return WhatIf(
        change=d["change"],
        before_ms=d.get("before_ms"),
        after_ms=d.get("after_ms"),
        speedup=d.get("speedup"),
        finding_id=d.get("finding_id"),
        params=d.get("params"),
        noise_pct=d.get("noise_pct"),
        skipped=d.get("skipped"),
        series=d.get("series"),
        fix=_fix(d.get("fix")),
        scope=d.get("scope"),
    )


def report_from_dict(source: dict[str, Any]) -> Report:
    d = load_report(source)
    return Report(
        kind=d["kind"],
        machine=d["machine"],
        checks=[Check(**c) for c in d.get("checks", [])],
        benchmarks=[
            Benchmark(**{**b, "spread": tuple(b["spread"]) if b.get("spread") else None})
            for b in d.get("benchmarks", [])
        ],
        verdict=Verdict(**d["verdict"]) if d.get("verdict") else Verdict(),
        findings=[finding_from_dict(f) for f in d.get("findings", [])],
        what_if=[_what_if(w) for w in d.get("what_if", [])],
        run=d.get("run"),
        notes=list(d.get("notes", [])),
        title=d.get("title"),
        created_at=d.get("created_at") or Report(kind="x", machine={}).created_at,
    )
