"""``gpusight run --what-if``: re-run the unmodified script once per change, within a budget.

Each run is a fresh process (``gpusight run --inject CHANGES --facts F --json R script ...``)
that stops after its measured steps, so every change meets the script as it starts for real:
its data, its DataLoader's first workers (after the first, forked from one process that did the
libraries' imports once: ``warm_start.py``). In order:

1. the baseline: watched, profiled, the diagnosis itself (its report is the answer's base);
2. a control: the same script, unprofiled, as every change runs; the pair gives the noise;
3. the planned changes (``plan.py``), highest share of the step first; the two sweeps go on
   while they gain; a change whose forecast cost does not fit what is left is skipped; a
   precision or layout change that lost is tried again on top of the winning batch
   (``stacking.py``);
4. the winners together.

Each comparison is items per second over the measured steps (throughput: every stall
counted), so a change of batch size compares fairly. The timer is the watch's step clock, the
same in every run, outside the script's own code.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..knobs import (
    by_name,
    extra_warmup,
    not_planned,
    run_items,
    script_args,
    source_edits,
    took_effect,
)
from ..knobs.base import MIN_WINDOW_S, Situation
from ..knobs.gain_rule import MIN_GAIN, beyond_bound, noise_pct, threshold
from . import stacking
from .confirm import confirmed, slower_than_baseline
from .outcome import Outcome, RunResult
from .overlay import Layer, Overlay, layer_of, over, wrap
from .plan import Arm, Group, combine, hidden_by_noise, plan, sweep_goes_on, together_label
from .run_failure import OOM, reason
from .warm_start import OFF_ENV as WARM_OFF_ENV
from .warm_start import OFF_NOTE, Served, WarmStart

if TYPE_CHECKING:
    from .sandbox import Sandbox

__all__ = ["MIN_GAIN", "MIN_WINDOW_S", "Driver", "Outcome", "RunResult", "ScriptRunner", "judge"]

# Measured steps per run (at least), seconds of measured steps (at least: the knobs plan by
# it, ``knobs.base.MIN_WINDOW_S``; at most).
STEPS = 20
MAX_WINDOW_S = 8.0
# Two control runs further apart than this get a third.
CONTROLS_AGREE_PCT = 10.0
# What a run may take beyond its forecast before it is stopped.
TIMEOUT_FACTOR = 3.0
TIMEOUT_PAD_S = 30.0


Runner = Callable[[str, dict[str, Any], bool, float], RunResult]
"""(label, changes, profile, timeout_s) -> the run's result; never raises but KeyboardInterrupt."""


class ScriptRunner:
    """Each run a fresh ``gpusight run --inject ...`` process that stops after its steps."""

    def __init__(
        self,
        script: str,
        script_args: list[str],
        *,
        steps: int = STEPS,
        warmup: int = 3,
        python: str = sys.executable,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        lean: bool = False,
        sandbox: Sandbox | None = None,
        refuse_outside: bool = False,
        warm: bool = False,
        warm_from: WarmStart | None = None,
    ) -> None:
        self.lean = lean
        """Unprofiled runs watch lean (``Watch.lean``): the what-if compares their step times
        only. ``--verify`` keeps the whole watch: its comparison shows the findings too."""
        self.cwd = cwd
        """Where the script runs (None: here); ``--verify`` runs a patched copy elsewhere."""
        self.sandbox = sandbox
        """The scratch copy of the user's folder each run works in (``sandbox.py``)."""
        self.env: dict[str, str] | None = env
        self._asked = (script, cwd, env, refuse_outside)
        if sandbox is not None:
            self.cwd, script, self.env = _in_sandbox(sandbox, script, cwd, env, refuse_outside)
        self.script = script
        self.args = list(script_args)
        self.steps = steps
        self.warmup = warmup
        self.python = python
        self.tmp = Path(tempfile.mkdtemp(prefix="gpusight-whatif-"))
        self.count = 0
        self.overlay: Overlay | str = "no scratch copy"
        """Every process of a run sees the user's folder through an overlay (``overlay.py``),
        or why not (the scratch copy and its write guard only)."""
        if sandbox is not None:
            self.overlay = over(sandbox.root, str(self.tmp))
        self.warm: WarmStart | None = None
        """Where runs fork from once the first has started (``warm_start.py``)."""
        self.warm_shared = warm_from is not None
        """The warm start is another runner's, to close (``--verify``'s two runs share one)."""
        self.warm_off = OFF_NOTE if warm and os.environ.get(WARM_OFF_ENV) else None
        if warm_from is not None:
            self.warm = warm_from
        elif warm and self.warm_off is None:
            env = self.env or dict(os.environ)
            self.warm = WarmStart.start(python, self.script, env, self.cwd or os.getcwd())

    def warm_note(self) -> str | None:
        """How the runs started, for the report (None: the warm start was not asked for)."""
        if self.warm_off is not None:
            return f"each re-run imported its libraries afresh: {self.warm_off}"
        return self.warm.note() if self.warm is not None else None

    def start_extra_s(self, changes: dict[str, Any]) -> float:
        """What a run with ``changes`` takes to start beyond the control: the imports that the
        warm start spares the others, for a run of edited files that must start fresh."""
        warm = self.warm
        if warm is None or warm.why is not None or warm.said is None or not changes:
            return 0.0
        edits = source_edits(changes)
        if not edits or not isinstance(edits, dict):
            return 0.0
        env = self.env if self.env is not None else dict(os.environ)
        return 0.0 if warm.copies_fork(self.python, env) else float(warm.said.get("import_s", 0.0))

    def close(self) -> None:
        """End what the runs shared (the warm start's server)."""
        if self.warm is not None and not self.warm_shared:
            self.warm.close()

    def __call__(
        self, label: str, changes: dict[str, Any], profile: bool, timeout_s: float
    ) -> RunResult:
        self.count += 1
        n = self.count
        rp, fp, log = self.tmp / f"r{n}.json", self.tmp / f"f{n}.json", self.tmp / f"log{n}.txt"
        cmd = [
            self.python, "-c", LAUNCH, "run", "--quiet",
            "--json", str(rp), "--facts", str(fp),
            "--steps", str(self.steps), "--warmup", str(self.warmup + extra_warmup(changes)),
            "--profile-steps", "3" if profile else "0",
            "--min-window", str(MIN_WINDOW_S), "--max-window", str(MAX_WINDOW_S),
        ]  # fmt: skip
        if self.lean and not profile:
            cmd.append("--lean")
        cmd += ["--shown-as", self._asked[0]]
        if changes:
            cmd += ["--inject", json.dumps(changes)]
        edited = self._edited(changes)
        if isinstance(edited, str):
            return RunResult(label, changes, False, 0.0, error=edited)
        box, cwd, script, env = edited
        cmd += [script, *script_args(self.args, changes)]
        copied = script if box is not None or self.warm_shared else None  # a copy of its own
        t, paths, where = time.monotonic(), (rp, fp, log), (cwd, env, copied)
        try:
            res, forked = self._launch(label, changes, cmd, paths, where, timeout_s)
            if forked and self.warm is not None and not self.warm.vouch(res.ok, res.error):
                # Forking broke what a fresh process runs: this run again, fresh, as all after.
                left = max(1.0, timeout_s - (time.monotonic() - t))
                res = self._launch(label, changes, cmd, paths, where, left)[0]
            return res
        finally:
            if box is not None:
                box.remove()

    def _edited(
        self, changes: dict[str, Any]
    ) -> tuple[Sandbox | None, str | None, str, dict[str, str] | None] | str:
        """Where a run with ``changes`` runs: the scratch copy, or where a change edits the
        user's files (``Knob.source_edits``) a copy of its own holding them; or why not."""
        edits = source_edits(changes) if changes else {}
        if isinstance(edits, str):
            return f"the change could not be made: {edits}"
        if not edits:
            return None, self.cwd, self.script, self.env
        if self.sandbox is None:
            return "a change to your files is measured only in a scratch copy of the folder"
        from . import sandbox

        files = {}
        for path, text in edits.items():
            rel = os.path.relpath(os.path.abspath(path), self.sandbox.path)
            if rel.startswith(".."):
                return f"{path} is outside the folder the re-runs copy"
            files[rel] = text
        box = sandbox.make(self.sandbox.root, files, prefix="gpusight-whatif-edit-")
        script, cwd, env, refuse = self._asked
        cwd, script, env = _in_sandbox(box, script, cwd, env, refuse)
        return box, cwd, script, env

    def _launch(
        self,
        label: str,
        changes: dict[str, Any],
        cmd: list[str],
        paths: tuple[Path, Path, Path],
        where: tuple[str | None, dict[str, str] | None, str | None],
        timeout_s: float,
    ) -> tuple[RunResult, bool]:
        """The run and whether it was forked from the warm start; ``where``: its folder,
        environment and, for a run of edited files in a copy of its own, its script there."""
        rp, fp, log = paths
        cwd, env, copied = where
        t = time.monotonic()
        with open(log, "wb") as out, layer_of(self.overlay) as layer:
            with contextlib.suppress(OSError):  # room for the reason, should TMPDIR fill up
                os.posix_fallocate(out.fileno(), 0, LOG_ROOM)
            proc = self._start(cmd, out, layer, cwd, env, copied)
            try:
                rc = proc.wait(timeout=max(1.0, timeout_s))
            except subprocess.TimeoutExpired:
                _kill(proc, grace_s=min(KILL_GRACE_S, max(1.0, timeout_s * KILL_GRACE_SHARE)))
                wall = time.monotonic() - t
                stopped = RunResult(
                    label, changes, False, wall, error=f"stopped after {wall:.0f} s"
                )
                return stopped, isinstance(proc, Served)
            except BaseException:
                _kill(proc)
                raise
            finally:
                # DataLoader workers of a script that ended abnormally: a moment to finish
                # their own exit (it removes their pymp-* folders), then ended.
                _end_group(proc.pid)
        wall = time.monotonic() - t
        report = _read(rp)
        facts = _read(fp)
        res = RunResult(label, changes, False, wall, report, facts)
        outcome = (facts or {}).get("outcome", "")
        if report is None or (rc != 0 and outcome != "stopped"):
            res.error = reason(rc, log, (env or os.environ).get("TMPDIR"))
        return judge(res), isinstance(proc, Served)

    def _start(
        self,
        cmd: list[str],
        out: Any,
        layer: Layer | None,
        cwd: str | None,
        env: dict[str, str] | None,
        copied: str | None,
    ) -> subprocess.Popen[bytes] | Served:
        """The run's process: forked from the warm start where it can, else fresh."""
        if self.warm is not None and cmd[1:3] == ["-c", LAUNCH]:
            run_env = env if env is not None else dict(os.environ)
            here = cwd or os.getcwd()
            served = self.warm.run(cmd[0], cmd[3:], here, run_env, out.name, layer, copied)
            if served is not None:
                return served
        return subprocess.Popen(
            wrap(cmd, layer) if layer is not None else cmd,
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, env=env, cwd=cwd,
        )  # fmt: skip


LAUNCH = (
    "import os, sys; sys.path[0] = os.devnull; from gpusight.cli import main; "
    "from gpusight.rerun.quick_exit import end; end(main(sys.argv[1:]))"
)
"""``python -m gpusight`` without the working folder first on ``sys.path``: a ``gpusight.py``
of the user's there would be imported instead (the script's own folder still comes first for
the script, as ``gpusight run`` sets it). It ends as soon as its files are written
(``quick_exit``)."""


def _in_sandbox(
    box: Sandbox, script: str, cwd: str | None, env: dict[str, str] | None, refuse: bool
) -> tuple[str, str, dict[str, str]]:
    """The folder, script path and environment of a run in ``box``: the same place relative
    to the copy as to the user's folder, the guard asked for in the environment."""
    from .write_guard import ENV

    here = os.path.abspath(cwd or os.getcwd())
    rel_cwd = os.path.relpath(here, box.root)
    run_cwd = box.path if rel_cwd.startswith("..") else os.path.join(box.path, rel_cwd)
    full = os.path.abspath(script)
    rel = os.path.relpath(full, box.root)
    run_script = full if rel.startswith("..") else os.path.join(box.path, rel)
    guard = {"copy": box.path, "protect": [box.root, os.path.dirname(full)],
             "outside": "refuse" if refuse else "record"}  # fmt: skip
    return run_cwd, run_script, {**(env or os.environ), ENV: json.dumps(guard)}


SHORT_RUN = "the code ended before enough measured steps"
LOG_ROOM = 64 << 10
KILL_GRACE_S = 10.0
KILL_GRACE_SHARE = 0.25
"""A run stopped at its time limit gets this share of the limit (at most ``KILL_GRACE_S``) to
end on Ctrl-C before SIGTERM, and half that again before SIGKILL: the budget stays a hard
limit on a script that ignores both."""


def judge(res: RunResult) -> RunResult:
    """Mark a run that wrote its report ok, or say why it does not count."""
    if res.error is not None:
        return res
    if not res.step_ms or res.steps < 3:
        res.error = SHORT_RUN
    elif res.changes and (why := took_effect(res.facts, res.changes)) is not None:
        res.error = f"the change did not take effect ({why})"
    else:
        res.ok = True
    return res


def sweep_step_ratio(
    control_ms: float, seen: list[tuple[float, RunResult]], slowdown: float
) -> float:
    """How many times the control's step a run at ``slowdown`` (a batch ``k`` times larger)
    will take, from the runs of the sweep so far (``(k, run)``): the line through the last two
    points (the control's at ``k = 1`` when one run is in), never falling, and between the
    largest step seen and ``k`` times the control's (a step that grows with its batch).

    ``k`` times the control's step alone skipped the x64 run of a launch-bound loop whose x16
    step was no longer than its control's (it needed 7 s, the forecast said 40)."""
    points = [(1.0, control_ms), *sorted((k, float(r.step_ms or 0.0)) for k, r in seen)]
    (k0, s0), (k1, s1) = points[-2], points[-1]
    slope = max(0.0, (s1 - s0) / (k1 - k0)) if k1 > k0 else 0.0
    step = s1 + slope * (slowdown - k1)
    return min(max(1.0, slowdown), max(1.0, step / control_ms, s1 / control_ms))


class Driver:
    """Runs the re-runs within the budget; ``progress(text)`` hears of each."""

    def __init__(
        self,
        runner: Runner,
        *,
        budget_s: float = 180.0,
        warmup: int = 3,
        progress: Callable[[str], None] | None = None,
        only: frozenset[str] | None = None,
    ) -> None:
        self.runner = runner
        self.only = only
        """The knobs to try (``--try``); None: every knob the facts call for."""
        self.budget_s = budget_s
        self.warmup = warmup
        self.progress = progress or (lambda _t: None)
        self.t0 = 0.0
        self.count = 0
        self.planned = 2
        """Runs the what-if plans to make: the baseline and the control, then the plan's."""

    def share_done(self) -> float:
        """How far the what-if is, in runs made over runs planned (below 1 until it ends)."""
        return min(0.99, self.count / max(self.count + 1, self.planned))

    # -- one run ----------------------------------------------------------------------------
    def left_s(self) -> float:
        return self.budget_s - (time.monotonic() - self.t0)

    def run_one(
        self, label: str, changes: dict[str, Any], *, profile: bool, timeout_s: float
    ) -> RunResult:
        self.count += 1
        n = self.count
        self.progress(f"what-if {n}: {label} ...")
        # The budget is a hard limit over every run, the baseline's included.
        left = self.left_s()
        res = self.runner(label, changes, profile, max(1.0, min(timeout_s, left)))
        if timeout_s > left and not res.ok and (res.error or "").startswith("stopped after"):
            res.error = f"stopped when the budget ran out (--budget {self.budget_s:g} s)"
        what = (
            f"{res.step_ms:.2f} ms/step, {res.items or '?'} items" if res.ok else res.error or "?"
        )
        self.progress(f"what-if {n}: {label}: {what} ({res.wall_s:.1f} s)")
        return res

    def forecast_s(
        self, control: RunResult, arm: Arm, seen: list[tuple[float, RunResult]] | None = None
    ) -> float:
        """A run's wall time: the control's, with its steps ``arm.slowdown`` times longer, or
        (``seen``: the sweep's runs so far, each with its slowdown) as long as the step time
        the runs so far point to (:func:`sweep_step_ratio`)."""
        step_s = (control.step_ms or 0.0) / 1000.0
        stepping = min(control.wall_s, step_s * (control.steps + self.warmup + 3))
        ratio = max(1.0, arm.slowdown)
        if seen and control.step_ms:
            ratio = sweep_step_ratio(control.step_ms, seen, arm.slowdown)
        more = extra_warmup(arm.changes) * step_s * ratio
        fresh = getattr(self.runner, "start_extra_s", None)
        more += fresh(arm.changes) if fresh is not None else 0.0
        return control.wall_s + stepping * (ratio - 1.0) + more + arm.extra_s

    # -- the whole what-if ------------------------------------------------------------------
    def what_if(self) -> Outcome:
        self.t0 = time.monotonic()
        base = self.run_one("baseline (watched, profiled)", {}, profile=True,
                            timeout_s=self.budget_s)  # fmt: skip
        out = Outcome(baseline=base, control=None, budget_s=self.budget_s)
        try:
            self._arms(out)
        except KeyboardInterrupt:
            out.interrupted = True
        out.spent_s = time.monotonic() - self.t0
        out.runs = self.count
        return out

    def _arms(self, out: Outcome) -> None:
        base = out.baseline
        if not base.ok or base.facts is None:
            return
        control = self.run_one("control (no change)", {}, profile=False,
                               timeout_s=TIMEOUT_FACTOR * base.wall_s + TIMEOUT_PAD_S)  # fmt: skip
        out.control = control
        ref = control if control.ok else base
        # Items per step unknown (a model called with keyword arguments only, no DataLoader):
        # steps per second then, which the changes that keep the batch compare fairly on (the
        # batch changes are not planned without a known batch).
        items0 = ref.items or 1
        # Within a run: twice the mean step's standard error. Between runs: a second control
        # at the end, where the budget allows (the profiled baseline is no control: the
        # profiler's after-effects slow its first measured steps).
        out.noise_pct = ref.noise_pct()
        if ref.items_per_s(items0) is None:
            return
        if ref is control and slower_than_baseline(control, base, items0, out.noise_pct):
            self.progress("the control ran slower than the profiled baseline: running it again")
            self._more_controls(out, ref, items0)
        winners: list[Arm] = []
        groups = [g for g in plan(base.facts) if self.only is None or g.name in self.only]
        out.plan = stacking.plan_lines(groups)
        # Each arm not already skipped, the winners together, a second control.
        arms = sum(1 for g in groups for a in g.arms if not a.skipped)
        self.planned = self.count + arms + (1 if len(groups) >= 2 else 0) + 1
        if self.only is not None:  # the changes asked for by name each get an answer
            out.not_planned = not_planned(base.facts, self.only)
        why = "".join(f"; {k}: not tried, {v}" for k, v in out.not_planned.items())
        self.progress(
            "plan: "
            + (", ".join(out.plan) or "no change to try")
            + (", then the winners together" if out.plan else "")
            + why
        )
        losers: list[Arm] = []  # to try again on top of the winning batch
        bases: dict[str, Arm] = {}  # what the groups that stack on a winner run on top of
        for g in groups:
            g, under = self._on_winner(out, g, winners, base.facts, bases)
            best = self._group(out, g, ref, items0, winners, under)
            # Each row against its own band: the unchanged script's and its run's own.
            if best is not None and best[0] >= threshold(
                out.row_noise(_run_of(out, best[1]), under)
            ):
                winners.append(best[1])
                knob = by_name(g.name)
                cores = int((base.facts or {}).get("cpu_count") or 1)
                bases[g.name] = (knob and knob.stack_base(g, out.noise_pct, cores)) or best[1]
            elif best is not None and stacking.stacks(g.name):
                losers.append(best[1])
            elif stacking.stacks(g.name) and (hidden := hidden_by_noise(g, out.noise_pct)):
                # Too small a share of the step alone to show; on a larger batch it grows.
                losers += [a for a in g.arms[:1] if a.skipped == hidden]
            if losers and stacking.batch_winner(winners) is not None:
                for arm in losers:
                    self._on_top(out, arm, ref, items0, winners)
                losers = []
        if len(winners) >= 2:
            winners = self._confirm(out, winners, ref, items0)
        if len(winners) >= 2:
            self._together(out, winners, ref, items0)
        self._second_control(out, ref, items0)

    def _confirm(self, out: Outcome, winners: list[Arm], ref: RunResult, items0: int) -> list[Arm]:
        """The winners still winning once the control has run again (``confirm``): the second
        control goes before the combined run where the budget holds both."""
        control = Arm("control", "control again (no change)", {})
        need = self.forecast_s(ref, control) + self._together_need(out, ref, winners)
        if not out.controls and ref is not out.baseline and need <= self.left_s():
            self._more_controls(out, ref, items0)
        kept = confirmed(out, winners, items0)
        gone = [a for a in winners if a not in kept]
        if gone:
            self.progress(f"{', '.join(a.label for a in gone)}: inside the noise once the "
                          "control ran again: left out of the winners together")  # fmt: skip
        for arm in gone:  # a loser after all: its second try, on top of the winning batch
            if stacking.stacks(arm.group) and stacking.batch_winner(kept) is not None:
                self._on_top(out, arm, ref, items0, kept)
        return kept

    def _on_winner(
        self, out: Outcome, g: Group, winners: list[Arm], facts: dict[str, Any],
        bases: dict[str, Arm],
    ) -> tuple[Group, RunResult | None]:  # fmt: skip
        """``g`` on top of the winner it stacks on, with that winner's run (``stacking``)."""
        again, base = stacking.on_winner(g, winners, facts, bases)
        under = _run_of(out, base)
        if under is None:
            return g, None
        self.planned += sum(1 for a in again.arms if not a.skipped)
        self.planned -= sum(1 for a in g.arms if not a.skipped)
        return again, under

    def _group(
        self,
        out: Outcome,
        g: Group,
        ref: RunResult,
        items0: int,
        winners: list[Arm],
        under: RunResult | None = None,
    ) -> tuple[float, Arm] | None:
        """Run a group's arms (a sweep while it gains); its best (gain, arm). ``under``: the
        run of the winner the arms are on top of, which they are judged against."""
        gains: list[float | None] = []
        ran: list[RunResult] = []
        best: tuple[float, Arm] | None = None
        first = len(out.arms)  # this group's runs are out.arms[first:]
        hidden = hidden_by_noise(g, out.noise_pct)
        for arm in g.arms:
            arm.skipped = arm.skipped or hidden
            if arm.skipped:
                out.arms.append((arm, None))
                continue
            if g.sweep and not sweep_goes_on(gains):
                arm.skipped = _why_stopped(ran[-1] if ran else None)
                out.arms.append((arm, None))
                continue
            # A batch sweep's steps so far say how its next step grows.
            seen = [
                (a.slowdown, r)
                for a, r in out.arms[first:]
                if r is not None and r.ok and r.step_ms and a.slowdown > 1.0
            ]
            need = self.forecast_s(ref, arm, seen)
            if need > self.left_s():
                arm.skipped = (
                    f"over the budget: needs ~{need:.0f} s, {max(0.0, self.left_s()):.0f} s "
                    "left (raise --budget)"
                )
                out.arms.append((arm, None))
                continue
            keep = self._together_need(out, ref, winners)
            if keep and need + keep > self.left_s():
                # Two winners are in: their combined run is the answer, and goes first.
                arm.skipped = (
                    f"the {max(0.0, self.left_s()):.0f} s left are kept for the "
                    f"winners together (~{keep:.0f} s; raise --budget for this one too)"
                )
                out.arms.append((arm, None))
                continue
            res = self._measure(out, arm, ref, items0, need, keep)
            if under is not None:
                out.stacked_on[len(out.arms)] = under
            out.arms.append((arm, res))
            ran.append(res)
            # The reference as it stands now: a suspect gain may have had the control re-run.
            gain = _gain(res, under or _reference_rate(out, items0), items0)
            gains.append(gain)
            if gain is not None:
                g.measured.append((arm, gain))
            if gain is not None and (best is None or gain > best[0]):
                best = (gain, arm)
            knob = by_name(g.name)
            if g.sweep and knob is not None and arm is g.arms[-1] and gain is not None:
                more = knob.extend(g, gains, Situation.of(out.baseline.facts or {}))
                if more is not None:
                    g.arms.append(more)
                    self.planned += 1
        return best

    def _measure(
        self, out: Outcome, arm: Arm, ref: RunResult, items0: int, need: float, keep: float = 0.0
    ) -> RunResult:
        """One arm's run; a gain past what its extra items can explain is measured again; a
        second such gain has the control measured again (the reference may be what was slow);
        past the bound still, it does not count (the run timed something else)."""
        res = self._run_arm(arm, ref, need, keep)
        for attempt in range(3):
            gain = _gain(res, _reference_rate(out, items0), items0)
            # Only a batch change alone has a bound: other changes gain on their own.
            if gain is None or arm.group != "batch":
                return res
            if not beyond_bound(gain, arm.items_factor, out.row_noise(res)):
                return res
            if attempt == 0 and need <= self.left_s():
                self.progress(f"{gain:.2f}x from {arm.items_factor:g}x the items: measuring again")
                res = self._run_arm(arm, ref, need, keep)
                continue
            if attempt == 1 and ref is out.control and not out.controls:
                self.progress(f"{gain:.2f}x again: measuring the control again")
                self._more_controls(out, ref, items0)
                continue
            break
        res.ok = False
        res.error = (
            f"suspect: {gain:.2f}x from {arm.items_factor:g}x the items per step is more "
            "than the larger batch can explain; not counted"
        )
        return res

    def _run_arm(self, arm: Arm, ref: RunResult, need: float, keep: float = 0.0) -> RunResult:
        """One run of ``arm``, stopped before it eats into ``keep``: the seconds the winners'
        combined run needs (hf_t5_seq2seq's torch.compile ran past its forecast on the H100,
        run42, and the combined row of two winners was left out for want of budget)."""
        limit = self.left_s() - keep if keep else self.left_s() + 10.0
        res = self.run_one(arm.label, arm.changes, profile=False,
                           timeout_s=min(TIMEOUT_FACTOR * need + TIMEOUT_PAD_S, limit))  # fmt: skip
        if keep and not res.ok and (res.error or "").startswith("stopped after"):
            res.error = f"{res.error}: the rest kept for the winners together (raise --budget)"
        v = res.run.get("items_per_step")
        res.items_override = run_items(arm.changes, int(v) if v else None, ref.items)
        return res

    def _on_top(
        self, out: Outcome, arm: Arm, ref: RunResult, items0: int, winners: list[Arm]
    ) -> None:
        """``arm`` (it lost alone) once more on top of the winning batch, judged against the
        batch winner's run; a gain there makes it a winner. The winners' combined run keeps
        its budget: the run is made only where that still fits after it."""
        base = stacking.batch_winner(winners)
        base_run = _run_of(out, base)
        if base is None or base_run is None:
            return
        top = stacking.on_top(arm, base)
        need = self.forecast_s(ref, top, [(base.slowdown, base_run)])
        joined = [*winners, arm]
        won = 0.0 if stacking.is_together(top, joined) else self._together_need(out, ref, joined)
        keep = max(self._together_need(out, ref, winners), won)
        top.skipped = stacking.over_budget(need, self.left_s(), keep)
        if top.skipped is not None:
            out.arms.append((top, None))
            return
        res = self._run_arm(top, ref, need)
        out.stacked_on[len(out.arms)] = base_run
        out.arms.append((top, res))
        gain = _gain(res, base_run, items0)
        if gain is not None and gain >= threshold(out.row_noise(res, base_run)):
            winners.append(arm)

    def _together_arm(self, winners: list[Arm]) -> Arm:
        return Arm("together", "all winners together", combine(winners),
                   slowdown=max(a.slowdown for a in winners),
                   items_factor=max(a.items_factor for a in winners),
                   extra_s=max(a.extra_s for a in winners),
                   scope="compute_only" if any(a.scope == "compute_only" for a in winners)
                   else "end_to_end")  # fmt: skip

    def _together_need(self, out: Outcome, ref: RunResult, winners: list[Arm]) -> float:
        """What the combined run of the winners so far will take (0 with fewer than two)."""
        if len(winners) < 2:
            return 0.0
        return self.forecast_s(ref, self._together_arm(winners), _batch_seen(out, winners))

    def _together(self, out: Outcome, winners: list[Arm], ref: RunResult, items0: int) -> None:
        fit, left_out = stacking.fitting(
            winners, lambda ws: self._together_need(out, ref, ws), self.left_s()
        )
        if not fit:
            out.together = (winners, None)
            return
        out.left_out = left_out
        fake = self._together_arm(fit)
        same = next((r for a, r in out.arms if a.stacked_on and r is not None and r.ok
                     and a.changes == fake.changes), None)  # fmt: skip
        if same is not None:
            # The batch winner and one arm on top of it: that run is their combined run.
            out.together, out.together_from = (fit, same), same.label
            return
        need = self.forecast_s(ref, fake, _batch_seen(out, fit))
        fake.label = together_label(fit, out.left_out)
        out.together = (fit, self._measure(out, fake, ref, items0, need))

    def _second_control(self, out: Outcome, ref: RunResult, items0: int | None) -> None:
        """Run-to-run noise: the control again at the end, unless a suspect gain had it run
        again already."""
        if ref is out.baseline:
            why = (out.control.error if out.control is not None else None) or "not run"
            out.noise_note = f"within-run only (the control run failed: {why})"
            return
        if out.controls:
            return
        if self.forecast_s(ref, Arm("control", "control again (no change)", {})) > self.left_s():
            out.noise_note = "within-run only (no budget left for a second control run)"
            return
        self._more_controls(out, ref, items0)

    def _more_controls(self, out: Outcome, ref: RunResult, items0: int | None) -> None:
        """The control run again, as the budget allows; a third time when the two disagree by
        more than ``CONTROLS_AGREE_PCT`` (the reference is then their median)."""
        need = self.forecast_s(ref, Arm("control", "control again (no change)", {}))
        rates = [ref.items_per_s(items0)]
        for _ in range(2):
            if need > self.left_s():
                break
            again = self.run_one("control again (no change)", {}, profile=False,
                                 timeout_s=TIMEOUT_FACTOR * need + TIMEOUT_PAD_S)  # fmt: skip
            if not again.ok:
                break
            out.controls.append(again)
            rates.append(again.items_per_s(items0))
            got = [r for r in rates if r]
            spread = noise_pct(got) or 0.0
            out.noise_pct = max(out.noise_pct, spread)
            out.noise_note = f"run to run: {len(got)} control runs"
            if spread <= CONTROLS_AGREE_PCT:
                break


def _run_of(out: Outcome, arm: Arm | None) -> RunResult | None:
    """The run that measured ``arm`` (the last, where it was measured again), if it ran ok."""
    got = [r for a, r in out.arms if a is arm and r is not None and r.ok]
    return got[-1] if got else None


def _batch_seen(out: Outcome, winners: list[Arm]) -> list[tuple[float, RunResult]]:
    """The batch winner's run, as a sweep's point: a combined run with its batch steps at its
    pace (a launch-bound step does not grow with its batch; the blind forecast, ``slowdown``
    times the control's step, kept a 64x batch's combined run out of a 180 s budget)."""
    base = stacking.batch_winner(winners)
    run = _run_of(out, base)
    return [(base.slowdown, run)] if base is not None and run is not None else []


def _reference_rate(out: Outcome, items0: int) -> float | None:
    """Items per second of the unchanged script, as ``Outcome.reference_ms`` takes it."""
    ms = out.reference_ms(items0)
    return items0 / ms * 1000.0 if ms else None


def _gain(res: RunResult, ref: RunResult | float | None, items0: int) -> float | None:
    """``res``'s items per second over the reference's (a run, or its rate)."""
    ips = res.items_per_s(items0) if res.ok else None
    ips0 = ref.items_per_s(items0) if isinstance(ref, RunResult) else ref
    return ips / ips0 if ips and ips0 else None


def _why_stopped(last: RunResult | None) -> str:
    """Why a sweep ran no further point: its last point failed, or gained too little."""
    if last is not None and not last.ok:
        if last.error == OOM:
            return "the point before ran out of memory"
        return f"the point before did not run ({last.error})"
    return "the sweep stopped at its knee (no gain past the point before)"


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _kill(proc: subprocess.Popen[bytes] | Served, grace_s: float = KILL_GRACE_S) -> None:
    """End a re-run and everything it started: SIGINT first, as Ctrl-C would (DataLoader
    workers then remove their ``pymp-*`` folders), ``grace_s`` later SIGTERM, half that later
    SIGKILL (a script that ignores both)."""
    for sig, wait_s in ((signal.SIGINT, grace_s), (signal.SIGTERM, max(0.5, grace_s / 2))):
        _kill_group(proc.pid, sig)
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue
    _kill_group(proc.pid, signal.SIGKILL)
    proc.wait()


def _end_group(pid: int, grace_s: float = 3.0) -> None:
    """What is left of a run's process group: let it exit for ``grace_s``, then SIGKILL."""
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except (ProcessLookupError, PermissionError, OSError):
            return  # nothing left
        time.sleep(0.05)
    _kill_group(pid)


def _kill_group(pid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError, OSError):
        pass
