"""``diagnose``'s loader fixes as a change to the notebook cell that built the user's DataLoader,
as a watched cell's cards are: "Show the cell" and "Apply to that cell" change the call there,
and the inserted code is that cell's statement, changed (never a template naming a ``dataset``
the kernel does not have). Outside a notebook, or where no cell built the loader in use (a
factory, a script), the fix stays the snippet in the caller's names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..fixes.cell_patch import with_cell_fix
from ..watch.notebook_cells import loader_cell
from .findings import loader_changes

if TYPE_CHECKING:
    from ..report import Finding
    from .context import Context
    from .procedures import Outcome


def fix_in_cells(ctx: Context, findings: list[Finding], outcomes: list[Outcome]) -> None:
    if not ctx.dataloader:
        return
    dataset = getattr(ctx.work.loader, "dataset", None)
    try:
        cell = loader_cell(id(dataset))
    except Exception:  # a history this cannot read leaves the snippet as it is
        return
    if cell is None:
        return
    winners = [o for o in outcomes if o.winner is not None]
    for f in findings:
        changes = loader_changes(ctx, [o for o in winners if o.finding_id == f.id])
        if changes:
            with_cell_fix(f.fix, cell, changes)
