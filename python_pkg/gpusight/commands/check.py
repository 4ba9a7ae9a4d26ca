"""``gpusight check``: the environment doctor in the terminal (and as JSON)."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "check",
        help="check torch, CUDA, driver, GPUs and settings (no GPU needed)",
        description=(
            "Walk the environment checklist: torch build, CUDA availability and why not, "
            "driver, GPUs (power, clocks, PCIe, MIG, other processes), /dev/shm, and the torch "
            "settings that slow GPUs down. Exits 0 unless --strict finds a critical problem."
        ),
    )
    parser.add_argument(
        "--json",
        metavar="PATH",
        help="also write the report as JSON to PATH ('-' writes it to stdout and the text "
        "report to stderr)",
    )
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 when a critical problem is found"
    )
    parser.add_argument("--no-color", action="store_true", help="never colour the output")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..doctor import check
    from ..text_report import render, unescaped, use_color
    from .paths import output_problem

    problem = output_problem(args.json, "report") if args.json and args.json != "-" else None
    if problem:
        print(f"gpusight check: {problem}", file=sys.stderr)
        return 2
    report = check()
    # With the JSON on stdout, the readable report goes to stderr so stdout stays parseable.
    text_stream = sys.stderr if args.json == "-" else sys.stdout
    # Its colours are its own; render escapes what the report says.
    unescaped(text_stream).write(render(report, color=use_color(text_stream, args.no_color)))
    text_stream.flush()
    if args.json == "-":
        report.validate()
        unescaped(sys.stdout).write(report.to_json() + "\n")
    elif args.json:
        try:
            path = report.save(args.json)
        except OSError as exc:
            print(f"gpusight: cannot write {args.json}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        print(f"report written to {path}", file=sys.stderr)
    critical = any(f.severity == "critical" for f in report.findings)
    return 1 if args.strict and critical else 0
