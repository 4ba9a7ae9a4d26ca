"""The ``gpusight`` command: one subcommand per module in ``gpusight.commands``."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import TextIO, cast

from ._version import __version__
from .text_report import EscapedStream

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
    # What a command prints names the user's files and quotes their code: text, never terminal
    # commands (a file name holding OSC 52 would write the clipboard). Both streams escape it.
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = (cast(TextIO, EscapedStream(s)) for s in streams)
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        print("gpusight: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # every failure is one line; the traceback only when asked for
        if os.environ.get(DEBUG_ENV):
            raise
        print(f"gpusight {args.command}: {error_line(exc)}", file=sys.stderr)
        return 2 if is_input_error(exc) else 1
    finally:
        sys.stdout, sys.stderr = streams
    return code


#: Set to show the traceback of an unexpected error instead of its one line.
DEBUG_ENV = "GPUSIGHT_DEBUG"
#: Longest error line printed.
ERROR_CHARS = 300


def is_input_error(exc: Exception) -> bool:
    """A bad file or a bad report (exit 2) rather than a gpusight bug (exit 1)."""
    from .report_schema import ReportValidationError
    from .rerun.write_guard import SandboxSpecError

    return isinstance(
        exc, (ReportValidationError, SandboxSpecError, OSError, UnicodeError, RecursionError)
    )


def error_line(exc: Exception) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        where = f"{exc.filename}: " if exc.filename else ""
        text = f"{where}{exc.strerror}"
    elif is_input_error(exc):
        text = str(exc)
    else:
        text = (
            f"internal error ({type(exc).__name__}: {exc}); "
            f"set {DEBUG_ENV}=1 for the traceback and please report it"
        )
    text = " ".join(text.split())  # one line
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 3] + "..."
