"""Gradient accumulation traded for a larger batch: where an optimizer step takes ``k``
batches, the batch ``k`` times larger with the accumulation at 1. An update then holds the same
items, in one batch instead of ``k``: the same optimisation (but for batch-norm statistics), the
learning rate as it was, where the batch knob's rows grow the update with the batch.

The batch grows the way the batch knob grows it (the script's batch argument, else the
DataLoader's ``batch_size``). The accumulation is set where the user sets it: the script's own
option at the run's value (``--grad-accum-steps``, ``--gradient_accumulation_steps``), else the
framework's keyword as its objects are made (``TrainingArguments(gradient_accumulation_steps=k)``,
Lightning's ``accumulate_grad_batches``, Accelerate's ``gradient_accumulation_steps``), patched
as the framework is imported, else the number the loop's own code accumulates over where the
file sets it once (``accum = 8``: ``fixes/accumulation_count.py``), the re-run running a copy of
the file with it at 1.
"""

from __future__ import annotations

import functools
import os
import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..after_import import Callback, after_import
from ..fixes import accumulation_count
from ..script_command import with_value
from .base import Arm, Group, Knob, Situation, Target
from .framework_precision import ACCELERATE, LIGHTNING, _wrap_init, _wrap_post_init

if TYPE_CHECKING:
    from ..report import Fix

KEY = "accumulation"
SWITCHES = {
    "transformers": "gradient_accumulation_steps",
    "lightning": "accumulate_grad_batches",
    "accelerate": "gradient_accumulation_steps",
}
"""The framework's keyword for the batches an optimizer step takes."""


def _setting(facts: dict[str, Any], k: int) -> dict[str, Any] | None:
    """How a re-run sets the accumulation to 1 where it is ``k``: the script's own option at
    that value (``facts["accum_arg"]``), else the number the loop's file sets, else the
    framework's keyword; None: none of them."""
    arg = facts.get("accum_arg") or {}
    if arg.get("value") == k:
        return {"steps": 1, "was": k, "option": arg["option"],
                "aliases": list(arg.get("aliases") or [arg["option"]])}  # fmt: skip
    where = _loop_count(facts, k)
    if where is not None:
        return {"steps": 1, "was": k, **where}
    return {"steps": 1, "was": k} if facts.get("framework") in SWITCHES else None


def _loop_count(facts: dict[str, Any], k: int) -> dict[str, Any] | None:
    """Where the count the step loop of the model's call accumulates over is set to ``k``: in
    that file (or notebook cell), else in a module of its folder that it imports the count
    from (``from config import ACCUM``); its name, line, file and the file as a diff names
    it."""
    from .user_lines import source_text

    site = facts.get("forward_site") or {}
    cell = facts.get("forward_cell") or {}
    path = str(site.get("file") or "")
    text = cell.get("compiled") or (source_text(path) if path else None)
    line = int(cell.get("line") or site.get("line") or 0)
    if not text:
        return None
    shown = str(site.get("shown") or "")
    found = accumulation_count.find(text, line, k)
    if found is not None:
        return {"name": found.name, "line": found.line, "file": path, "shown": shown}
    if cell:
        return None
    hits = []
    for module, level, name in accumulation_count.imported(text, line):
        if not module:
            continue  # ``from . import ACCUM``: a package's own __init__, not looked into
        parts = [*[".."] * max(level - 1, 0), *module.split(".")]
        there = os.path.normpath(os.path.join(os.path.dirname(path), *parts) + ".py")
        got = accumulation_count.set_in(source_text(there) or "", name, k)
        if got is not None:
            rel = os.path.relpath(there, os.path.dirname(path))
            diff_path = os.path.normpath(os.path.join(os.path.dirname(shown), rel))
            hits.append({"name": got.name, "line": got.line, "file": there, "shown": diff_path})
    return hits[0] if len(hits) == 1 else None


def _named(setting: dict[str, Any], facts: dict[str, Any]) -> str:
    """The accumulation at 1, as the user sets it."""
    if setting.get("option"):
        return f"{setting['option']} 1"
    if setting.get("name"):
        return f"{setting['name']} = 1"
    return f"{SWITCHES[str(facts.get('framework'))]}=1"


def _with_count(f: Fix, setting: dict[str, Any]) -> Fix:
    """``f`` whose patch also sets the loop's count to 1: one diff of the file where ``f``
    already changes it (the DataLoader's batch), else a diff of its own beside ``f``'s; ``f``
    without a patch where the file is no longer as the run had it."""
    from ..fixes.diff_apply import PatchError, apply, parse
    from ..fixes.patch import unified_diff
    from ..fixes.patch_files import patchable_path, read_text, text_sha256
    from ..report import PatchFile

    shown = str(setting.get("shown") or "")
    made, patch = list(f.patch_files or []), f.patch or ""
    f.patch, f.patch_files = None, None
    if not patchable_path(shown):
        return f
    try:
        text = read_text(str(setting["file"]))
        start, rest = text, made
        if any(m.path == shown for m in made):
            if len(made) != 1 or made[0].sha256 != text_sha256(text):
                return f
            start, rest, patch = apply(text, parse(patch)[0]), [], ""
    except (OSError, UnicodeDecodeError, PatchError):
        return f
    new = accumulation_count.with_count(start, str(setting["name"]), int(setting["was"]), 1)
    if new is None:
        return f
    f.patch = _joined(patch, unified_diff(text, new, shown))
    f.patch_files = [*rest, PatchFile(shown, text_sha256(text))]
    return f


def _in_cell(f: Fix, arm: Arm, facts: dict[str, Any], setting: dict[str, Any]) -> Fix:
    """``f`` as a change to the notebook cell that calls the model: its count at 1, and the
    DataLoader's batch grown where the same cell builds the loader; ``f``'s text alone where
    another cell does (that cell changed alone, or this one, would change the update)."""
    from ..fixes.cell_patch import CellSource, with_statement_cell_fix
    from ..fixes.patch import set_call_keywords

    cell = CellSource(**facts["forward_cell"])
    loader = facts.get("loader_cell") or {}
    compiled: str | None = cell.compiled
    new = arm.changes.get("batch_size")
    if new:
        same = loader.get("compiled") == cell.compiled and (
            loader.get("execution_count") == cell.execution_count
        )
        if not same:
            return f
        compiled = set_call_keywords(cell.compiled, int(loader["line"]), {"batch_size": repr(new)})
    if compiled is not None:
        changed = accumulation_count.with_count(
            compiled, str(setting["name"]), int(setting["was"]), 1
        )
        with_statement_cell_fix(f, cell, changed)
    return f


def _with_switch(f: Fix, grown: Fix, framework: str, facts: dict[str, Any]) -> Fix:
    """``f`` with the batch grown (``grown``'s patch) and the framework's accumulation at 1 in
    its one setup call (Lightning's ``Trainer(...)``): one diff where that call is in the same
    file, else beside it a diff of the script's file or the model's call's that makes it; ``f``
    as it is where no file does: the batch alone would grow the update."""
    from ..fixes.diff_apply import PatchError, apply, parse
    from ..fixes.framework_calls import setup_patch
    from ..fixes.patch import unified_diff
    from ..fixes.patch_files import read_text, text_sha256, with_patch

    made = grown.patch_files or []
    if grown.patch is None or len(made) != 1:
        return f
    path = made[0].path
    values: dict[str, object] = {SWITCHES[framework]: 1}
    try:
        text = read_text(path)
        if text_sha256(text) != made[0].sha256:
            return f
        bigger = apply(text, parse(grown.patch)[0])
        second = setup_patch(bigger, path, framework, values)
        if second is None:
            return _beside(f, grown, framework, facts)
        both = apply(bigger, parse(second)[0])
    except (OSError, UnicodeDecodeError, PatchError):
        return f
    return with_patch(f, unified_diff(text, both, path), {path: text})


def _beside(f: Fix, grown: Fix, framework: str, facts: dict[str, Any]) -> Fix:
    """``f`` with ``grown``'s diff and a second one that sets the accumulation in the file,
    the script's or the model's call's, that holds the framework's one setup call."""
    from ..report import Fix
    from .user_lines import patched_setup

    second = patched_setup(Fix(text=f.text), facts, {SWITCHES[framework]: 1})
    if second.patch is None or not second.patch_files or grown.patch is None:
        return f
    f.patch = _joined(grown.patch, second.patch)
    f.patch_files = [*(grown.patch_files or []), *second.patch_files]
    return f


def _joined(first: str, second: str) -> str:
    """Two diffs as one patch (of two files)."""
    return (first if not first or first.endswith("\n") else first + "\n") + second


def _set_field(args: Any, name: str, n: int) -> bool:
    """``args`` (the Trainer's arguments) with the field ``name`` at ``n``; False where it was."""
    if int(getattr(args, name, 1) or 1) == n:
        return False
    setattr(args, name, n)
    return True


def _set(kwargs: dict[str, Any], name: str, n: int) -> bool:
    """``kwargs`` with ``name`` at ``n``; False where it was so already (1 is the default)."""
    if int(kwargs.get(name) or 1) == n:
        return False
    kwargs[name] = n
    return True


class Accumulation(Knob):
    name = KEY
    findings = ("load.small_batch", "load.launch_bound")
    keys = (KEY,)
    applied_as = KEY
    unapplied = "the framework's accumulation was not set where the script made its objects"
    order = 31

    def groups(self, s: Situation) -> list[Group]:
        from .batch import Batch, route_arm

        k = int((s.loader or {}).get("batches_per_step") or 1)
        setting = _setting(s.facts, k) if k > 1 else None  # reads the loop's file: only then
        if setting is None:
            return []
        batch = next((g for g in Batch().groups(s) if any(not a.skipped for a in g.arms)), None)
        if batch is None:
            return []
        arm = route_arm(s, k, batch.arms[0].finding_id or "load.small_batch")
        if arm is None:
            return []
        items = int(s.facts.get("items_per_step") or 0)
        grown = arm.label.split(" (")[0]
        label = (
            f"{grown} with {_named(setting, s.facts)} (the same {items} items per update, in "
            f"one batch instead of {k})"
        )
        changes = {**arm.changes, KEY: setting}
        return [Group(KEY, batch.priority, [Arm(KEY, label, changes, arm.finding_id)])]

    def not_planned(self, s: Situation) -> str:
        return (
            "the run's optimizer steps each took one batch, or neither a script option "
            "(--grad-accum-steps), a number the loop's file sets once (accum = 8) nor a "
            "framework (Hugging Face's Trainer, Lightning, Accelerate) set the accumulation"
        )

    def validate(self, changes: dict[str, Any]) -> str | None:
        v = changes.get(KEY)
        if v is None or (isinstance(v, dict) and all(
            isinstance(v.get(x), int) and not isinstance(v.get(x), bool) and v[x] >= 1
            for x in ("steps", "was")
        )):  # fmt: skip
            return None
        return f"{KEY} must be {{'steps': N, 'was': K}}: batches per optimizer step, new and old"

    def row_params(self, changes: dict[str, Any]) -> dict[str, Any]:
        v = changes.get(KEY)
        return {"set_accumulation": int(v["steps"])} if isinstance(v, dict) else {}

    def items(self, changes: dict[str, Any], counted: int | None, base: int | None) -> int | None:
        # The batch knob counts a batch argument's items as the argument grows them (base x k);
        # an optimizer step then takes 1 batch where it took k. A DataLoader's batch is counted
        # as the watch saw the step: nothing to undo.
        v = changes.get(KEY) or {}
        was = int(v.get("was") or 1)
        if changes.get("script_arg") and counted and was > 1:
            return round(counted * int(v.get("steps") or 1) / was)
        return counted

    def script_args(self, args: list[str], changes: dict[str, Any]) -> list[str]:
        v = changes.get(KEY) or {}
        return with_value(args, v, int(v["steps"])) if v.get("option") else args

    def source_edits(self, changes: dict[str, Any]) -> dict[str, str] | str:
        from .user_lines import source_text

        v = changes.get(KEY) or {}
        if not v.get("name"):
            return {}
        path = str(v.get("file"))
        text = source_text(path)
        new = (
            None
            if text is None
            else accumulation_count.with_count(text, v["name"], int(v["was"]), 1)
        )
        return {path: new} if new is not None else f"{path} no longer sets {v['name']} = {v['was']}"

    def took_effect(self, facts: dict[str, Any] | None, changes: dict[str, Any]) -> str | None:
        v = changes.get(KEY) or {}
        if v.get("name"):
            per = ((facts or {}).get("loader") or {}).get("batches_per_step")
            if per is not None and int(per) >= int(v["was"]):
                return (f"{v['name']} = 1 did not reach the loop's accumulation: an optimizer "
                        f"step still took {per} batches")  # fmt: skip
            return None
        if not v.get("option"):
            return super().took_effect(facts, changes)
        seen = (facts or {}).get("accum_arg") or {}
        if seen.get("value") != v["steps"]:
            return f"{v['option']} {v['steps']} did not reach the script's accumulation"
        return None

    def install(self, hooks: Target) -> None:
        v = hooks.changes.get(KEY) or {}
        if v.get("option") or v.get("name"):
            return  # the script's own option, or the loop's own count in the copy, sets it
        n = int(v.get("steps") or 1)
        hit: Callable[[], None] = lambda: hooks.inj.hit(KEY)  # noqa: E731

        def transformers(mod: Any) -> None:
            change = functools.partial(_set_field, name=SWITCHES["transformers"], n=n)
            hooks.inj.on_undo(_wrap_post_init(mod.TrainingArguments, change, hit))

        def wrap(cls_name: str, switch: str) -> Callback:
            def patch(mod: Any) -> None:
                change = functools.partial(_set, name=switch, n=n)
                hooks.inj.on_undo(_wrap_init(getattr(mod, cls_name), change, hit))

            return patch

        callbacks: dict[str, Callback] = {"transformers.training_args": transformers}
        callbacks.update(dict.fromkeys(LIGHTNING.modules, wrap("Trainer", SWITCHES["lightning"])))
        callbacks.update(
            dict.fromkeys(ACCELERATE.modules, wrap("Accelerator", SWITCHES["accelerate"]))
        )
        hooks.inj.on_undo(after_import(callbacks))

    def fix(self, arm: Arm, items: int | None, facts: dict[str, Any]) -> Fix:
        from ..report import Fix
        from .batch import Batch
        from .user_lines import patched_setup

        ch = arm.changes
        setting = ch.get(KEY) or {}
        named, k = _named(setting, facts), int(setting.get("was") or 1)
        arg = ch.get("script_arg") or {}
        new = int(arg.get("value") or ch.get("batch_size") or 0)
        text = (
            f"Grow the batch to {new} and set {named}: an optimizer step then takes one batch "
            f"of {new} where it took {k} of {new // k or 1}, the same items per update (the "
            "learning rate stays as it is)."
        )
        cmd = facts.get("command") or {}
        args = [str(a) for a in cmd.get("args") or []]
        if setting.get("option") and cmd.get("script"):
            # The accumulation is the script's own option: the command that runs it so, with the
            # batch option too, or beside the DataLoader's batch patched where the file sets it.
            argv = with_value(with_value(args, arg, new) if arg else args, setting, 1)
            f = Fix(text=text, code=shlex.join(["python", str(cmd["script"]), *argv]),
                    language="shell")  # fmt: skip
            if not arg:
                grown = Batch().fix(Arm("batch", arm.label, {"batch_size": new}, arm.finding_id),
                                    items, facts)  # fmt: skip
                f.patch, f.patch_files = grown.patch, grown.patch_files
            return f
        if setting.get("name") and facts.get("forward_cell"):
            return _in_cell(Fix(text=text), arm, facts, setting)
        if setting.get("name"):
            return _with_count(self._count_fix(arm, items, facts, text), setting)
        f = Fix(text=text, code=f"{named} beside a batch of {new}", language="text")
        framework = str(facts.get("framework") or "")
        if framework != "transformers":
            grown = Batch().fix(Arm("batch", arm.label, {"batch_size": new}, arm.finding_id),
                                items, facts)  # fmt: skip
            return _with_switch(f, grown, framework, facts) if not arg else f
        values: dict[str, object] = {SWITCHES["transformers"]: 1}
        if not arg:
            values["per_device_train_batch_size"] = new
        return patched_setup(f, facts, values)

    @staticmethod
    def _count_fix(arm: Arm, items: int | None, facts: dict[str, Any], text: str) -> Fix:
        """The batch grown as the arm grew it, before the loop's count is set: the command
        with the script's batch option, else the DataLoader's batch patched where it is set."""
        from ..report import Fix
        from .batch import Batch

        ch = arm.changes
        arg = ch.get("script_arg") or {}
        cmd = facts.get("command") or {}
        named = _named(ch[KEY], facts)
        if arg and cmd.get("script"):
            argv = with_value([str(a) for a in cmd.get("args") or []], arg, int(arg["value"]))
            return Fix(text=text, code=shlex.join(["python", str(cmd["script"]), *argv]),
                       language="shell")  # fmt: skip
        new = int(ch.get("batch_size") or 0)
        grown = Batch().fix(Arm("batch", arm.label, {"batch_size": new}, arm.finding_id),
                            items, facts)  # fmt: skip
        f = Fix(text=text, code=f"{named} beside a batch of {new}", language="text")
        f.patch, f.patch_files = grown.patch, grown.patch_files
        return f
