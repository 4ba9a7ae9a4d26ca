"""A report as a notebook output: one self-contained MIME bundle (``Report._repr_mimebundle_``).

- ``application/vnd.gpusight.report+json``: the report itself. JupyterLab with the gpusight
  extension draws it with ``<gs-report>`` (src/mime/), also in a saved notebook reopened without
  a kernel: the output holds everything it needs.
- ``text/html``: the standalone fallback (``html_export.notebook_html``) for frontends that do
  not know the type above: nbconvert, VS Code, Colab.
- ``text/plain``: one line, for consoles.

No ipywidgets view: a widget output draws nothing without a live kernel or saved widget state,
and where nbclient saved that state nbconvert prefers the widget (which needs the widgets CDN
and an npm module) over the HTML. The widget is kept for live progress only (``progress.py``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any

from ..report import RENDERERS

if TYPE_CHECKING:
    from ..report import Report

#: The report's own MIME type; src/mime/renderer.ts registers the same.
REPORT_MIMETYPE = "application/vnd.gpusight.report+json"


def in_kernel() -> bool:
    """Whether we run in a Jupyter kernel, where a frontend may render rich output.

    A terminal IPython or a plain script has no such frontend: there the report shows as text.
    """
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def plain_text(report: Mapping[str, Any]) -> str:
    """The one line a console shows: title, time, verdict, and how many findings."""
    from ..html_export import fallback_text

    findings = report.get("findings") or []
    count = f" [{len(findings)} finding{'s' if len(findings) != 1 else ''}]" if findings else ""
    return f"gpusight report: {fallback_text(report)}{count}"


def report_mimebundle(
    report: Report | Mapping[str, Any],
    include: Collection[str] | None = None,
    exclude: Collection[str] | None = None,
) -> dict[str, Any]:
    """The report's display data. ``include`` / ``exclude`` (IPython's) skip the types not wanted,
    so that nothing builds the ~100 KB HTML fallback for a frontend that asked for text alone.

    The report is not validated here: a display hook must show something, and every renderer
    (the extension, the HTML fallback) validates before drawing and names a malformed field.
    """
    from ..html_export import HtmlExportError, notebook_html
    from ..report import Report

    data = report.to_dict() if isinstance(report, Report) else dict(report)

    def wanted(mimetype: str) -> bool:
        return (not include or mimetype in include) and not (exclude and mimetype in exclude)

    bundle: dict[str, Any] = {}
    if wanted(REPORT_MIMETYPE):
        bundle[REPORT_MIMETYPE] = data
    if wanted("text/html"):
        try:
            bundle["text/html"] = notebook_html(data)
        except HtmlExportError:
            pass  # a source checkout without the built bundle: the text still shows
    if wanted("text/plain"):
        bundle["text/plain"] = plain_text(data)
    return bundle


def _report_repr(
    report: Report, include: Collection[str] | None, exclude: Collection[str] | None
) -> dict[str, Any] | None:
    """``Report._repr_mimebundle_``: the bundle in a kernel; None elsewhere (the text shows)."""
    if not in_kernel():
        return None
    from IPython import get_ipython

    from ..fixes.kernel_names import mark_unbound

    shell = get_ipython()
    data = report.to_dict()
    mark_unbound(data, getattr(shell, "user_ns", {}) or {})
    _tell_panels(report, data)
    return report_mimebundle(data, include, exclude)


SHOWN_KEPT = 32
_shown: deque[Report] = deque(maxlen=SHOWN_KEPT)
_listeners: list[Callable[[Report, dict[str, Any]], None]] = []
_cells: dict[int, int | None] = {}
"""id of a report in ``_shown`` -> the cell that displayed it."""


def _tell_panels(report: Report, data: dict[str, Any]) -> None:
    """The sidebar lists every report this kernel showed, not only its own buttons' (#36): the
    panels' hub (``comm.py``) listens here, and one made later reads the recent ones."""
    _shown.append(report)
    _cells[id(report)] = _running_cell()
    for gone in set(_cells) - {id(r) for r in _shown}:
        del _cells[gone]
    for listener in list(_listeners):
        try:
            listener(report, data)  # the dict just built: the panels need not build it again
        except Exception:  # a display must show whatever the panel's state
            pass


def shown_reports() -> list[Report]:
    """The reports this kernel displayed lately, oldest first."""
    return list(_shown)


def shown_cell(report: Report) -> int | None:
    """The execution count of the cell that displayed ``report`` (None: not known)."""
    return _cells.get(id(report))


def _running_cell() -> int | None:
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    from ..watch.notebook_cells import current_count

    shell = get_ipython()
    return current_count(shell) if shell is not None else None


def on_shown(listener: Callable[[Report, dict[str, Any]], None]) -> None:
    """Call ``listener`` with each report displayed from now on, and its dict as shown."""
    _listeners.append(listener)


RENDERERS.mimebundle = _report_repr
