"""The report widget: the same ``<gs-report>`` as the sidebar and the HTML export, in a notebook.

``show(report)`` displays one; ``Report`` objects display as one on their own in a kernel whose
frontend has ipywidgets (see ``widget_mimebundle``), and as text everywhere else.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import ipywidgets
from traitlets import Dict, Unicode

from .._version import __version__

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


def in_kernel() -> bool:
    """Whether we run in a Jupyter kernel, where a frontend may render widgets.

    A terminal IPython or a plain script has no frontend to draw a widget: there the report shows
    as text instead.
    """
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def widget_mimebundle(report: Report | dict[str, Any]) -> dict[str, Any] | None:
    """The widget's display data for ``Report._repr_mimebundle_``, or None outside a kernel.

    Only the widget mimetype is returned: IPython adds the report's text (``_repr_pretty_``) and
    JSON beside it, which frontends without ipywidgets (nbconvert, GitHub) show instead.
    """
    if not in_kernel():
        return None
    try:
        widget = ReportWidget(report)
    except Exception:  # a display hook must never break showing the result
        return None
    bundle = widget._repr_mimebundle_()
    if not isinstance(bundle, dict) or WIDGET_MIMETYPE not in bundle:
        return None
    return {WIDGET_MIMETYPE: bundle[WIDGET_MIMETYPE]}


def show(report: Report | dict[str, Any] | str | Path) -> None:
    """Display a report as the widget (``show(load_report("run.json"))``, a Report or a path).

    Outside a kernel (terminal IPython, a script) the report is printed as text instead.
    """
    data = as_report_dict(report)
    if in_kernel():
        from IPython.display import display

        display(ReportWidget(data))  # type: ignore[no-untyped-call]
        return
    from ..text_report import render

    print(render(data))
