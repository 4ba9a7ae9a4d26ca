"""The ``gpusight`` command: one subcommand per module in ``gpusight.commands``."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from ._version import __version__

# Each module exposes register(subparsers) and sets `func` on its parser.
# Kept as names so that `gpusight check` never pays for importing the others.
COMMAND_MODULES = ("check", "bench", "run", "merge", "html", "diff")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpusight",
        description="Find out why a PyTorch job leaves its GPU idle, and what to change.",
    )
    parser.add_argument("--version", action="version", version=f"gpusight {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"gpusight.commands.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        print("gpusight: interrupted", file=sys.stderr)
        return 130
    return code
