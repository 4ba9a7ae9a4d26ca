"""One costly statement of the loop run less often, or not at all (issue #50): a logger, a
``gc.collect()``, or a metric with the logger's line that reads it, thinned together; in a
framework's step hook (Lightning's ``training_step``, a ``Trainer`` subclass's
``compute_loss``) or once-a-batch hook (a Lightning ``Callback``'s ``on_train_batch_end``, a
``TrainerCallback``'s ``on_step_end``), by the step counter the framework hands it.

Offered for the costliest lines of the user's own work the baseline timed (``run.host_lines``),
and for runs of lines that work on the model's output (``rules.output_reads``), each an arm of
one group, ordered by the host time measured on it. The re-run runs a copy of the
user's folder whose loop file has the change made (``source_edits``): the computation measured
is the one the patch makes. A statement that can change what the training computes is refused
with the reason, as a row that says it (``fixes/statement_thinning.py`` decides).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..fixes import statement_thinning as thin
from .base import MIN_WINDOW_S, Arm, Group, Knob, Situation

if TYPE_CHECKING:
    from ..report import Fix
    from ..rules.host_line_fix import HostLine

KEY = "statement"
MIN_SHARE_PCT = 5.0
"""A line is offered where it holds this share of the timed steps' host time."""
LINES = 3
"""The costliest lines offered, at most."""


def _host_line(row: dict[str, Any]) -> HostLine:
    from ..rules.host_line_fix import HostLine

    return HostLine(str(row.get("file")), int(row.get("line") or 0), row.get("code"),
                    str(row.get("function") or ""), float(row.get("ms_per_step") or 0.0),
                    float(row.get("share_pct") or 0.0), bool(row.get("in_forward")))  # fmt: skip


def _runs_a_framework(ln: HostLine) -> bool:
    """A line that runs a training framework's loop (``trainer.fit(...)``, ``trainer.train()``):
    the framework's whole step runs under it, so it is not a statement to run less often."""
    from ..rules.host_line_fix import kind_of

    return kind_of(ln) == "framework_loop"


def _framework_loops(facts: dict[str, Any]) -> list[dict[str, Any]]:
    rows = (facts.get("host_lines") or {}).get("lines") or []
    return [r for r in rows if _runs_a_framework(_host_line(r))]


def _own_lines(facts: dict[str, Any]) -> list[dict[str, Any]]:
    from ..rules.host_line_fix import is_framework

    site = facts.get("forward_site") or {}
    call = site.get("line")
    out = []
    for row in (facts.get("host_lines") or {}).get("lines") or []:
        ln = _host_line(row)
        call_here = call if row.get("file") == site.get("file") else None
        if not _runs_a_framework(ln) and not is_framework(ln, call_here):
            out.append(row)
    return out


def _big_lines(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """The user's lines that hold ``MIN_SHARE_PCT`` or more of the step's host time."""
    return [r for r in _own_lines(facts) if float(r.get("share_pct") or 0) >= MIN_SHARE_PCT]


def _runs(facts: dict[str, Any], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The user's lines of each run of statements that work on the model's output
    (``rules.output_reads.output_runs``: a metric and the logger's line that reads it) as one
    row from its first line to its last (``last``), where they hold ``MIN_SHARE_PCT`` of the
    step's host time together."""
    from ..rules.output_reads import output_runs

    site = facts.get("forward_site") or {}
    source = _read(str(site.get("file") or "")) if site.get("file") else None
    out = []
    for a, b in output_runs(source, site.get("line")):
        members = [r for r in rows if r.get("file") == site.get("file")
                   and a <= int(r.get("line") or 0) <= b]  # fmt: skip
        share = sum(float(r.get("share_pct") or 0.0) for r in members)
        if len(members) >= 2 and share >= MIN_SHARE_PCT:
            first = min(members, key=lambda r: int(r.get("line") or 0))
            ms = sum(float(r.get("ms_per_step") or 0.0) for r in members)
            code = source.splitlines()[a - 1] if source else first.get("code")
            out.append({**first, "line": a, "last": b, "share_pct": share, "ms_per_step": ms,
                        "code": code})  # fmt: skip
    return out


def _holds(run: dict[str, Any], row: dict[str, Any]) -> bool:
    return bool(run["line"] <= int(row.get("line") or 0) <= run["last"])


def _in_forward(row: dict[str, Any]) -> bool:
    """A line of a module's ``forward``: never thinned (``statement_thinning.plan`` refuses
    it), so no arm of its own."""
    return thin.in_forward(str(row.get("function") or ""))


def _no_loop(site: dict[str, Any]) -> str | None:
    """Why no statement of the step can be thinned where the model's call has no loop around
    it in its file, and no framework's step hook that counts the steps holds it
    (``step_hooks``: Lightning's ``training_step`` by its ``batch_idx``)."""
    from ..rules.host_line_loops import parsed

    source = _read(str(site.get("file") or ""))
    line = int(site.get("line") or 0)
    tree = parsed(source) if source is not None else None
    if tree is None or thin.step_scope(tree, line) is not None:
        return None
    return (
        f"the model's call (line {line}) has no loop around it in its file, nor is it in a "
        "framework's step hook with a step counter (Lightning's `training_step`): a "
        "statement beside it cannot be run every N steps"
    )


def _read(path: str) -> str | None:
    from .user_lines import source_text

    return source_text(path)


def _thinning(change: dict[str, Any]) -> thin.Thinning:
    return thin.Thinning(
        int(change["first"]), int(change["last"]), change["mode"], int(change["every"]),
        str(change.get("code") or ""), change.get("counter"), int(change["loop_line"]),
    )  # fmt: skip


def every_for(line_ms: float, step_ms: float) -> int:
    """Steps between two runs of a thinned statement: 100 where a re-run's shortest measured
    window still holds three runs of it (a step of a few milliseconds once it is thinned),
    else 10 (20 measured steps hold two). A histogram 43x the step, run every 10 steps, still
    left the step 5x slower than without it (an H100, ``benchmarks/results/h100-run25``)."""
    rest = max(step_ms - line_ms, 1e-3)
    steps = MIN_WINDOW_S * 1000.0 / (rest + line_ms / 100.0)
    return 100 if steps >= 300 else thin.EVERY


def _arm(row: dict[str, Any], site: dict[str, Any], ids: set[str], step_ms: float) -> Arm:
    """The arm for one timed line: its change, or why it is refused."""
    code = str(row.get("code") or "").strip()
    offset = int(row.get("offset") or 0)
    first = int(row.get("line") or 0) + offset
    last = int(row.get("last") or 0) + offset
    label = f"lines {first}-{last}" if last > first else f"line {first}"
    label = f"{label} `{code[:48]}`"
    waits = bool(row.get("waiting")) and "code.host_sync" in ids
    finding = "code.host_sync" if waits else "load.cpu_preprocessing"
    loop_file = str(site.get("file") or "")
    source = _read(loop_file)
    if source is None:
        return Arm(KEY, label, {}, finding, skipped="its loop's file cannot be read")
    same = row.get("file") == loop_file
    elsewhere = None if same else _read(str(row.get("file")))
    got = thin.plan(source, int(site.get("line") or 0), int(row.get("line") or 0),
                    function=str(row.get("function") or ""), elsewhere=elsewhere,
                    every=every_for(float(row.get("ms_per_step") or 0.0), step_ms),
                    through=row.get("last"))  # fmt: skip
    if isinstance(got, str):
        return Arm(KEY, label, {}, finding, skipped=f"not tried: {got}")
    change = {"file": loop_file, "first": got.first, "last": got.last, "mode": got.mode,
              "every": got.every, "counter": got.counter, "loop_line": got.loop_line,
              "code": got.code, "offset": offset}  # fmt: skip
    if thin.thinned_text(source, got) is None:
        return Arm(KEY, label, {}, finding, skipped="not tried: the changed file does not compile")
    return Arm(KEY, thin.said(got, offset), {KEY: change}, finding)


class Statement(Knob):
    name = KEY
    findings = ("code.host_sync", "load.cpu_preprocessing")
    keys = (KEY,)

    def groups(self, s: Situation) -> list[Group]:
        site = s.facts.get("forward_site") or {}
        own = [r for r in _own_lines(s.facts) if not _in_forward(r)]
        runs = _runs(s.facts, own) if site.get("file") else []
        # A line of a run goes with it: alone, it may assign what the run's logger reads.
        alone = [r for r in _big_lines(s.facts)
                 if not _in_forward(r) and not any(_holds(u, r) for u in runs)]  # fmt: skip
        rows = sorted(alone + runs, key=lambda r: -float(r.get("share_pct") or 0.0))
        if not rows or not site.get("file") or _no_loop(site) is not None:
            return []
        arms, seen = [], set()
        for row in rows[:LINES]:
            arm = _arm(row, site, s.ids, float(s.facts.get("step_time_ms") or 0.0))
            where = tuple(sorted((arm.changes.get(KEY) or {}).items())) or arm.label
            if where in seen:
                continue  # two timed lines of one statement (a block's header and its body)
            seen.add(where)
            arms.append(arm)
        return [Group(KEY, float(rows[0].get("share_pct") or 0.0), arms)]

    def not_planned(self, s: Situation) -> str:
        if not (s.facts.get("host_lines") or {}).get("lines"):
            return "no line of the loop was timed (the run ended before the steps timed by line)"
        loops = [r for r in _framework_loops(s.facts)
                 if float(r.get("share_pct") or 0) >= MIN_SHARE_PCT]  # fmt: skip
        if loops:
            r = loops[0]
            return (
                f"line {r.get('line')} `{str(r.get('code') or '').strip()[:48]}` runs the "
                "training framework's loop, under which its whole step runs: a statement of "
                "yours in its hooks runs on every step, by the framework's call"
            )
        site = s.facts.get("forward_site") or {}
        why = _no_loop(site) if site.get("file") and _big_lines(s.facts) else None
        if why is not None:
            return why
        model = sorted({str(r.get("function")) for r in _big_lines(s.facts) if _in_forward(r)})
        if model:
            return (
                f"the lines of your own code that took {MIN_SHARE_PCT:g}% or more of the step's "
                f"host time are in {', '.join(f'`{m}`' for m in model)}, the model's own "
                "computation, which every step runs"
            )
        return f"no line of your own code took {MIN_SHARE_PCT:g}% or more of the step's host time"

    def validate(self, changes: dict[str, Any]) -> str | None:
        c = changes.get(KEY)
        if c is None:
            return None
        if not isinstance(c, dict) or c.get("mode") not in ("skip", "every"):
            return "statement: a {file, first, last, mode: skip|every, every, loop_line} object"
        try:
            t = _thinning(c)
        except (KeyError, TypeError, ValueError):
            return "statement: first, last, every and loop_line are line numbers and a count"
        if t.every < 2 or t.first > t.last:
            return "statement: every is 2 or more, first at most last"
        return None

    def took_effect(self, facts: dict[str, Any] | None, changes: dict[str, Any]) -> str | None:
        return None  # the changed file is what the re-run ran

    def source_edits(self, changes: dict[str, Any]) -> dict[str, str] | str:
        c = changes.get(KEY)
        if not isinstance(c, dict):
            return {}
        path = str(c.get("file"))
        source = _read(path)
        new = None if source is None else thin.thinned_text(source, _thinning(c))
        if new is None:
            return f"line {c.get('first')} of {path} could not be changed as planned"
        return {path: new}

    def fix(self, arm: Arm, items: int | None, facts: dict[str, Any]) -> Fix:
        from ..fixes.cell_patch import CellSource, with_statement_cell_fix
        from ..fixes.patch_files import with_patch
        from ..report import Fix

        c = arm.changes.get(KEY) or {}
        t = _thinning(c)
        cell = facts.get("forward_cell")
        src = CellSource(**cell) if cell else None
        shown = src.label if src else str((facts.get("forward_site") or {}).get("shown"))
        f = Fix(text=_fix_text(t, shown, int(c.get("offset") or 0)))
        if src is not None:  # the cell that calls the model, changed
            with_statement_cell_fix(f, src, thin.thinned_text(src.compiled, t))
            return f
        source = _read(str(c.get("file")))
        if source is not None:
            with_patch(f, thin.thinned_patch(source, t, shown), {shown: source})
        return f


def _fix_text(t: thin.Thinning, shown: str, offset: int) -> str:
    at = f"{shown}:{thin.span(t, offset)} (`{t.code}`)"
    if t.mode == "skip":
        why = (
            " If memory was the reason, run it between epochs, or let the allocator reuse "
            "memory (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) instead of emptying its "
            "cache."
            if "empty_cache" in t.code or "collect" in t.code
            else ""
        )
        return (
            f"Remove {at} from the loop: the step waits for it every time, and nothing the "
            f"training computes reads what it does.{why}"
        )
    counter = t.counter or "step"
    return (
        f"Run {at} every {t.every} steps (`if {counter} % {t.every} == 0:`): it only reports, "
        "so the training computes the same"
        + ("; every 100 steps saves a little more." if t.every < 100 else ".")
    )
