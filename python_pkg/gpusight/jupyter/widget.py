"""The report widget: the same ``<gs-report>`` as the sidebar and the HTML export, in a notebook.

It carries live progress (``progress.WidgetProgress``, used by the magics) and ``show(report)``
displays one. A ``Report`` shown as a cell's result is not a widget but a self-contained MIME
bundle (``display.report_mimebundle``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import ipywidgets
from traitlets import Dict, Unicode

from .._version import __version__
from .display import in_kernel as in_kernel  # also imported from here (magics, tests)

if TYPE_CHECKING:
    from ..report import Report

#: The npm package that holds the model and view (src/widget/), and its version range.
MODULE_NAME = "gpusight"
MODULE_VERSION = f"^{__version__}"

WIDGET_MIMETYPE = "application/vnd.jupyter.widget-view+json"


def as_report_dict(report: Report | dict[str, Any] | str | Path) -> dict[str, Any]:
    """A report as the plain dict the widget syncs: a Report, a dict, or a path / JSON text.

    A path or JSON text is read and validated (``load_report``), so a bad file fails here with a
    ``ReportValidationError`` naming the field. A dict is passed on as it is: the frontend
    validates every report before drawing it and shows a malformed one as an error naming the field.
    """
    from ..report import Report, load_report

    if isinstance(report, Report):
        return report.to_dict()
    if isinstance(report, dict):
        return report
    return load_report(report)


class ReportWidget(ipywidgets.DOMWidget):  # type: ignore[misc]
    """Shows a gpusight report; while ``progress`` is set, a progress bar above it."""

    _model_name = Unicode("ReportModel").tag(sync=True)
    _model_module = Unicode(MODULE_NAME).tag(sync=True)
    _model_module_version = Unicode(MODULE_VERSION).tag(sync=True)
    _view_name = Unicode("ReportView").tag(sync=True)
    _view_module = Unicode(MODULE_NAME).tag(sync=True)
    _view_module_version = Unicode(MODULE_VERSION).tag(sync=True)

    #: The report as JSON; ``{}`` until there is one.
    report = Dict().tag(sync=True)
    #: ``{"stage": str, "fraction": float | None}`` while work is running, else None.
    progress = Dict(allow_none=True, default_value=None).tag(sync=True)

    def __init__(
        self, report: Report | dict[str, Any] | str | Path | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        if report is not None:
            self.report = as_report_dict(report)

    def __repr__(self) -> str:
        title = self.report.get("title") or self.report.get("kind") or "no report yet"
        return f"ReportWidget({title})"


def show(report: Report | dict[str, Any] | str | Path) -> None:
    """Display a report (``show(load_report("run.json"))``, a Report or a path).

    In a kernel it is shown as the report's display data (the extension's renderer, with the
    self-contained HTML fallback), not as a widget: the output then survives saving, reopening
    without a kernel and nbconvert. ``ReportWidget`` stays for live progress. Outside a kernel
    (terminal IPython, a script) the report is printed as text instead.
    """
    data = as_report_dict(report)
    if in_kernel():
        from IPython.display import display

        from .display import report_mimebundle

        display(report_mimebundle(data), raw=True)  # type: ignore[no-untyped-call]
        return
    from ..text_report import render

    print(render(data))
