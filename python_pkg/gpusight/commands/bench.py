"""``gpusight bench``: measure this machine's ceilings (matmul, copies, launch cost)."""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from ..text_report import printable, unescaped

DESCRIPTION = (
    "Measure what this machine can do: matmul TFLOP/s per precision against the datasheet, "
    "host<->device copy GB/s against the PCIe link, device copies against memory bandwidth, "
    "the cost of a kernel launch and of a sync, and CPU matmul GFLOP/s."
)


class ProgressBar:
    """A one-line bar on a terminal (redrawn in place); stage lines elsewhere (logs, CI)."""

    def __init__(self, stream: TextIO | None = None, width: int = 28) -> None:
        # The bar redraws its line with a carriage return: it writes past the escaping stream,
        # its stage names escaped here.
        self.stream = unescaped(stream if stream is not None else sys.stderr)
        self.width = width
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.stage = ""
        self.last_draw = 0.0
        self.drawn = False

    def __call__(self, stage: str, fraction: float) -> None:
        fraction = min(max(fraction, 0.0), 1.0)
        if not self.tty:
            if stage != self.stage:
                self.stage = stage
                self.stream.write(f"[{100 * fraction:3.0f}%] {printable(stage)}\n")
                self.stream.flush()
            return
        now = time.monotonic()
        if stage == self.stage and now - self.last_draw < 0.1 and fraction < 1.0:
            return
        self.stage, self.last_draw = stage, now
        filled = round(self.width * fraction)
        bar = "#" * filled + "-" * (self.width - filled)
        self.stream.write(f"\r[{bar}] {100 * fraction:3.0f}%  {printable(stage[:40]):<40}")
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        if self.tty and self.drawn:
            self.stream.write("\n")
            self.stream.flush()


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "bench", help="measure this machine's hardware ceilings", description=DESCRIPTION
    )
    parser.add_argument("--json", metavar="PATH", type=Path, help="also write the report as JSON")
    parser.add_argument(
        "--budget",
        metavar="S",
        type=float,
        default=None,
        help="time budget in seconds (default 60; 4 with --quick)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="fewer sizes and repetitions: a few seconds"
    )
    parser.add_argument(
        "--allreduce",
        action="store_true",
        help="also measure NCCL all-reduce bus bandwidth across this machine's GPUs",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..bench import build_report
    from ..bench.table import format_findings, format_table
    from .paths import output_problem

    if args.budget is not None and not (math.isfinite(args.budget) and args.budget > 0):
        print("gpusight bench: --budget must be a positive number of seconds", file=sys.stderr)
        return 2
    problem = output_problem(args.json, "report") if args.json is not None else None
    if problem:  # before the benchmark, not after it
        print(f"gpusight bench: {problem}", file=sys.stderr)
        return 2
    bar = ProgressBar()
    try:
        report = build_report(budget_s=args.budget, quick=args.quick, progress=bar)
        if getattr(args, "allreduce", False):
            from ..bench.allreduce import add_to_report

            add_to_report(report, quick=args.quick, progress=bar)
    finally:
        bar.close()

    # Device and driver names come from the machine: printed as text, never as escapes.
    print(printable(format_table(report.benchmarks)))
    if report.findings:
        print()
        print(printable(format_findings(report.findings)))
    if report.verdict.summary:
        print()
        print(printable(report.verdict.summary))
    if args.json is not None:
        try:
            path = report.save(args.json)
        except OSError as exc:
            print(
                f"gpusight bench: cannot write {args.json}: {exc.strerror or exc}", file=sys.stderr
            )
            return 2
        print(f"report written to {path}", file=sys.stderr)
    return 0
