"""``%%gpusight --what-if [--budget S]``: the training cell re-run once per change, measured.

The same plan, budget and comparison as ``gpusight run --what-if`` (``rerun/``), with the cell
run in the kernel instead of a script in a new process: before each run everything the cell can
change is put back (``cell_state.py``), the change is injected (``rerun/inject.py``; a DataLoader
the notebook built in an earlier cell is rebuilt with the change for that run), the watch stops
the cell after its measured steps, and the change is undone. At the end the kernel is as it was
before the cell: the model untrained by the what-ifs, the optimizer, RNG, flags and the cell's
names as found.
"""

from __future__ import annotations

import ast
import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

from ..report import Report
from ..rerun.driver import MAX_WINDOW_S, MIN_WINDOW_S, STEPS, judge
from ..rerun.inject import LOADER_KEYS
from ..rerun.outcome import RunResult
from .cell_state import CellState
from .time_limit import interrupted_after


class _NotRemade(Exception):
    """A DataLoader of the notebook's that cannot be rebuilt with a change."""


class CellRunner:
    def __init__(
        self,
        code: Any,
        shell: Any,
        state: CellState,
        *,
        steps: int,
        warmup: int,
        label: str | None,
        source_names: dict[str, tuple[str, int]],
        sandbox: Any = None,
    ) -> None:
        self.sandbox = sandbox
        """The scratch copy of the kernel's folder each run works in (``rerun/sandbox.py``)."""
        self.code = code
        self.shell = shell
        self.state = state
        self.steps = steps
        self.warmup = warmup
        self.label = label
        self.names = source_names
        self._overlay: Any = None
        """The overlay the re-runs' child processes see the folder through, or why none: its
        trial mount made at the first re-run, once (``rerun/overlay.py``)."""

    def __call__(
        self, label: str, changes: dict[str, Any], profile: bool, timeout_s: float
    ) -> RunResult:
        from ..knobs.dataloader import clone
        from ..rerun.facts import from_watch
        from ..rerun.inject import install
        from ..watch.session import Watch
        from ..whatif.loaders import shutdown

        self.state.restore()
        ns = self.shell.user_ns
        inj = None
        clones: list[Any] = []
        error: str | None = None
        w = Watch(
            steps=self.steps,
            warmup=self.warmup,
            profile_steps=3 if profile else 0,
            label=self.label,
            source_names=self.names,
            min_window_s=MIN_WINDOW_S,
            max_window_s=MAX_WINDOW_S,
            lean=not profile,  # the timed runs compare step times only (as the script's do)
            namespaces=[ns],
        )
        t = time.monotonic()
        try:
            if changes:
                inj = install(changes)
                if any(k in changes for k in LOADER_KEYS):
                    # Built before the cell: rebuilt for this run (the patch sets the change).
                    for name, dl in self.state.loaders.items():
                        try:
                            ns[name] = remade = clone(dl)
                        except Exception as exc:
                            raise _NotRemade(
                                f"the DataLoader {name!r} could not be rebuilt with the change "
                                f"({type(exc).__name__}: {exc})"[:300]
                            ) from None
                        clones.append(remade)
            code = self._edited(changes)
            with self._in_copy(), w, interrupted_after(timeout_s) as overran:
                try:
                    exec(code, self.shell.user_global_ns, ns)
                except KeyboardInterrupt:
                    if not overran[0]:
                        raise
                    error = f"stopped: it ran past its time limit of {timeout_s:.0f} s"
        except KeyboardInterrupt:
            raise
        except _NotRemade as exc:
            error = str(exc)
            w.outcome = "not run"
        except BaseException as exc:
            error = f"the cell raised {type(exc).__name__}: {exc}"[:300]
        finally:
            if inj is not None:
                inj.undo()
            for clone in clones:
                shutdown(getattr(clone, "_iterator", None))
            self.state.restore()
        wall = time.monotonic() - t
        report = w.report.to_dict() if w.report is not None else None
        facts = from_watch(w, wall) if w.report is not None else None
        if facts is not None and inj is not None:
            facts["injected"] = inj.applied
        stopped = w.outcome == "stopped"
        res = RunResult(label, changes, False, wall, report, facts, None if stopped else error)
        if report is None and res.error is None:
            res.error = "no report"
        return judge(res)

    def _edited(self, changes: dict[str, Any]) -> Any:
        """The cell's code as a change edits it (``Knob.source_edits``): only the cell's own
        text is changed here (a script's files: ``gpusight run --what-if``)."""
        from ..knobs import source_edits

        edits = source_edits(changes) if changes else {}
        if isinstance(edits, str):
            raise _NotRemade(f"the change could not be made: {edits}")
        name = self.code.co_filename
        if set(edits) - {name}:
            raise _NotRemade("a change to a file the cell imports is measured by gpusight run")
        if name not in edits:
            return self.code
        return self.shell.compile(edits[name], name, "exec")

    @contextlib.contextmanager
    def _in_copy(self) -> Iterator[None]:
        """The cell runs in the scratch copy, under the write guard; then back where it was."""
        box = self.sandbox
        if box is None:
            yield
            return
        from ..rerun.overlay import over
        from ..rerun.write_guard import guarded
        from .cell_writers import children_overlaid, sqlite_in_copy
        from .log_handlers import file_handlers_detached
        from .open_files import files_redirected

        scratch = os.path.join(box.holder or box.path, "open-files")
        if self._overlay is None:
            self._overlay = over(box.root, box.holder or scratch)
        here = os.getcwd()
        os.chdir(box.path)
        try:
            with (
                files_redirected(box.root, scratch),
                file_handlers_detached(),
                children_overlaid(self._overlay, box.holder or scratch),
                sqlite_in_copy(box),
                guarded(box.path, [box.root]),
            ):
                yield
        finally:
            os.chdir(here)


def run(args: Any, cell: str, code: Any, shell: Any, names: dict[str, tuple[str, int]]) -> Report:
    """The what-if of one cell; raises ``UsageError`` for a cell that cannot be re-run."""
    from IPython.core.error import UsageError

    from ..report_parse import report_from_dict
    from ..rerun.driver import Driver
    from ..rerun.results import apply
    from .progress import progress_for_shell

    try:
        tree = ast.parse(shell.transform_cell(cell))
    except SyntaxError as exc:
        raise UsageError(f"%%gpusight --what-if: the cell does not parse: {exc}") from None
    from .cell_state import refusal

    why = refusal(tree)
    if why is not None:
        raise UsageError(
            f"%%gpusight --what-if: not re-running this cell: {why}. Run it under plain "
            "%%gpusight, or move that line to another cell."
        )
    if not args.budget > 0:
        raise UsageError("%%gpusight: --budget must be a positive number of seconds")
    state = CellState.capture(shell.user_ns, tree)
    from ..rerun import sandbox

    box = sandbox.make(os.getcwd(), prefix="gpusight-cell-copy-")
    runner = CellRunner(
        code,
        shell,
        state,
        steps=args.steps or STEPS,
        warmup=args.warmup,
        label=args.label,
        source_names=names,
        sandbox=box,
    )
    driver = Driver(runner, budget_s=args.budget, warmup=args.warmup)
    try:
        with progress_for_shell("What-if: the cell's first run") as progress:
            shown = [0.0]

            def say(text: str) -> None:
                # The share of the planned runs made (a sweep that goes on adds runs: the bar
                # never goes back).
                shown[0] = max(shown[0], driver.share_done())
                progress(text.removeprefix("what-if "), shown[0])

            driver.progress = say
            out = driver.what_if()
    finally:
        changed = state.restore()
        box.remove()
    base = out.baseline
    if base.report is None:
        raise UsageError(f"%%gpusight --what-if: the cell's first run failed: {base.error}")
    report = report_from_dict(base.report)
    if not base.ok:
        report.notes.append(f"what-if: not run, the cell's first run failed: {base.error}")
    else:
        apply(report, out)
    report.notes.append(
        f"the cell's re-runs ran in a scratch copy of {box.root} (removed afterwards): what "
        "they wrote there left your files as they were"
    )
    report.notes.append(
        f"the cell ran {out.runs} times; the kernel is as before it: "
        + (
            "models, optimizers, RNG, torch flags and the names the cell sets put back"
            + (f" ({', '.join(sorted(set(changed))[:4])} had changed)" if changed else "")
        )
    )
    if out.interrupted:
        raise KeyboardInterrupt
    return report
