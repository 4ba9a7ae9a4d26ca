"""``gpusight run --patch FILE``: which fix the diff holds, and writing it.

The diff is the fix the report leads with where that fix changes the user's lines. Where the
what-if measured gains, only a measured fix's patch is written: a finding below a measured
command (``--batch-size 512``) whose own change was not measured, or measured within the noise,
is no fix to apply and verify in its place. A fix measured as no faster is never written.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..report import Finding, Report


def patch_finding(findings: list[Finding]) -> tuple[Finding | None, str | None]:
    """The finding whose patch ``--patch`` writes, or None and why none."""
    from ..report import sort_findings

    ordered = sort_findings(findings)
    measured = [f for f in ordered if f.impact.basis == "measured" and (f.impact.speedup or 0) > 1]
    # A fix the what-if measured as no faster is no fix to hand over, whatever else ran.
    unmeasured = [f for f in ordered if f.impact.basis != "measured"]
    found = next((f for f in (measured or unmeasured) if f.fix.patch), None)
    if found is not None:
        return found, None
    if measured:
        first = " ".join(measured[0].fix.text.split())
        return None, (
            f"the measured fixes change no line of your own code (the first: {first}): "
            "nothing written"
        )
    if any(f.fix.patch for f in ordered):
        return None, (
            "the what-if measured no gain for the fixes that change your lines (its rows say "
            "so): nothing written"
        )
    return None, (
        "no fix here changes a line of your own code (the call it would change was not seen, "
        "or lives in a library): nothing written"
    )


def write_patch(report: Report, path: str | None, quiet: bool) -> str | None:
    """The chosen finding's patch written to ``path``; the path, or None where nothing was."""
    if not path:
        return None
    found, why = patch_finding(report.findings)
    if found is None or found.fix.patch is None:
        if os.path.exists(path):
            why = f"{why} ({path}, left from an earlier run, is not this run's fix)"
        print(f"gpusight run: --patch: {why}", file=sys.stderr)
        return None
    from ..atomic_write import write_text
    from ..fixes.patch_files import header

    # Above the diff (patch and git apply skip it): what it fixes, and the hashes of the files
    # it was made from, so that --verify refuses it once they change.
    what = " ".join(f"{found.id}: {found.fix.text}".split())
    try:
        write_text(path, header(found.fix.patch_files or [], what) + found.fix.patch)
    except OSError as exc:
        why = exc.strerror if exc.strerror else str(exc)
        print(f"gpusight run: could not write {path}: {why}", file=sys.stderr)
        return None
    if not quiet:
        print(
            f"gpusight: the fix for {found.id} written to {path} (patch -p1 < it)", file=sys.stderr
        )
    return path
