"""What ``gpusight run`` prints when it is done: the verdict, the change to make first with its
gain marked measured or estimated, the other findings, the next command, the files written."""

from __future__ import annotations

import argparse
import os
import shlex
from typing import Any

from ..durations import format_ms
from ..first_fix import changed_lines, first_finding, gain_text
from ..report import Finding, Report, sort_findings
from ..speed_of_light_text import mfu_text
from ..text_report import EscapedStream

CODE_LINES = 8
"""Of a fix's code without a patch, the lines shown (the rest is in the report)."""


def print_summary(report: Report, out: Any, args: argparse.Namespace | None = None) -> None:
    """A few lines on ``out``; with the command's ``args``, also what to run next and the files
    it wrote."""
    out = EscapedStream(out)
    run = report.run or {}
    print(f"\ngpusight: {report.verdict.bottleneck}: {report.verdict.summary}", file=out)
    split = run.get("breakdown_ms") or {}
    total = run.get("step_time_ms") or 0.0
    if split and total:
        # Parts under half a percent of the step say nothing at this precision.
        parts = ", ".join(f"{k} {format_ms(v)}" for k, v in split.items() if v >= 0.005 * total)
        print(f"  step {format_ms(total)} over {run.get('steps')} steps: {parts}", file=out)
    mfu = mfu_text(run.get("speed_of_light") or {})
    if mfu:
        print(f"  MFU: {mfu}", file=out)
    first = first_finding(report)
    if first is not None:
        _print_first(first, out)
    others = [f for f in sort_findings(report.findings) if f is not first][:4]
    if others:
        print("  other findings:" if first is not None else "  findings:", file=out)
    for f in others:
        gain = gain_text(f.impact)
        print(
            f"    {f.severity:8} {f.id}: {f.title}{_where(f)}{f' ({gain})' if gain else ''}",
            file=out,
        )
    for note in report.notes:
        print(f"  note: {note}", file=out)
    if args is not None:
        _print_next(report, first, args, out)
        _print_written(args, out)


def _where(f: Finding) -> str:
    src = next((e.source for e in f.evidence if e.source is not None), None)
    return f" [{src.file}:{src.line}]" if src else ""


def _print_first(f: Finding, out: Any) -> None:
    gain = gain_text(f.impact)
    print(f"  do this first: {f.fix.text}", file=out)
    print(f"    for {f.id}: {f.title}{_where(f)}", file=out)
    print(f"    gain: {gain or 'no figure (the report says why)'}", file=out)
    if f.fix.patch:
        for line in changed_lines(f.fix.patch):
            print(f"      {line}", file=out)
    elif f.fix.code and f.fix.language == "python":
        lines = f.fix.code.rstrip().splitlines()
        for line in lines[:CODE_LINES]:
            print(f"      {line}", file=out)
        if len(lines) > CODE_LINES:
            print(f"      ... ({len(lines) - CODE_LINES} more lines in the report)", file=out)
    elif f.fix.code:
        print(f"      {f.fix.code.strip().splitlines()[0]}", file=out)


def _command(args: argparse.Namespace, *flags: str) -> str:
    return shlex.join(["gpusight", "run", *flags, args.script, *(args.args or [])])


def _print_next(report: Report, first: Finding | None, args: argparse.Namespace, out: Any) -> None:
    steps: list[tuple[str, str]] = []
    estimated = any(f.impact.basis == "estimated" for f in report.findings)
    if not getattr(args, "what_if", False) and estimated:
        steps.append((_command(args, "--what-if"), "measures the estimated fixes, one re-run each"))
    patch = getattr(args, "patch", None)
    if patch and os.path.exists(patch):
        steps.append(
            (
                _command(args, "--verify", patch),
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
    paths = [p for p in (args.json, getattr(args, "html", None), getattr(args, "patch", None)) if p]
    written = [p for p in paths if os.path.exists(p)]
    if written:
        print(f"  wrote: {', '.join(written)}", file=out)


def print_what_if(report: Report, out: Any) -> None:
    """The what-if rows: each change's measured gain with its noise, and the change to make."""
    rows = report.what_if
    if not rows:
        return
    out = EscapedStream(out)
    print("  what-if (the script re-run with one change, items per second):", file=out)
    for r in rows:
        if r.skipped:
            print(f"    {r.change}: not run ({r.skipped})", file=out)
        elif r.speedup is not None:
            noise = r.noise_pct or 0.0
            sig = "" if r.speedup >= 1.0 + noise / 100.0 else " (within the noise)"
            print(f"    {r.change}: {r.speedup:.2f}x ±{noise:.0f}%{sig}", file=out)
    best = max(
        (r for r in rows if r.speedup is not None and r.fix is not None and not r.skipped),
        key=lambda r: r.speedup or 0.0,
        default=None,
    )
    if best is not None and best.fix is not None and (best.speedup or 0) > 1.0:
        print(f"  the best measured change: {best.change}: {best.fix.text}", file=out)
        if best.fix.patch:
            for line in changed_lines(best.fix.patch):
                print(f"      {line}", file=out)
