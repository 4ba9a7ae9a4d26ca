"""``gpusight merge [--json OUT] FILE_OR_DIR...``: merge the ranks' reports of a distributed run.

``gpusight run`` under torchrun merges on rank 0 by itself; this command is for ranks that ran
on other machines (their files copied to one place) or a run whose rank 0 gave up waiting.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "merge",
        help="merge the per-rank reports of a distributed run into one",
        description="Merge the reports that `gpusight run` wrote on each rank of a torchrun job.",
    )
    p.add_argument("paths", nargs="+", help="rank report files, or directories holding rank*.json")
    p.add_argument("--json", default=None, metavar="FILE", help="write the merged report here")
    p.add_argument("--world-size", type=int, default=None, help="ranks the job had")
    p.add_argument("--label", default=None, help="a title for the report")
    p.set_defaults(func=run)


def _files(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        out.extend(sorted(p.glob("*rank*.json")) if p.is_dir() else [p])
    return out


def run(args: argparse.Namespace) -> int:
    from ..report import load_report
    from ..report_schema import MAX_WORLD_SIZE, ReportValidationError
    from ..rules.distributed import merge_reports, rank_info
    from .paths import output_problem
    from .run_summary import print_summary

    if args.world_size is not None and not 1 <= args.world_size <= MAX_WORLD_SIZE:
        print(f"gpusight merge: --world-size must be 1 to {MAX_WORLD_SIZE}", file=sys.stderr)
        return 2
    problem = output_problem(args.json, "report", _files(args.paths)) if args.json else None
    if problem:
        print(f"gpusight merge: {problem}", file=sys.stderr)
        return 2
    reports = []
    for path in _files(args.paths):
        try:
            data = load_report(Path(path))
        except ReportValidationError as exc:
            print(f"gpusight merge: {path}: {exc}", file=sys.stderr)
            return 2
        if "rank" not in rank_info(data):
            print(
                f"gpusight merge: {path} is not a rank's report (no run.kernels.dist_rank: "
                "was it written by `gpusight run` under torchrun?)",
                file=sys.stderr,
            )
            return 2
        reports.append(data)
    if not reports:
        print("gpusight merge: no rank reports found", file=sys.stderr)
        return 2
    try:
        merged = merge_reports(reports, world_size=args.world_size, label=args.label)
    except ValueError as exc:
        print(f"gpusight merge: {exc}", file=sys.stderr)
        return 2
    print_summary(merged, sys.stdout)
    if args.json:
        try:
            merged.save(args.json)
        except OSError as exc:
            print(
                f"gpusight merge: cannot write {args.json}: {exc.strerror or exc}", file=sys.stderr
            )
            return 2
        print(f"report written to {args.json}", file=sys.stderr)
    return 0
