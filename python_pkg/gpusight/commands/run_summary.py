"""What ``gpusight run`` prints when it is done: the terminal renderer's short view of the report
(``text_report.render_summary``), then the next command and the files written."""

from __future__ import annotations

import argparse
import os
import shlex
from typing import Any

from ..first_fix import first_finding
from ..report import Finding, Report
from ..rules.raised_run import raised_before_measuring
from ..text_report import EscapedStream, render_summary, render_what_if


def print_summary(report: Report, out: Any, args: argparse.Namespace | None = None) -> None:
    """A few lines on ``out``; with the command's ``args``, also what to run next and the files
    it wrote."""
    out.write(render_summary(report))
    if args is not None:
        out = EscapedStream(out)
        _print_next(report, first_finding(report), args, out)
        _print_written(args, out)


def _command(args: argparse.Namespace, *flags: str) -> str:
    return shlex.join(["gpusight", "run", *flags, args.script, *(args.args or [])])


def _print_next(report: Report, first: Finding | None, args: argparse.Namespace, out: Any) -> None:
    steps: list[tuple[str, str]] = []
    if raised_before_measuring(report):
        why = "once the error is fixed: nothing was measured"
        print(f"  next: {_command(args)}   ({why})", file=out)
        return
    estimated = any(f.impact.basis == "estimated" for f in report.findings)
    if not getattr(args, "what_if", False) and estimated:
        steps.append((_command(args, "--what-if"), "measures the estimated fixes, one re-run each"))
    patch = getattr(args, "patch", None)
    written = getattr(args, "written", None)
    # Only a diff this run wrote: a file left from an earlier run is another fix's.
    if patch and os.path.exists(patch) and (written is None or patch in written):
        steps.append(
            (
                _command(args, "--verify", patch, *(["--report", args.json] if args.json else [])),
                "times the patched script against yours; your files stay as they are",
            )
        )
    elif first is not None and first.fix.patch:
        steps.append(
            (_command(args, "--patch", "fix.diff"), "writes the first fix as a patch of your lines")
        )
    for i, (command, why) in enumerate(steps):
        print(f"  {'next:' if i == 0 else '     '} {command}   ({why})", file=out)


def _print_written(args: argparse.Namespace, out: Any) -> None:
    written = getattr(args, "written", None)
    if written is None:
        paths = (args.json, getattr(args, "html", None), getattr(args, "patch", None))
        written = [p for p in paths if p and os.path.exists(p)]
    if written:
        print(f"  wrote: {', '.join(written)}", file=out)


def print_what_if(report: Report, out: Any) -> None:
    """The what-if rows: each change's measured gain with its noise, and the change to make."""
    out.write(render_what_if(report))
