"""The one rule every finding's severity obeys: it follows the gain.

``critical`` only where the finding's measured or estimated gain is large (at least 1.3x and a
quarter of the step; an estimated range by its low end), ``warn`` for a smaller gain (or a
range that reaches one), ``info`` where the gain is negligible or measured within the noise. A
finding without a figure (advice, or a problem whose gain depends on the job) is at most a
warning: the rules that raise it may say ``info``. Blockers are the exception: a GPU that
cannot be used at all, or a run that never ran, has no gain ratio, and nothing else matters
until it is fixed. The report builders call :func:`settle` last (watch, what-if, diagnose,
inference, the distributed merge), so a rule's own guess never reaches the user.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..report import Finding, Impact, Severity

CRITICAL_SPEEDUP = 1.3
CRITICAL_SHARE_PCT = 25.0
WARN_SPEEDUP = 1.03
"""Below this the gain is within what a rerun varies by: information, not a warning."""

BLOCKERS = frozenset(
    {
        "env.no_torch",
        "env.cpu_only_build",
        "env.cuda_unavailable",
        "env.driver_too_old",
        "env.arch_unsupported",
        "env.visible_devices",
        "env.other_processes",
        "env.launch_blocking",
        "load.oom_risk",
        "code.raised",
    }
)
"""Ids whose severity stays as their rule set it. All but two keep the GPU from being used
(or the run from running); ``env.launch_blocking`` serialises every launch of any job, and
``load.oom_risk`` is a crash about to happen, not a speed."""


def gain(impact: Impact) -> float | None:
    """The finding's gain as a speedup (its point estimate, else its range's low end), or None
    without a figure."""
    if impact.basis == "none":
        return None
    if impact.speedup:
        return float(impact.speedup)
    if impact.speedup_range:
        return float(impact.speedup_range[0])
    pct = impact.recoverable_pct
    if pct is not None and 0 < pct < 100:
        return 1.0 / (1.0 - pct / 100.0)
    return None


def share_pct(impact: Impact, speedup: float) -> float:
    """The share of the step the change gives back."""
    if impact.recoverable_pct is not None:
        return float(impact.recoverable_pct)
    return 100.0 * (1.0 - 1.0 / speedup) if speedup > 0 else 0.0


def severity_for(f: Finding) -> Severity:
    if f.id in BLOCKERS:
        return f.severity
    pct = f.impact.recoverable_pct
    if f.impact.basis == "measured" and pct is not None and pct <= 0:
        return "info"  # measured within the noise: it gives nothing back
    g = gain(f.impact)
    if g is None:
        return "info" if f.severity == "info" else "warn"
    if g >= CRITICAL_SPEEDUP and share_pct(f.impact, g) >= CRITICAL_SHARE_PCT:
        return "critical"
    # An estimated range from no gain up to a real one is a smaller gain, not none.
    top = max([g, *(f.impact.speedup_range or ())])
    return "warn" if top >= WARN_SPEEDUP else "info"


def settle(findings: Iterable[Finding]) -> None:
    """Every finding's severity by the rule (in place)."""
    for f in findings:
        f.severity = severity_for(f)
