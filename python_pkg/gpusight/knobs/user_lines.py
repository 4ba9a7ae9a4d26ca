"""Where a measured change meets the user's own lines: the DataLoader call, the line that calls
the model, a file's ``import torch``, a notebook cell. The knobs' fixes patch them here."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..fixes.cell_patch import CellSource, with_cell_fix, with_statement_cell_fix
from ..fixes.patch import loader_patch
from ..fixes.patch_files import read_text, with_patch
from ..rules.workload import CodeSource

if TYPE_CHECKING:
    from ..report import Fix
    from .base import Arm

_LOADER_ARGS = ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor", "batch_size")


def site_text(site: dict[str, Any]) -> str | None:
    try:
        return read_text(str(site["file"]))
    except (OSError, UnicodeDecodeError, KeyError):
        return None


def source_text(path: str) -> str | None:
    """The file's text; a notebook cell's (no file on disk) as the kernel compiled it."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError):
        import linecache

        return "".join(linecache.getlines(path)) or None


def forward_source(facts: dict[str, Any]) -> CodeSource | None:
    """The line that calls the model, as the rules' fixes take it: its notebook cell, else its
    file's text (a cell's own file is not on disk: its text is then empty)."""
    site = facts.get("forward_site") or {}
    cell = facts.get("forward_cell")
    text = site_text(site) if site.get("file") else None
    if text is None and not cell:
        return None
    return CodeSource(str(site.get("shown") or ""), text or "", int(site.get("line") or 0),
                      CellSource(**cell) if cell else None)  # fmt: skip


def patched_loader(f: Fix, arm: Arm, facts: dict[str, Any]) -> Fix:
    """The DataLoader call's arguments changed as the arm ran them: in its notebook cell, else
    in its file."""
    site = facts.get("loader_site") or {}
    values = {k: v for k, v in arm.changes.items() if k in _LOADER_ARGS}
    cell = facts.get("loader_cell")
    if values and cell and with_cell_fix(f, CellSource(**cell), values):
        return f  # a notebook's loader: its cell changed, and the statement to run
    if not values:
        return f
    return _in_loader_file(
        f, site, lambda text, line, shown: loader_patch(text, line, shown, values)
    )


def patched_batch_source(f: Fix, facts: dict[str, Any], new: int) -> Fix:
    """The batch set to ``new`` where the file sets the name its DataLoader call reads for it
    (``fixes/batch_source.py``): ``DataModule(batch_size=16)``, ``BATCH_SIZE = 16``;
    unchanged in a notebook, or where the call reads no such name."""
    from ..fixes.batch_source import batch_source_patch

    if facts.get("loader_cell"):
        return f
    site = facts.get("loader_site") or {}
    return _in_loader_file(
        f, site, lambda text, line, shown: batch_source_patch(text, line, shown, new)
    )


def _in_loader_file(
    f: Fix, site: dict[str, Any], make: Callable[[str, int, str], str | None]
) -> Fix:
    """``f`` with the patch ``make(text, line, shown)`` makes of the DataLoader call's file."""
    text = site_text(site) if site.get("file") else None
    if text is None:
        return f
    shown = str(site["shown"])
    return with_patch(f, make(text, int(site["line"]), shown), {shown: text})


def patched_statement(
    f: Fix,
    facts: dict[str, Any],
    cell_text: Any,
    file_patch: Any,
    sites: list[dict[str, Any] | None],
) -> Fix:
    """A statement-level change: in the notebook cell that calls the model (``cell_text(src)``
    gives the cell's new text), else in the first of ``sites``' files where ``file_patch(text,
    line, shown)`` makes a diff."""
    cell = facts.get("forward_cell")
    if cell:
        src = CellSource(**cell)
        if with_statement_cell_fix(f, src, cell_text(src)):
            return f
    for site in (s for s in sites if s and s.get("file")):
        text = site_text(site)
        if text is None:
            continue
        shown = str(site["shown"])
        patch = file_patch(text, int(site["line"]), shown)
        if patch:
            return with_patch(f, patch, {shown: text})
    return f


def patched_setup(f: Fix, facts: dict[str, Any], values: dict[str, object]) -> Fix:
    """The fix as the user's call that sets up the framework the run trained through
    (``facts["framework"]``) with ``values`` set: in the script's file, else the file that
    calls the model; unchanged where neither holds exactly one such call."""
    from ..fixes.framework_calls import setup_patch

    framework = str(facts.get("framework") or "")
    script = (facts.get("command") or {}).get("script")
    sites = [{"file": script, "shown": script}] if script else []
    sites.append(facts.get("forward_site") or {})
    for site in sites:
        text = site_text(site) if site.get("file") else None
        if text is None:
            continue
        shown = str(site.get("shown") or site["file"])
        patch = setup_patch(text, shown, framework, values)
        if patch is not None:
            return with_patch(f, patch, {shown: text})
    return f
