"""``%%gpusight [--steps N] [--warmup K] [--profile-steps P] [--json FILE] [--label TEXT]
[--what-if [--budget S]] [--compare-to N [--finding ID]]``.

Runs the cell in the user's namespace under a watch and returns the report. The cell body is
compiled under its own cached name, so tracebacks show it and detected syncs and copies are
reported as ``cell`` line N, counted as in the editor (the ``%%gpusight`` line is line 1).

If the cell raises, everything is restored, the partial report is kept (``last_report()``) and
the error propagates as usual. On Ctrl-C the partial report is displayed before the interrupt
propagates, so a long training cell can be stopped once it has shown enough.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any, NoReturn

from ..report import Report
from . import cell_compare

_LAST: Report | None = None


def last_report() -> Report | None:
    """The report of the last ``%%gpusight`` cell, also when that cell raised."""
    return _LAST


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        from IPython.core.error import UsageError

        raise UsageError(f"%%gpusight: {message}\n{self.format_usage()}")


def _parser() -> _Parser:
    p = _Parser(prog="%%gpusight", add_help=False)
    p.add_argument("--steps", type=int, default=None, help="measured steps, then end the cell")
    p.add_argument("--warmup", type=int, default=3, help="steps before measuring (default 3)")
    p.add_argument("--profile-steps", type=int, default=3, help="profiled steps (0: none)")
    p.add_argument("--json", default=None, metavar="FILE", help="also save the report here")
    p.add_argument("--label", default=None, help="a title for the report")
    p.add_argument(
        "--what-if",
        action="store_true",
        help="re-run the cell once per candidate change and measure each one's gain",
    )
    p.add_argument("--budget", type=float, default=120.0, help="--what-if: seconds in all")
    p.add_argument(
        "--compare-to",
        default=None,
        metavar="N|FILE",
        help="then compare with the report of %%%%gpusight cell [N] (or a saved report)",
    )
    p.add_argument(
        "--finding",
        default=None,
        metavar="ID",
        help="--compare-to: the finding whose fix was applied (its predicted gain is shown)",
    )
    # The cell line of the body's first line: 2 below a typed %%gpusight line; 1 when the
    # sidebar's "watch next cell" added the magic line the user never saw.
    p.add_argument("--first-line", type=int, default=2, help=argparse.SUPPRESS)
    return p


def parse_line(line: str) -> argparse.Namespace:
    from IPython.core.error import UsageError

    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"%%gpusight: {exc}") from None
    args = _parser().parse_args(words)
    if args.steps is not None and args.steps < 1:
        raise UsageError("%%gpusight: --steps must be at least 1")
    if args.warmup < 0 or args.profile_steps < 0:
        raise UsageError("%%gpusight: --warmup and --profile-steps must not be negative")
    if args.json:
        from ..commands.paths import output_problem

        # Checked before the cell runs, as the command line checks it: never the user's code
        # (utils.py), a file gpusight did not write, or a folder that is not there.
        problem = output_problem(args.json, "report")
        if problem:
            raise UsageError(f"%%gpusight --json: {problem}; the cell did not run")
    return args


def run_cell(line: str, cell: str, shell: Any) -> Report:
    """Watch ``cell`` run in ``shell``'s namespace; return the report."""
    global _LAST
    __tracebackhide__ = True  # the cell's error shows the cell, not gpusight
    from ..watch.notebook_cells import running_count
    from ..watch.session import Watch

    args = parse_line(line)
    before = cell_compare.earlier(args.compare_to) if args.compare_to else None
    transformed = shell.transform_cell(cell)
    number = running_count(shell, cell)
    filename = shell.compile.cache(transformed, number, raw_code=cell)
    code = shell.compile(transformed, filename, "exec")
    names: dict[str, tuple[str, int]] = {
        name: (f"cell [{n}]", 0)
        for name, n in getattr(shell.compile, "_filename_map", {}).items()
        if name != filename
    }
    names[filename] = ("cell", args.first_line - 1)
    if args.what_if:
        from .cell_whatif import run as what_if

        report = what_if(args, cell, code, shell, names)
        _LAST = report
        cell_compare.remember(number, report)
        _save(report, args.json)
        return report
    w = Watch(
        steps=args.steps,
        warmup=args.warmup,
        profile_steps=args.profile_steps,
        label=args.label,
        source_names=names,
        namespaces=[shell.user_ns],
    )
    try:
        with w:
            exec(code, shell.user_global_ns, shell.user_ns)
    except KeyboardInterrupt:
        _LAST = w.report
        if w.report is not None:
            _save(w.report, args.json)
            _display(w.report)
        raise
    except BaseException:
        _LAST = w.report
        if w.report is not None:
            _save(w.report, args.json)
        raise
    assert w.report is not None
    _LAST = w.report
    cell_compare.remember(number, w.report)
    _save(w.report, args.json)
    if before is not None:
        print(cell_compare.render(before[0], w.report, before[1], args.finding))
    return w.report


def _save(report: Report, path: str | None) -> None:
    """The report into ``path`` too; a write that fails (a full disk, a folder removed while
    the cell ran) is said, not raised over the cell's own result."""
    if not path:
        return
    try:
        report.save(path)
    except OSError as exc:
        print(f"%%gpusight --json: could not write {path}: {exc.strerror or exc}", file=sys.stderr)


def _display(report: Report) -> None:
    try:
        from IPython.display import display

        display(report)  # type: ignore[no-untyped-call]
    except Exception:
        pass
