"""``gpusight html``: a report as one self-contained HTML file (no network, opens anywhere)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "html",
        help="write a report as a self-contained HTML file",
        description=(
            "Write REPORT (a gpusight JSON report) as one HTML file that draws the same report "
            "as the JupyterLab extension: charts, findings and fixes. The file needs nothing "
            "else (no network, no fonts, no other scripts) and can be mailed or attached to an "
            "issue."
        ),
    )
    parser.add_argument("report", type=Path, help="the report, as written by --json or save()")
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="FILE",
        help="where to write the page (default: REPORT with .html instead of .json)",
    )
    parser.add_argument(
        "--keep-paths",
        action="store_true",
        help="keep the host name and the paths of your home folder and Python environment "
        "in the page (left out by default: the page is made to be shared)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..html_export import HtmlExportError, save_html
    from ..report_schema import ReportValidationError
    from .paths import output_problem

    output: Path = args.output or args.report.with_suffix(".html")
    if output.resolve() == args.report.resolve():
        print(f"gpusight: refusing to overwrite the report {args.report}: give -o", file=sys.stderr)
        return 2
    from ..report import load_report

    try:
        data = load_report(Path(args.report))  # a file name, never JSON text
        problem = output_problem(output, "html", [args.report])
        if problem:
            print(f"gpusight: {problem}", file=sys.stderr)
            return 2
        path = save_html(data, output, private=args.keep_paths)
    except ReportValidationError as exc:
        print(f"gpusight: {args.report}: {exc}", file=sys.stderr)
        return 2
    except HtmlExportError as exc:
        print(f"gpusight: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"gpusight: cannot write {output}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"report written to {path}", file=sys.stderr)
    return 0
