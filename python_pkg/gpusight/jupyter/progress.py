"""Progress for long commands in a notebook: a ReportWidget that shows the stage and a bar while
work runs.

    with WidgetProgress() as progress:        # displays the widget
        report = diagnose(..., progress=progress)   # progress(stage, fraction) as it goes
    report                                    # the bar is gone; the cell shows the report

On leaving the block (done, error or Ctrl-C) the widget is closed and its output emptied, so the
returned report, displayed as its self-contained MIME bundle, is the only copy in the notebook and
no widget is left that needs a kernel or saved widget state. A caller that returns nothing can
hand the report to the widget instead (``done``), which then stays.

``progress_for_shell()`` picks the widget in a kernel and a silent stand-in elsewhere, so callers
need no branch of their own.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .display import in_kernel
from .widget import ReportWidget, as_report_dict

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
        self._shows_report = False
        #: The output the widget is shown in, emptied on close (IPython's DisplayHandle).
        self._handle: Any = None
        self(first_stage, None)
        if display:
            from IPython.display import display as ipy_display

            self._handle = ipy_display(self.widget, display_id=True)  # type: ignore[no-untyped-call]

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
        """Show the report in the widget and drop the progress bar; the widget then stays.

        For callers that do not return the report; one that does leaves this out, or the cell
        would show the report twice."""
        self.widget.report = as_report_dict(report)
        self.widget.progress = None  # type: ignore[assignment]
        self._shows_report = True

    def close(self) -> None:
        """Drop the progress bar. Without a report handed over (``done``), the widget goes too:
        its output is emptied first (so the frontend swaps the view for nothing, and a saved
        notebook keeps no widget output), then the widget is closed."""
        self.widget.progress = None  # type: ignore[assignment]
        if self._shows_report:
            return
        if self._handle is not None:
            handle, self._handle = self._handle, None
            try:
                handle.update({}, raw=True)
            except Exception:  # the kernel's output may be gone; closing still matters
                pass
        self.widget.close()

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
