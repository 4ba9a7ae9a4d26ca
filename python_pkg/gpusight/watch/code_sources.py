"""The user's code behind a watched run's evidence, for its fixes: the DataLoader call, the line
that called the model, the optimizer's constructor and the lines of syncs and copies, each with
the text of its file or notebook cell."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..fixes.cell_patch import CellSource
from ..rules.workload import CodeSource, LoaderSource, OptimizerInfo
from .call_sites import CallSite, in_library
from .notebook_cells import cell_at, loader_cell, torch_alias
from .source_lines import Site

if TYPE_CHECKING:
    from .watched_run import WatchedRun


def loader_source(w: WatchedRun, ld: Any) -> LoaderSource | None:
    """The user's DataLoader call behind the loader that fed the steps, with its file's text
    (and its notebook cell, in a notebook: also one built in an earlier cell, before the watch)."""
    if ld is None:
        return None
    site = w.collected.loader_sites.get(ld.dataset_id)
    if site is None:
        cell = _quietly(lambda: loader_cell(ld.dataset_id))
        return None if cell is None else LoaderSource(cell.label, cell.compiled, cell.line, cell)
    text = site.source()
    if not text:
        return None
    cell = _quietly(lambda: cell_at(site.filename, site.line, site.offset))
    return LoaderSource(site.shown, text, site.line, cell)


def _quietly(find: Callable[[], CellSource | None]) -> CellSource | None:
    """A notebook cell is a nicety of the fix: a shell that answers oddly is never an error."""
    try:
        return find()
    except Exception:
        return None


def forward_site(w: WatchedRun) -> CallSite | None:
    """The user's line that called the main model most often (the most parameters, then the
    most calls: the model the placement findings speak of)."""
    key = _main_key(w)
    counts = w.collected.forward_sites.get(key) if key is not None else None
    return counts.top() if counts is not None else None


def _main_key(w: WatchedRun) -> int | None:
    mods = [(key, m) for key, m in w.collected.modules.items() if m.calls > 0]
    if not mods:
        return None
    return max(mods, key=lambda km: (km[1].n_params, km[1].calls))[0]


def model_calls(
    w: WatchedRun,
) -> tuple[frozenset[tuple[str, int]], frozenset[tuple[str, int]]]:
    """The user's lines seen calling an outermost module, as (file name, line): those of the
    other modules (a GAN's other half, a teacher: the step's computation), and the main
    model's (its own call, and any other, such as a validation batch every step)."""
    main = _main_key(w)
    others: set[tuple[str, int]] = set()
    mains: set[tuple[str, int]] = set()
    for key, counts in w.collected.forward_sites.items():
        into = mains if key == main else others
        into.update(
            (os.path.basename(site.filename), site.line) for site, _n in counts.seen.values()
        )
    return frozenset(others), frozenset(mains)


def forward_source(w: WatchedRun) -> CodeSource | None:
    return site_source(forward_site(w))


def call_source(w: WatchedRun, key: int) -> CodeSource | None:
    """The user's line that called the outermost module ``key`` most often, with its text."""
    counts = w.collected.forward_sites.get(key)
    return site_source(counts.top() if counts is not None else None)


def site_source(site: CallSite | None) -> CodeSource | None:
    """The user's file (or notebook cell) around a line the watch saw called, for a patch."""
    text = site.source() if site is not None else None
    if site is None or not text:
        return None
    cell = _cell(site.filename, site.line, site.offset)
    return CodeSource(site.shown, text, site.line, cell, site.col)


def _cell(filename: str, line: int, offset: int) -> CellSource | None:
    """The notebook cell compiled as ``filename``, with the kernel's name for torch; None
    outside a notebook or for a file."""
    cell = _quietly(lambda: cell_at(filename, line, offset))
    if cell is not None:
        cell.torch_alias = torch_alias()
    return cell


def _sync_source(site: Site | None, texts: dict[str, str | None]) -> CodeSource | None:
    """The user's file around a sync's line, when it is a file of theirs (not a library's)."""
    if site is None or site.origin is None:
        return None
    filename, line = site.origin
    if in_library(filename):
        return None
    # A notebook cell (the kernel's compiled name for it): its change goes into that cell.
    cell = _cell(filename, line, max(0, site.line - line))
    if cell is not None:
        return CodeSource(site.file, cell.compiled, line, cell)
    if filename.startswith("<"):
        return None
    if filename not in texts:
        texts[filename] = CallSite(filename, site.file, line).source()
    text = texts[filename]
    return CodeSource(site.file, text, line) if text else None


def optimizer_info(w: WatchedRun) -> OptimizerInfo | None:
    """The optimizer over the most parameter tensors, with the user's line that built it."""
    seen = max(w.collected.optimizers.values(), key=lambda o: o.tensors, default=None)
    if seen is None:
        return None
    source = site_source(seen.site)
    return OptimizerInfo(
        seen.name,
        seen.tensors,
        seen.foreach,
        seen.fused,
        seen.cuda,
        source,
        params=seen.params,
        cpu_params=seen.cpu_params,
    )
