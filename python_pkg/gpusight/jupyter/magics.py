"""IPython magics: ``%gpusight`` (environment + ceilings) and ``%%gpusight`` (watch a cell)."""

from __future__ import annotations

from typing import Any

from IPython.core.magic import Magics, line_cell_magic, magics_class


@magics_class
class GpusightMagics(Magics):  # type: ignore[misc]
    @line_cell_magic  # type: ignore[untyped-decorator]
    def gpusight(self, line: str, cell: str | None = None) -> Any:
        """``%gpusight [check|bench|...]`` or ``%%gpusight [--steps N]`` over a training cell."""
        # The cell's own error shows the cell's lines, not gpusight's (IPython hides frames
        # that set this).
        __tracebackhide__ = True
        if cell is None:
            from .line_magic import run_line

            return run_line(line, self.shell)
        from .cell_magic import run_cell

        return run_cell(line, cell, self.shell)


def register(ipython: Any) -> None:
    ipython.register_magics(GpusightMagics)


def unregister(ipython: Any) -> None:
    # IPython has no public way to remove magics; dropping ours from the table is enough.
    for kind in ("line", "cell"):
        ipython.magics_manager.magics[kind].pop("gpusight", None)
