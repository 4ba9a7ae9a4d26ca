"""``gpusight run [--steps N] [--warmup K] [--json FILE] [--html FILE] [--what-if [--budget S]]
script.py args...``.

Runs the script as ``python script.py args...`` would (``__name__ == "__main__"``, ``sys.argv``,
``sys.path[0]`` = the script's directory) under a watch, prints the verdict on stderr and
writes the report. The script's exit code is passed through: ``sys.exit(n)`` -> n, an uncaught
exception -> its traceback and 1, Ctrl-C -> 130. With ``--steps`` the run ends cleanly after
that many measured steps (exit 0). The report is written in every case.

With ``--what-if`` the script is re-run, unmodified, once per candidate change injected from
outside (``rerun/``), and the report carries each change's measured gain in items per second.

With ``--patch FILE`` the first fix that changes the user's own lines (under a measured
what-if, the first measured one: ``patch_out.py``) is written as a unified diff; ``--verify
FILE`` applies such a diff to a temporary copy and compares the original and the patched script
in items per second (``rerun/verify.py``).

Imports nothing of IPython or ipywidgets: it runs where only torch is installed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import math
import os
import runpy
import shutil
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from .patch_out import write_patch
from .run_summary import print_summary, print_what_if

if TYPE_CHECKING:
    from ..report import Report
    from ..rerun.overlay import Overlay


class _Help(argparse.HelpFormatter):
    """Names the registry's knobs in ``--try``'s help when the help is shown: the parser does not
    import the knobs on every command."""

    def _expand_help(self, action: argparse.Action) -> str:
        if action.dest != "try_knobs":
            return super()._expand_help(action)
        from ..knobs import REGISTRY

        return str(action.help).replace("{knobs}", ", ".join(k.name for k in REGISTRY if k.rerun))


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "run",
        help="run a Python script under a watch and say why its GPU idles",
        description="Run a training or inference script under gpusight's watch.",
        formatter_class=_Help,
    )
    p.add_argument("--steps", type=int, default=None, help="measured steps, then stop the script")
    p.add_argument("--warmup", type=int, default=3, help="steps before measuring (default 3)")
    p.add_argument("--profile-steps", type=int, default=3, help="profiled steps (0: none)")
    p.add_argument("--json", default=None, metavar="FILE", help="write the report here")
    p.add_argument(
        "--html", default=None, metavar="FILE", help="also write a self-contained HTML report"
    )
    p.add_argument("--label", default=None, help="a title for the report")
    p.add_argument(
        "--patch",
        default=None,
        metavar="FILE",
        help="write the first fix that changes your own lines as a unified diff "
        "(apply with: patch -p1 < FILE)",
    )
    p.add_argument(
        "--verify",
        default=None,
        metavar="FIX.diff",
        help="apply this patch (from --patch) to a temporary copy, run the original and the "
        "patched script, and compare them in items per second; your files are not changed",
    )
    p.add_argument(
        "--report",
        default=None,
        metavar="FILE",
        help="with --verify: the report the patch came from (its what-if's predicted gain is "
        "shown beside the measured one, and its file hashes are checked)",
    )
    p.add_argument(
        "--what-if",
        action="store_true",
        help="re-run the unmodified script once per candidate change (DataLoader workers, "
        "batch, autocast, TF32, channels_last, a fused optimizer, ...) and measure each one's gain",
    )
    p.add_argument(
        "--budget",
        type=float,
        default=180.0,
        metavar="S",
        help="with --what-if: seconds for all the re-runs together (default 180)",
    )
    p.add_argument(
        "--try",
        dest="try_knobs",
        default=None,
        metavar="KNOBS",
        help="with --what-if: try only these changes, comma-separated knob names ({knobs})",
    )
    p.add_argument(
        "--allow-writes-outside",
        action="store_true",
        help="with --what-if: let the script write outside its folder in every re-run (its "
        "writes inside go to a scratch copy; outside they would repeat, so they are refused)",
    )
    p.add_argument(
        "--allow-linked-files",
        action="store_true",
        help="with --what-if or --verify, where no overlay can keep every process of a re-run "
        "off your folder: re-run though the scratch copy links files too large to copy (a "
        "native writer, sqlite or a child process could then change them)",
    )
    # Used by --what-if for its re-runs: what to change, where to write what the run saw.
    p.add_argument("--inject", default=None, help=argparse.SUPPRESS)
    p.add_argument("--facts", default=None, help=argparse.SUPPRESS)
    # A what-if's re-run runs a scratch copy of the script: a command in its fixes names the
    # script as the user ran it.
    p.add_argument("--shown-as", default=None, help=argparse.SUPPRESS)
    p.add_argument("--lean", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--min-window", type=float, default=0.0, help=argparse.SUPPRESS)
    p.add_argument("--max-window", type=float, default=0.0, help=argparse.SUPPRESS)
    p.add_argument("--quiet", action="store_true", help="no summary on stderr")
    p.add_argument(
        "--merge-timeout",
        type=float,
        default=120.0,
        metavar="S",
        help="under torchrun: how long rank 0 waits for the other ranks' reports (default 120)",
    )
    p.add_argument("script", help="the Python script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    p.set_defaults(func=run)


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _print_traceback(exc: BaseException, script: str, script_path: str) -> None:
    """The traceback as Python prints it for a script: from the script's first frame on.

    ``script_path``: the script's absolute path, taken before it ran (a script that changes
    directory would otherwise no longer match its own frames). A syntax error has no frame of
    the script: it is printed without gpusight's and runpy's frames, as Python prints it."""
    names = {script, script_path}
    names |= {os.path.join(n, "__main__.py") for n in tuple(names)}  # a folder run as a script
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename not in names:
        tb = tb.tb_next
    if tb is None and not isinstance(exc, SyntaxError):
        tb = exc.__traceback__  # not the script's own error: all of it
    shown = traceback.TracebackException(type(exc), exc, tb)
    _without_our_frames(shown, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.stderr.write("".join(shown.format()))


def _without_our_frames(te: traceback.TracebackException, pkg: str, depth: int = 0) -> None:
    """The watch's hooks between the script's frames and torch's (a DataLoader's iterator, a
    module's call) are not the user's code: left out of the traceback, and of its causes."""
    prefix = pkg.rstrip(os.sep) + os.sep
    kept = [f for f in te.stack if not (f.filename or "").startswith(prefix)]
    if kept and len(kept) != len(te.stack):
        te.stack = traceback.StackSummary.from_list(kept)
    for inner in (te.__cause__, te.__context__):
        if inner is not None and depth < 20:
            _without_our_frames(inner, pkg, depth + 1)


def _arguments_error(args: argparse.Namespace) -> str | None:
    """What is wrong with the numbers given, in one line (None: nothing)."""
    if args.steps is not None and args.steps < 1:
        return "--steps must be at least 1"
    if args.warmup < 0:
        return "--warmup must be 0 or more"
    if args.profile_steps < 0:
        return "--profile-steps must be 0 or more"
    if not math.isfinite(args.merge_timeout) or args.merge_timeout < 0:
        return "--merge-timeout must be a number of seconds, 0 or more"
    return None


def run(args: argparse.Namespace) -> int:
    from ..watch.session import Watch

    script = args.script
    problem = _arguments_error(args)
    if problem:
        print(f"gpusight run: {problem}", file=sys.stderr)
        return 2
    # Relative to where gpusight was started, not wherever the script changes directory to.
    args.json = os.path.abspath(args.json) if args.json else args.json
    args.html = os.path.abspath(args.html) if args.html else args.html
    args.patch = os.path.abspath(args.patch) if args.patch else args.patch
    if not os.path.isfile(script) and not _runnable_folder(script):
        why = "a folder without __main__.py" if os.path.isdir(script) else "no such script"
        print(f"gpusight run: {why}: {script}", file=sys.stderr)
        return 2
    from .paths import outputs_problem

    problem = outputs_problem(
        [(args.json, "report"), (args.html, "html"), (args.patch, "patch")],
        protect=[script, args.verify, args.report],
    )
    if problem:
        print(f"gpusight run: {problem}", file=sys.stderr)
        return 2
    label = args.label or os.path.basename(script)
    if args.verify:
        return _verify(args)
    if args.report:
        print("gpusight run: --report goes with --verify", file=sys.stderr)
        return 2
    if args.what_if:
        return _what_if(args, label)
    if importlib.util.find_spec("torch") is None:
        # Nothing to watch; still run the script, and say so in the report.
        print("gpusight run: torch is not installed: running the script unwatched", file=sys.stderr)
        code = _execute(script, args.args, contextlib.nullcontext())
        _write(_no_torch_report(label), args.json)
        return code
    from ..rerun import write_guard

    guard = write_guard.install_from_env()  # a re-run: its writes stay in its scratch copy
    injected = None
    if args.inject:
        from ..rerun.inject import InjectError, install

        try:
            injected = install(json.loads(args.inject))
        except (InjectError, ValueError) as exc:
            print(f"gpusight run: --inject: {exc}", file=sys.stderr)
            return 2
    w = Watch(
        steps=args.steps,
        warmup=args.warmup,
        profile_steps=args.profile_steps,
        label=label,
        min_window_s=args.min_window,
        max_window_s=args.max_window,
        lean=args.lean,
    )
    t_start = time.monotonic()
    from ..watch import ranks as dist

    rank = dist.rank_env()  # under torchrun: every rank writes its report, rank 0 merges them
    started = dist.begin(rank, args.json) if rank is not None else 0.0
    from ..knobs.batch_args import Recorder

    # The batch size among the script's options: a what-if's knob, and a step's items where the
    # model's input is not batch-first.
    batch_arg = Recorder().install()
    shown = args.shown_as or args.script
    w.batch_hint = lambda: (
        found.command(shown, args.args) if (found := batch_arg.result(args.args)) else None
    )
    from ..knobs import framework_precision

    # A what-if's run: the training framework whose precision switch a re-run would turn.
    frameworks, stop_observing = framework_precision.observe() if args.facts else ([], None)

    def finish_early(exit_code: int) -> None:
        """The script called ``os._exit``: the report is written before the process ends."""
        w.stop()
        if w.report is not None and rank is None:
            w.report.notes.append(f"the script ended the process with os._exit({exit_code})")
            _outputs(w.report, args)

    try:
        with _hard_exit_reported(finish_early), _script_streams():
            code = _execute(script, args.args, w)
        if w.in_forked_child:
            # A fork of the script left the watched code (sys.exit in the child): it exits with
            # its code, and the report stays the parent's.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    finally:
        batch_arg.uninstall()
        if stop_observing is not None:
            stop_observing()
        if injected is not None:
            injected.undo()  # the process usually ends here; not when run in-process (tests)
    report = w.report
    if args.facts:
        found = batch_arg.result(args.args)
        extra = {
            "batch_arg": found.as_dict() if found is not None else None,
            "accum_arg": batch_arg.accum.as_dict() if batch_arg.accum is not None else None,
            "framework": framework_precision.trained_through(frameworks),
            "writes_outside": guard.outside if guard is not None else [],
            "command": {"script": shown, "args": list(args.args)},
        }
        _write_facts(w, injected, args.facts, time.monotonic() - t_start, extra)
    if report is not None and rank is not None:
        dist.finish(
            report,
            rank,
            json_arg=args.json,
            started_at=started,
            torch=w.torch,
            label=label,
            quiet=args.quiet,
            timeout_s=args.merge_timeout,
            summary=print_summary,
        )
        return code
    if report is not None:
        dist.add_idle_gpus(report, w.torch)
        _outputs(report, args)
    return code


def _write_all(report: Report, args: argparse.Namespace) -> None:
    """The report, its page and its patch where asked; ``args.written``: the files that were
    (the summary's "wrote:" names no file a write failed on, even one left from before)."""
    done = [
        _write(report, args.json),
        _write_html(report, args.html),
        write_patch(report, args.patch, args.quiet),
    ]
    args.written = [p for p in done if p]


def _outputs(report: Report, args: argparse.Namespace) -> None:
    _write_all(report, args)
    if not args.quiet and sys.stderr is not None and not sys.stderr.closed:
        # A script that closed stderr gets no summary, as Python prints nothing there either
        # (closed by its descriptor, os.close(2), the stream only finds out when written to).
        with contextlib.suppress(OSError):
            print_summary(report, sys.stderr, args)
            sys.stderr.flush()


@contextlib.contextmanager
def _hard_exit_reported(finish: Callable[[int], None]) -> Iterator[None]:
    """While the script runs, ``os._exit`` in this process's main thread first lets ``finish``
    write the report (a forked child, DataLoader workers included, exits as it would)."""
    real, pid, main = os._exit, os.getpid(), threading.main_thread().ident

    def _exit(status: int) -> NoReturn:
        if os.getpid() == pid and threading.get_ident() == main:
            os._exit = real  # once
            try:
                finish(status)
            except BaseException:
                pass
        real(status)

    os._exit = _exit
    try:
        yield
    finally:
        if os._exit is _exit:
            os._exit = real


def _runnable_folder(path: str) -> bool:
    """A folder Python runs as a script (``python folder``): one holding ``__main__.py``."""
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, "__main__.py"))


@contextlib.contextmanager
def _script_streams() -> Iterator[None]:
    """The script prints as it would without gpusight: its colours and progress bars are its
    own (gpusight's messages around it are escaped, ``cli.main``)."""
    from ..text_report import unescaped

    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = unescaped(sys.stdout), unescaped(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


@contextlib.contextmanager
def _script_leaves_python() -> Iterator[None]:
    """What the script did to the interpreter at its end is undone for gpusight's own work after
    it: a recursion limit set low (``sys.setrecursionlimit(60)``) and standard modules blocked
    (``sys.modules["tempfile"] = None``) once lost the report."""
    limit = sys.getrecursionlimit()
    modules = dict(sys.modules)
    try:
        yield
    finally:
        if sys.getrecursionlimit() < limit:
            sys.setrecursionlimit(limit)
        for name, module in modules.items():
            if sys.modules.get(name) is None:
                sys.modules[name] = module


def _execute(script: str, script_args: list[str], context: Any) -> int:
    """Run ``script`` as ``python script args`` would, inside ``context``; its exit code."""
    saved_argv, saved_path0 = list(sys.argv), (sys.path[0] if sys.path else None)
    sys.argv = [script, *script_args]
    script_path = os.path.abspath(script)
    # A folder run as a script is its own first import path, as Python makes it.
    script_dir = script_path if os.path.isdir(script_path) else os.path.dirname(script_path)
    if sys.path:
        sys.path[0] = script_dir
    else:
        sys.path.insert(0, script_dir)
    code = 0
    try:
        with context, _script_leaves_python():
            _run_as_main(script)
    except SystemExit as exc:
        code = _exit_code(exc)
    except KeyboardInterrupt:
        code = 130
    except BaseException as exc:
        _print_traceback(exc, script, script_path)
        code = 1
    finally:
        sys.argv = saved_argv
        if saved_path0 is not None and sys.path:
            sys.path[0] = saved_path0
    return code


def _run_as_main(script: str) -> None:
    """``python script``: a source file run as ``__main__`` as ``runpy.run_path`` runs it, but
    without its setting ``sys.argv[0]`` back afterwards (a script that emptied ``sys.argv``
    would end in an IndexError of runpy's); folders and other files through runpy."""
    if not script.endswith((".py", ".pyw")) or not os.path.isfile(script):
        runpy.run_path(script, run_name="__main__")
        return
    import io
    import types

    with io.open_code(os.path.abspath(script)) as f:
        code = compile(f.read(), script, "exec", dont_inherit=True)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=script, __cached__=None, __loader__=None, __package__="",
                         __spec__=None)  # fmt: skip
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = main
    try:
        exec(code, main.__dict__)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved
        else:
            sys.modules.pop("__main__", None)


def _write_facts(
    w: Any, injected: Any, path: str, wall_s: float, extra: dict[str, Any] | None = None
) -> None:
    from ..rerun.facts import from_watch

    facts = {**from_watch(w, wall_s), **(extra or {})}
    if injected is not None:
        facts["injected"] = injected.applied
        facts["inject_notes"] = injected.notes
    from ..atomic_write import write_text

    try:
        write_text(path, json.dumps(facts))
    except OSError as exc:
        print(f"gpusight run: could not write {path}: {exc}", file=sys.stderr)


def _tried(names: str | None) -> frozenset[str] | str | None:
    """The knob names ``--try`` gives (None: every knob), or what is wrong with them."""
    if names is None:
        return None
    got = frozenset(n.strip() for n in names.split(",") if n.strip())
    from ..knobs import REGISTRY

    known = {k.name for k in REGISTRY}
    unknown = sorted(got - known)
    if unknown or not got:
        return (
            f"--try: unknown change(s) {', '.join(unknown) or '(none given)'}; "
            f"known: {', '.join(sorted(known))}"
        )
    return got


def _what_if(args: argparse.Namespace, label: str) -> int:
    """Re-run the script once per change; the baseline's report with the measured rows."""
    from ..report_parse import report_from_dict
    from ..rerun.driver import SHORT_RUN, Driver, ScriptRunner
    from ..rerun.results import apply

    if importlib.util.find_spec("torch") is None:
        print("gpusight run --what-if: torch is not installed", file=sys.stderr)
        return 2
    if not args.budget > 0:
        print("gpusight run: --budget must be a positive number of seconds", file=sys.stderr)
        return 2
    if args.inject or args.facts:
        print("gpusight run: --what-if takes no --inject/--facts", file=sys.stderr)
        return 2
    only = _tried(args.try_knobs)
    if isinstance(only, str):
        print(f"gpusight run: {only}", file=sys.stderr)
        return 2

    def say(text: str) -> None:
        if not args.quiet:
            print(f"gpusight: {text}", file=sys.stderr, flush=True)

    from ..rerun import sandbox, stop_signals
    from ..rerun.overlay import unguarded

    # SIGTERM or Ctrl-C while the folder is copied: the copy is removed (make() cleans up on
    # the interrupt), none is left in TMPDIR.
    with stop_signals.as_interrupt() as stopped:
        try:
            box = sandbox.make(os.getcwd(), prefix="gpusight-whatif-copy-")
        except OSError as exc:
            print(f"gpusight run --what-if: cannot copy this folder to re-run in: {exc}",
                  file=sys.stderr)  # fmt: skip
            return 2
        except KeyboardInterrupt:
            print("gpusight run --what-if: interrupted while copying the folder: nothing left",
                  file=sys.stderr)  # fmt: skip
            return stop_signals.exit_code(stopped)
    runner = ScriptRunner(
        args.script,
        args.args,
        steps=args.steps or 20,
        warmup=args.warmup,
        env=_rerun_env(),
        lean=True,
        sandbox=box,
        refuse_outside=not args.allow_writes_outside,
        warm=True,
    )
    if not args.allow_linked_files and (why := unguarded(box, runner.overlay)) is not None:
        print(f"gpusight run --what-if: {why}", file=sys.stderr)
        runner.close()
        box.remove()
        shutil.rmtree(runner.tmp, ignore_errors=True)
        return 2
    driver = Driver(runner, budget_s=args.budget, warmup=args.warmup, progress=say, only=only)
    say(f"what-if: re-running {args.script} once per change, budget {args.budget:.0f} s, "
        f"in a scratch copy of this folder ({box.path})")  # fmt: skip
    with stop_signals.as_interrupt() as got:
        try:
            out = driver.what_if()
        except KeyboardInterrupt:
            print("gpusight run --what-if: interrupted during the baseline run: no report",
                  file=sys.stderr)  # fmt: skip
            return stop_signals.exit_code(got)
        finally:
            runner.close()
            box.remove()
            shutil.rmtree(runner.tmp, ignore_errors=True)
    base = out.baseline
    if base.report is None:
        print(f"gpusight run --what-if: the baseline run failed: {base.error}", file=sys.stderr)
        return 1
    report = report_from_dict(base.report)
    report.title = label
    # The runs' lines are in the copy, gone now: the fixes patch the user's own files.
    base.facts = box.files_back(base.facts)
    for arm, _res in out.arms:  # a change to a file names the user's (its fix patches it)
        arm.changes = box.files_back(arm.changes)
    if not base.ok:
        report.notes.append(f"what-if: not run, the baseline run failed: {base.error}")
    else:
        apply(report, out)
    report.notes.append(sandbox_note(box, base.facts, runner.overlay))
    if (said := runner.warm_note()) is not None:
        report.notes.append(said)
    _write_all(report, args)
    if not args.quiet:
        print_summary(report, sys.stderr, args)
        print_what_if(report, sys.stderr)
    if out.interrupted:
        return stop_signals.exit_code(got)
    # The script failed (a crash, a timeout, memory): not a run too short to time.
    return 0 if base.ok or base.error == SHORT_RUN else 1


def sandbox_note(
    box: Any, facts: dict[str, Any] | None, overlay: Overlay | str | None = None
) -> str:
    """Where the re-runs wrote: a scratch copy of the folder, removed; whether every process
    saw the folder through an overlay; what they wrote outside it (caches and /tmp aside)."""
    text = (
        f"the re-runs ran in a scratch copy of {box.root} (removed afterwards): what the script "
        "wrote there left your files as they were"
    )
    if isinstance(overlay, str):
        text += (
            "; processes the script started and native writers (sqlite, say) were not kept "
            f"off your folder ({overlay}): only Python's own writes were guarded"
        )
    elif overlay is not None:
        text += (
            "; every process of a re-run saw your folder through an overlay: what they wrote "
            "to it by any path went to a scratch layer"
        )
    if box.linked:
        shown = ", ".join(box.linked[:3]) + (" ..." if len(box.linked) > 3 else "")
        text += f"; linked rather than copied (too large, or tooling): {shown}"
    outside = (facts or {}).get("writes_outside") or []
    if outside:
        shown = ", ".join(outside[:3]) + (" ..." if len(outside) > 3 else "")
        text += f"; the script also wrote outside the folder, once per re-run: {shown}"
    return text


def _rerun_env() -> dict[str, str]:
    """The environment of a re-run: this very gpusight importable, wherever the run starts."""
    env = dict(os.environ)
    pkg_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH", "")) if p)
    return env


def _verify(args: argparse.Namespace) -> int:
    """Apply the patch to a copy, run both scripts, print the measured gain; the user's files
    are left as they are whatever happens."""
    from ..rerun.verify import VerifyError, verify
    from ..rerun.verify_text import render_verified

    if args.what_if or args.patch or args.inject or args.facts:
        print("gpusight run: --verify takes no --what-if/--patch", file=sys.stderr)
        return 2
    if importlib.util.find_spec("torch") is None:
        print("gpusight run --verify: torch is not installed", file=sys.stderr)
        return 2
    from ..fixes.patch_files import read_text

    try:
        diff_text = read_text(args.verify)
    except (OSError, UnicodeDecodeError) as exc:
        print(f"gpusight run --verify: cannot read {args.verify}: {_why(exc)}", file=sys.stderr)
        return 2
    report = None
    if args.report:
        from ..report import load_report
        from ..report_schema import ReportValidationError

        try:
            report = load_report(Path(args.report))  # a file name, never JSON text
        except (OSError, ReportValidationError) as exc:
            print(f"gpusight run --verify: {args.report}: {exc}", file=sys.stderr)
            return 2

    def say(text: str) -> None:
        if not args.quiet:
            print(f"gpusight: {text}", file=sys.stderr, flush=True)

    from ..rerun import stop_signals

    try:
        with stop_signals.as_interrupt() as got:
            out = verify(
                diff_text,
                args.script,
                args.args,
                report=report,
                steps=args.steps or 20,
                warmup=args.warmup,
                timeout_s=max(60.0, args.budget),
                env=_rerun_env(),
                progress=say,
                allow_linked=args.allow_linked_files,
            )
    except VerifyError as exc:
        print(f"gpusight run --verify: {exc}", file=sys.stderr)
        print("gpusight run --verify: nothing was changed in your files", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("gpusight run --verify: interrupted; nothing was changed", file=sys.stderr)
        return stop_signals.exit_code(got)
    from ..text_report import printable

    sys.stdout.write(printable(render_verified(out, args.verify, args.report)))
    _write_verified(out.after.report, args)
    return 0


def _write_verified(after: dict[str, Any] | None, args: argparse.Namespace) -> None:
    """``--json`` / ``--html`` with ``--verify``: the patched run's report, or why none."""
    asked = [p for p in (args.json, args.html) if p]
    if not asked:
        return
    if after is None:
        print(
            f"gpusight run --verify: the patched run made no report: nothing written to "
            f"{', '.join(asked)}",
            file=sys.stderr,
        )
        return
    if args.json:
        from ..atomic_write import write_text

        try:
            write_text(args.json, json.dumps(after, indent=1))
        except OSError as exc:
            print(f"gpusight run: could not write {args.json}: {_why(exc)}", file=sys.stderr)
    if args.html:
        from ..report_parse import report_from_dict

        _write_html(report_from_dict(after), args.html)


def _no_torch_report(label: str) -> Report:
    from ..machine_facts import build_machine
    from ..report import Report, Verdict

    return Report(
        kind="watch",
        machine=build_machine(None),
        verdict=Verdict(
            bottleneck="environment", gpu_busy_pct=None, summary="torch is not installed."
        ),
        notes=[
            "torch is not installed in this interpreter: the script ran unwatched "
            "(gpusight check says more)"
        ],
        title=label,
    )


def _write(report: Report, path: str | None) -> str | None:
    if not path:
        return None
    try:
        report.save(path)
    except Exception as exc:
        print(f"gpusight run: could not write {path}: {_why(exc)}", file=sys.stderr)
        return None
    return path


def _write_html(report: Report, path: str | None) -> str | None:
    if not path:
        return None
    try:
        report.save_html(path)
    except Exception as exc:  # the run's exit code is the script's, whatever the export does
        print(f"gpusight run: could not write {path}: {_why(exc)}", file=sys.stderr)
        return None
    return path


def _why(exc: BaseException) -> str:
    """An OSError's reason without the temporary file's name it happened on."""
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
