"""Progress for long commands in a notebook: a ReportWidget that shows the stage and a bar while
work runs, then turns into the report.

    with WidgetProgress() as progress:        # displays the widget
        report = diagnose(..., progress=progress)   # progress(stage, fraction) as it goes
        progress.done(report)                 # the bar gives way to the report

``progress_for_shell()`` picks the widget in a kernel and a silent stand-in elsewhere, so callers
need no branch of their own.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .widget import ReportWidget, as_report_dict, in_kernel

if TYPE_CHECKING:
    from ..report import Report

#: Send at most this often (s) while the stage stays the same: each update is a comm message.
MIN_INTERVAL_S = 0.1


class WidgetProgress:
    """``progress(stage, fraction)`` callable that drives a displayed ReportWidget."""

    def __init__(self, *, display: bool = True, first_stage: str = "Starting") -> None:
        self.widget = ReportWidget()
        self._stage = ""
        self._fraction: float | None = None
        self._sent_at = 0.0
        self(first_stage, None)
        if display:
            from IPython.display import display as ipy_display

            ipy_display(self.widget)  # type: ignore[no-untyped-call]

    def __call__(self, stage: str, fraction: float | None = None) -> None:
        """Report the stage and how far the whole run is (0-1, or None when unknown)."""
        if fraction is not None:
            fraction = min(1.0, max(0.0, float(fraction)))
        now = time.monotonic()
        changed_stage = stage != self._stage
        moved = (
            fraction is not None
            and (self._fraction is None or abs(fraction - self._fraction) >= 0.01)
            and now - self._sent_at >= MIN_INTERVAL_S
        )
        if not (changed_stage or moved or fraction == 1.0):
            return
        self._stage, self._fraction, self._sent_at = stage, fraction, now
        self.widget.progress = {"stage": stage, "fraction": fraction}

    def done(self, report: Report | dict[str, Any] | str | Path) -> None:
        """Show the report and drop the progress bar."""
        self.widget.report = as_report_dict(report)
        self.widget.progress = None  # type: ignore[assignment]

    def close(self) -> None:
        """Drop the progress bar, leaving any report shown."""
        self.widget.progress = None  # type: ignore[assignment]

    def __enter__(self) -> WidgetProgress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # On error or Ctrl-C the bar must not spin forever: the traceback says what happened.
        self.close()


class NoProgress:
    """The same interface where no widget can be shown (terminal IPython, scripts)."""

    def __call__(self, stage: str, fraction: float | None = None) -> None:
        pass

    def done(self, report: Report | dict[str, Any] | str | Path) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> NoProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def progress_for_shell(first_stage: str = "Starting") -> WidgetProgress | NoProgress:
    """A displayed WidgetProgress in a Jupyter kernel, a NoProgress anywhere else."""
    if not in_kernel():
        return NoProgress()
    try:
        return WidgetProgress(first_stage=first_stage)
    except Exception:  # progress is a nicety: never fail the command over it
        return NoProgress()
