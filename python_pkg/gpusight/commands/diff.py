"""``gpusight diff``: two reports before and after a change, side by side."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "diff",
        help="compare two reports: step time, speedup, breakdown, findings",
        description=(
            "Compare BEFORE and AFTER (gpusight JSON reports, e.g. before and after a fix): step "
            "time and speedup, GPU busy, the step-time breakdown side by side, and which findings "
            "were resolved, are new, or are still there."
        ),
    )
    parser.add_argument("before", type=Path, help="the report before the change")
    parser.add_argument("after", type=Path, help="the report after the change")
    parser.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="also write the comparison as a self-contained HTML page",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..compare import compare_reports, render_comparison
    from ..html_export import HtmlExportError, save_compare_html
    from ..report import load_report
    from ..report_schema import ReportValidationError
    from ..text_report import printable
    from .paths import output_problem

    problem = output_problem(args.html, "html", [args.before, args.after]) if args.html else None
    if problem:
        print(f"gpusight: {problem}", file=sys.stderr)
        return 2
    reports = []
    for path in (args.before, args.after):
        try:
            reports.append(load_report(Path(path)))  # a file name, never JSON text
        except ReportValidationError as exc:
            print(f"gpusight: {path}: {exc}", file=sys.stderr)
            return 2
    before, after = reports
    # Report strings are the user's (file names, titles, notes), never terminal commands.
    text = render_comparison(compare_reports(before, after), str(args.before), str(args.after))
    sys.stdout.write(printable(text))
    if args.html:
        try:
            page = save_compare_html(before, after, args.html)
        except HtmlExportError as exc:
            print(f"gpusight: {exc}", file=sys.stderr)
            return 2
        except OSError as exc:
            print(f"gpusight: cannot write {args.html}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        print(f"comparison written to {page}", file=sys.stderr)
    return 0
