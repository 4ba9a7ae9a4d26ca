"""The environment checklist being built: ``EnvironmentResult`` (checks and findings) and the
evidence helper every environment layer shares.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..probes.facts import Scalar
from ..report import Check, CheckStatus, Evidence, Finding


@dataclass
class EnvironmentResult:
    checks: list[Check] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def check(
        self,
        id: str,
        label: str,
        status: CheckStatus,
        value: str,
        detail: str | None = None,
        finding: Finding | None = None,
    ) -> None:
        if finding is not None:
            self.findings.append(finding)
        self.checks.append(
            Check(id, label, status, value, detail, finding.id if finding is not None else None)
        )


NOT_CHECKED = "not checked"


def _ev(label: str, value: Scalar, unit: str | None = None) -> Evidence:
    return Evidence(label=label, value=value, unit=unit)
