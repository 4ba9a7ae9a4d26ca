"""``gpusight run --verify fix.diff script.py args...``: the patch applied to a copy, both
scripts watched, the gain measured.

1. The diff is read, refused when stale (a file it changes is not the one the run that made it
   saw: the ``gpusight-made-from`` lines above it, or the report's ``Fix.patch_files``), and
   applied in memory, strictly; every patched ``.py`` must compile.
2. Each script runs in a scratch copy of the folder the patch is relative to (``sandbox.py``):
   the original in a plain copy, the patched script in one holding the patched files, so the
   script's local imports and relative data paths work as they do at home, and what either run
   writes lands in its copy. The user's files are never written.
3. The original and the patched script are each run as ``--what-if`` runs them (a
   ``gpusight run`` process, the same steps and warm-up, unprofiled), and compared in items
   per second, with ``gpusight diff``'s comparison beside it and, when the report the patch came
   from is given, the gain its what-if predicted. Both are forked from one process that imported
   the script's libraries once (``warm_start.py``), or both start fresh where the patch changes
   what may be imported ahead: two runs compared start alike.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..fixes.diff_apply import PatchError, apply, parse
from ..fixes.patch_files import inside, made_from, read_text, stale
from . import sandbox
from .driver import ScriptRunner
from .outcome import RunResult
from .overlay import unguarded


class VerifyError(Exception):
    """The patch cannot be verified here; the message says why and what to do."""


@dataclass
class Prepared:
    files: dict[str, str]
    """Path (relative to the root) -> the patched text."""
    checked: bool
    """Whether the files were checked against hashes recorded when the patch was made."""
    finding: dict[str, Any] | None = None
    """The report's finding whose fix is this patch, when a report was given."""


@dataclass
class Verified:
    before: RunResult
    after: RunResult
    prepared: Prepared
    notes: list[str] = field(default_factory=list)

    @property
    def gain(self) -> float | None:
        """After over before in items per second (steps per second where items are unknown)."""
        b, a = self.before.items_per_s(1), self.after.items_per_s(1)
        return a / b if a and b else None

    @property
    def noise_pct(self) -> float:
        return max(self.before.noise_pct(), self.after.noise_pct())


def _diff_body(text: str) -> str:
    """The diff without the lines above its first ``---`` (gpusight's header)."""
    lines = text.splitlines(keepends=True)
    at = next((i for i, ln in enumerate(lines) if ln.startswith("--- ")), len(lines))
    return "".join(lines[at:])


def finding_of(report: Mapping[str, Any], diff_text: str) -> dict[str, Any] | None:
    """The report's finding whose fix is this diff (header lines aside)."""
    body = _diff_body(diff_text)
    for f in report.get("findings") or []:
        if (f.get("fix") or {}).get("patch") == body:
            return dict(f)
    return None


def prepare(diff_text: str, root: str, report: Mapping[str, Any] | None = None) -> Prepared:
    """The patched texts of the files ``diff_text`` changes below ``root``, or VerifyError."""
    try:
        diffs = parse(diff_text)
    except PatchError as exc:
        raise VerifyError(f"not a patch gpusight can apply: {exc}") from exc
    recorded = made_from(diff_text)
    finding = finding_of(report, diff_text) if report is not None else None
    for pf in ((finding or {}).get("fix") or {}).get("patch_files") or []:
        recorded.setdefault(str(pf["path"]), str(pf["sha256"]))
    problems = stale(recorded, root)
    if problems:
        raise VerifyError(
            "the patch is stale: "
            + "; ".join(problems)
            + ". Its lines may have moved or changed meaning: make a fresh one from the file as "
            "it is now (gpusight run --patch FILE script.py ...)"
        )
    out: dict[str, str] = {}
    for d in diffs:
        try:
            text = out.get(d.path) or read_text(inside(root, d.path))
        except FileNotFoundError:
            raise VerifyError(
                f"{d.path}: no such file here; run --verify from the directory the patch was "
                "made in (its paths are relative to it)"
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise VerifyError(f"{d.path}: cannot be read ({exc})") from exc
        try:
            new = apply(text, d)
        except PatchError as exc:
            raise VerifyError(f"the patch does not apply: {exc}") from exc
        if d.path.endswith(".py"):
            try:
                compile(new, d.path, "exec")
            except (SyntaxError, ValueError) as exc:
                raise VerifyError(f"{d.path} would not compile once patched: {exc}") from exc
        out[d.path] = new
    return Prepared(out, checked=bool(recorded), finding=finding)


def verify(
    diff_text: str,
    script: str,
    script_args: list[str],
    *,
    report: Mapping[str, Any] | None = None,
    steps: int,
    warmup: int,
    timeout_s: float,
    env: dict[str, str],
    progress: Callable[[str], None],
    allow_linked: bool = False,
) -> Verified:
    """Apply, run both, compare; VerifyError for a patch or a run that cannot be compared
    (or that could change the user's files: ``overlay.unguarded``, unless ``allow_linked``)."""
    root = os.getcwd()
    script_rel = os.path.relpath(os.path.abspath(script), root)
    if script_rel.startswith("..") or os.path.isabs(script_rel):
        raise VerifyError(
            f"{script} lies outside this directory: run --verify from the directory the patch "
            "was made in, with the script below it"
        )
    script_rel = script_rel.replace(os.sep, "/")
    prepared = prepare(diff_text, root, report)
    boxes = [sandbox.make(root, prefix="gpusight-verify-")]
    runners: list[ScriptRunner] = []
    said = None
    try:
        boxes.append(sandbox.make(root, prepared.files, prefix="gpusight-verify-"))
        results: list[RunResult] = []
        for box in boxes:
            run_env = {**env, "PYTHONDONTWRITEBYTECODE": "1"}
            runner = ScriptRunner(script, script_args, steps=steps, warmup=warmup, env=run_env,
                                  sandbox=box, warm=not runners,
                                  warm_from=runners[0].warm if runners else None)  # fmt: skip
            runners.append(runner)
            if not allow_linked and (why := unguarded(box, runner.overlay)) is not None:
                raise VerifyError(why)
        said = _start_alike(runners[0], runners[1], progress)
        for label, runner in zip(("original", "patched"), runners, strict=True):
            progress(f"verify: running the {label} script ...")
            res = runner(label, {}, False, timeout_s)
            if not res.ok:
                raise VerifyError(f"the {label} script did not run to its measured steps: "
                                  f"{res.error}")  # fmt: skip
            progress(f"verify: {label}: {res.step_ms:.2f} ms/step, {res.items or '?'} items")
            results.append(res)
    finally:
        for r in runners:
            r.close()
        for box in boxes:
            box.remove()
        for r in runners:
            shutil.rmtree(r.tmp, ignore_errors=True)
    out = Verified(results[0], results[1], prepared)
    if said:
        out.notes.append(said)
    if not prepared.checked:
        out.notes.append(
            "the patch carries no record of the files it was made from (no gpusight-made-from "
            "lines, no --report): it was checked by its own lines only"
        )
    return out


def _start_alike(first: ScriptRunner, second: ScriptRunner,
                 progress: Callable[[str], None]) -> str | None:  # fmt: skip
    """Both runs forked from the first runner's warm start, or neither; how they started."""
    warm = first.warm
    if warm is None:
        return first.warm_note()
    progress("verify: importing the script's libraries once ...")
    both = warm.ready() and warm.takes(second.python, second.cwd or "", second.env or {},
                                       second.script)  # fmt: skip
    if both:
        return f"both runs started from one process that had imported {warm.imported()}"
    if warm.why is None:
        warm.why = "the patch changes what the script imports ahead of its first line"
        warm.close()
    second.warm = None
    return first.warm_note()
