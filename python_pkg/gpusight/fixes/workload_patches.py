"""The workload findings' fixes as changes to the user's own lines: the DataLoader call, the
model's call, the line that syncs, where a copied tensor was made; a notebook cell's own text."""

from __future__ import annotations

import ast
from collections.abc import Callable

from ..report import Fix
from ..rules.workload_evidence import CodeSource, CopySite, LoaderSource, SyncSite, WorkloadEvidence
from ..script_command import batch_command_fix
from .batch_knob import batch_knob_text
from .cell_patch import with_cell_fix, with_statement_cell_fix
from .patch import call_patch, find_call, loader_patch, unified_diff
from .patch_files import with_patch
from .placement import to_device_text
from .split_placement import move_text
from .statement_patches import autocast_text, log_every_text
from .where_made import channels_last_text, compile_text, pin_source_text


def statement_fix(
    f: Fix, src: CodeSource | None, change: Callable[[str, int, str | None], str | None]
) -> Fix:
    """The fix with one statement of the user's changed (``change(code, line, torch_alias)``:
    the code with it changed, or None): in the notebook cell that ran it, else in their file."""
    if src is None:
        return f
    cell = src.cell
    if cell is not None:
        if with_statement_cell_fix(f, cell, change(cell.compiled, cell.line, cell.torch_alias)):
            return f
    new = change(src.text, src.line, None)
    with_patch(f, None if new is None else unified_diff(src.text, new, src.path),
               {src.path: src.text})  # fmt: skip
    return f


def autocast_fix(f: Fix, src: CodeSource | None) -> Fix:
    """The fix with the user's forward statement run under bf16 autocast, where it is known."""
    return statement_fix(
        f, src, lambda code, line, alias: autocast_text(code, line, torch_alias=alias)
    )


def sync_fix(f: Fix, site: SyncSite, every: int) -> Fix:
    """The fix with the user's logging line read every ``every`` steps, where that is a safe
    change of it (a print/log call in a counted loop); otherwise the snippet alone."""
    return statement_fix(
        f, site.source, lambda code, line, _alias: log_every_text(code, line, every)
    )


def channels_last_fix(f: Fix, src: CodeSource | None, inputs: bool) -> Fix:
    """The fix with the user's model made channels_last where it is made, and (``inputs``: the
    watch saw the model's input in NCHW, so it is 4-d) its input on the line that calls it."""
    return statement_fix(
        f, src, lambda code, line, alias: channels_last_text(code, line, alias, inputs)
    )


def compile_fix(f: Fix, src: CodeSource | None, mode: str) -> Fix:
    """The fix with the user's model compiled in place where it is made (``model.compile()``)."""
    return statement_fix(f, src, lambda code, line, _alias: compile_text(code, line, mode))


def to_device_fix(f: Fix, src: CodeSource | None, device: str = "cuda") -> Fix:
    """The fix with the user's model moved to ``device`` where it is made, and the batch it is
    called on moved in its loop, where both are known (fixes/placement.py)."""
    return statement_fix(f, src, lambda code, line, _alias: to_device_text(code, line, device))


def pin_source_fix(f: Fix, sites: list[CopySite]) -> Fix:
    """The fix with the host tensors that the loop copies pinned where they are made, where it
    is not the DataLoader's change (the copies read a tensor the script holds itself): all the
    finding's copy lines in the first one's file."""
    first = next((c.source for c in sites if c.source is not None), None)
    if f.patch is not None or first is None:
        return f
    same = [c.source for c in sites if c.source is not None and c.source.text == first.text]
    lines = [s.line for s in same if s.path == first.path]
    return statement_fix(f, first, lambda code, _line, alias: pin_source_text(code, lines, alias))


def loader_values_fix(f: Fix, src: LoaderSource | None, values: dict[str, object]) -> Fix:
    """The fix with the user's DataLoader call changed, where the call is known: in a notebook,
    the cell changed, and code that rebuilds the loader with the user's own call."""
    if src is None:
        return f
    if src.cell is None or not with_cell_fix(f, src.cell, values):
        with_patch(f, loader_patch(src.text, src.line, src.path, values), {src.path: src.text})
    return f


def loader_batch_fix(f: Fix, ev: WorkloadEvidence, batch: int, suggested: int) -> Fix:
    """A larger batch as a change to the user's DataLoader call, where that loader made the
    batch the model saw (its ``batch_size`` is that batch: not a batch sampler's)."""
    if ev.loader is None or ev.loader.batch_size != batch:
        return f
    return loader_values_fix(f, ev.loader_source, {"batch_size": suggested})


def command_batch_fix(f: Fix, ev: WorkloadEvidence, batch: int, suggested: int) -> Fix:
    """A larger batch as the command that passes the script's own batch option, where the run
    was given one whose value is the batch the model saw (``gpusight run``), and no number
    written in the DataLoader call sets that batch instead."""
    if _loader_sets_literal(ev.loader_source):
        return f
    training = ev.step_mode != "forward"
    return batch_command_fix(ev.batch_command, batch, suggested, training) or f


def _loader_sets_literal(src: LoaderSource | None) -> bool:
    if src is None:
        return False
    try:
        call = find_call(ast.parse(src.text), src.line)
    except (SyntaxError, ValueError):
        return False
    kw = next((k for k in call.keywords if k.arg == "batch_size"), None) if call else None
    return kw is not None and isinstance(kw.value, ast.Constant)


def knob_batch_fix(f: Fix, src: CodeSource | None, suggested: int) -> Fix:
    """A larger batch as a change to the knob that sets the width of a batch the script cuts
    by hand or makes with a torch factory (fixes/batch_knob.py), where no DataLoader's change
    made the patch."""
    if f.patch is not None:
        return f
    return statement_fix(
        f, src, lambda code, line, alias: batch_knob_text(code, line, suggested, alias)
    )


def loader_pin_fix(f: Fix, ev: WorkloadEvidence) -> Fix:
    """Pinned batches as a change to the user's DataLoader call, where the script has one that
    does not pin (its batches are what a loop copies to the GPU; a tensor the script holds
    itself is pinned where it is made, which the generic snippet says)."""
    if ev.loader is None or ev.loader.pin_memory or not ev.cuda_available:
        return f
    return loader_values_fix(f, ev.loader_source, {"pin_memory": True})


OPTIMIZER_CALLS = ("Adam", "AdamW", "SGD")


def optimizer_fused_fix(f: Fix, src: CodeSource | None, foreach: bool | None) -> Fix:
    """``fused=True`` in the user's optimizer call (a ``foreach=True`` there would conflict:
    it goes back to the default)."""
    if src is None:
        return f
    values: dict[str, object] = {"fused": True}
    if foreach:
        values["foreach"] = None
    return with_patch(
        f, call_patch(src.text, src.line, src.path, values, OPTIMIZER_CALLS), {src.path: src.text}
    )


def move_modules_fix(
    f: Fix, src: CodeSource | None, lines: list[tuple[int, int | None]], device: str
) -> Fix:
    """The fix with the modules the file calls at ``lines`` moved to ``device`` where they are
    made, the copies that feed them removed and what meets their output moved with it
    (fixes/split_placement.py); a file's patch only (not yet a notebook cell's)."""
    if src is None or src.cell is not None or not lines:
        return f
    new = move_text(src.text, lines, device)
    with_patch(f, None if new is None else unified_diff(src.text, new, src.path),
               {src.path: src.text})  # fmt: skip
    return f
