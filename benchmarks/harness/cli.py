"""The argparse base every benchmark extends, and the dispatch of an entry point to one of its
methods (``watch_cost.py --method parts ...``) or suites (``run_whatif.py --suite corpus``)."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PROG: list[str | None] = [None]
"""The program name the next ``Parser`` shows: the entry point and its method, once
dispatched."""


def first_line(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0] if (doc or "").strip() else ""


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` described by the first line of a docstring, with the options
    the benchmarks share: ``out``, ``only`` and ``rounds`` (each returns the parser)."""

    def __init__(self, doc: str | None, **kw: Any) -> None:
        kw.setdefault("prog", PROG[0])
        super().__init__(description=first_line(doc), **kw)

    def out(
        self, default: Any = None, *, required: bool = False, help: str | None = None, **kw: Any
    ) -> Parser:
        """``--out DIR``: the folder for the results (and ``COMMAND.txt``)."""
        extra = {} if required else {"default": default}
        self.add_argument("--out", required=required, help=help, **extra, **kw)
        return self

    def only(self, default: Any = None, *, help: str | None = None, **kw: Any) -> Parser:
        """``--only NAME ...``: these cases only."""
        self.add_argument("--only", nargs="*", default=default, help=help, **kw)
        return self

    def rounds(self, default: int, *, help: str | None = None) -> Parser:
        """``--rounds N``: how many times each side is measured, taking turns."""
        self.add_argument("--rounds", type=int, default=default, help=help)
        return self


def dispatch(
    argv: Sequence[str] | None,
    *,
    doc: str | None,
    flag: str,
    choices: dict[str, tuple[str, str]],
    default: str,
) -> int:
    """Run the ``main(argv)`` of the module ``flag`` names (``choices``: name -> (module, what
    it measures)), with the rest of ``argv``. ``--help`` without ``flag`` lists the choices;
    with it, the chosen one's options."""
    argv = list(sys.argv[1:] if argv is None else argv)
    entry = Path(sys.argv[0]).name or "benchmark"
    width = max(len(n) for n in choices)
    listing = "\n".join(f"  {n:<{width}}  {what}" for n, (_, what) in choices.items())
    pre = argparse.ArgumentParser(
        prog=entry,
        description=first_line(doc),
        add_help=False,
        allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"{flag} (default {default}):\n{listing}\n\n"
        f"{entry} {flag} NAME --help: that one's options",
    )
    pre.add_argument(flag, choices=list(choices), default=default, metavar="NAME")
    ns, rest = pre.parse_known_args(argv)
    name = getattr(ns, flag.lstrip("-").replace("-", "_"))
    named = any(a == flag or a.startswith(flag + "=") for a in argv)
    if not named and any(a in ("-h", "--help") for a in rest):
        pre.print_help()
        return 0
    module, _ = choices[name]
    PROG[0] = f"{entry} {flag} {name}"
    main = importlib.import_module(module).main
    return int(main(rest) or 0)
