"""How reports show in a notebook: the MIME bundle of a Report (gpusight.jupyter.display), the
report widget and its progress (gpusight.jupyter.widget / progress), and both in a real kernel."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

# Jupyter-side packages are absent on the GPU machine: skip this module there, not fail.
pytest.importorskip("nbformat")
pytest.importorskip("ipywidgets")
pytest.importorskip("nbclient")
import nbformat
from gpusight import __version__, load_report
from gpusight.html_export import notebook_html
from gpusight.jupyter import progress as progress_mod
from gpusight.jupyter.display import REPORT_MIMETYPE, report_mimebundle
from gpusight.jupyter.progress import NoProgress, WidgetProgress, progress_for_shell
from gpusight.jupyter.widget import (
    WIDGET_MIMETYPE,
    ReportWidget,
    as_report_dict,
    in_kernel,
    show,
)
from gpusight.report import Report, Verdict
from gpusight.report_schema import ReportValidationError, validate
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
FULL = ROOT / "src" / "report" / "fixtures" / "full-report.json"


def small_report() -> Report:
    return Report(
        kind="check",
        machine={"platform": "linux", "python": "3.11", "cpu_count": 2, "gpus": []},
        verdict=Verdict(bottleneck="environment", gpu_busy_pct=None, summary="No GPU."),
    )


def test_widget_names_the_frontend_module_and_version() -> None:
    w = ReportWidget()
    state = w.get_state()
    assert state["_model_name"] == "ReportModel"
    assert state["_view_name"] == "ReportView"
    assert state["_model_module"] == state["_view_module"] == "gpusight"
    assert state["_model_module_version"] == f"^{__version__}"
    # The frontend registers the version from package.json: the two must agree.
    pkg = json.loads((ROOT / "package.json").read_text("utf-8"))
    assert pkg["version"] == __version__
    assert state["report"] == {}
    assert state["progress"] is None


def test_widget_takes_a_report_a_dict_or_a_path() -> None:
    r = small_report()
    assert ReportWidget(r).report == r.to_dict()
    data = load_report(FULL)
    assert ReportWidget(data).report == data
    assert ReportWidget(FULL).report["verdict"]["bottleneck"] == "memory_transfer"


def test_a_bad_file_fails_naming_the_field(tmp_path: Path) -> None:
    bad = json.loads(FULL.read_text("utf-8"))
    bad["findings"][0]["severity"] = "catastrophic"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad), "utf-8")
    with pytest.raises(ReportValidationError) as err:
        as_report_dict(path)
    assert "findings[0].severity" in str(err.value)


def test_outside_a_kernel_reports_stay_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert not in_kernel()
    assert small_report()._repr_mimebundle_() is None
    assert isinstance(progress_for_shell(), NoProgress)
    show(FULL)
    out = capsys.readouterr().out
    assert "resnet50 training step, batch 64" in out
    assert "non_blocking copies from pageable memory block the host" in out


def test_report_bundle_is_the_report_the_html_fallback_and_one_line() -> None:
    report = small_report()
    report.title = "resnet </script> run"
    bundle = report_mimebundle(report)
    # One copy of each: no widget view, no application/json duplicate.
    assert set(bundle) == {REPORT_MIMETYPE, "text/html", "text/plain"}
    data = bundle[REPORT_MIMETYPE]
    assert data == report.to_dict()
    validate(data)  # what the frontend renderer gets passes the schema it validates with
    assert json.loads(json.dumps(data, allow_nan=False)) == data
    assert bundle["text/html"] == notebook_html(report)
    text = bundle["text/plain"]
    assert "\n" not in text and len(text) < 200
    assert text.startswith("gpusight report: resnet </script> run (") and text.endswith("No GPU.")
    # A loaded report (a dict) gives the same bundle.
    assert report_mimebundle(data) == bundle


def test_report_bundle_builds_only_what_the_frontend_asks_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gpusight.html_export as html_export

    def not_wanted(report: Any) -> str:
        raise AssertionError("the HTML fallback was built though it was excluded")

    monkeypatch.setattr(html_export, "notebook_html", not_wanted)
    r = small_report()
    assert set(report_mimebundle(r, include={"text/plain"})) == {"text/plain"}
    assert set(report_mimebundle(r, exclude={"text/html"})) == {REPORT_MIMETYPE, "text/plain"}


def test_report_bundle_without_the_built_html_keeps_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gpusight.html_export as html_export

    def missing(report: Any) -> str:
        raise html_export.HtmlExportError("not built")

    monkeypatch.setattr(html_export, "notebook_html", missing)
    assert set(report_mimebundle(small_report())) == {REPORT_MIMETYPE, "text/plain"}


def test_in_a_kernel_a_report_displays_as_its_bundle(monkeypatch: pytest.MonkeyPatch) -> None:
    import gpusight.jupyter.comm as comm_mod
    import gpusight.jupyter.display as display_mod

    monkeypatch.setattr(display_mod, "in_kernel", lambda: True)
    monkeypatch.setattr(comm_mod, "_HUB", None)
    r = small_report()
    assert r._repr_mimebundle_() == report_mimebundle(r)
    assert not hasattr(r, "_repr_json_")
    # Shown in the notebook, it is listed for the sidebar too (once).
    r._repr_mimebundle_()
    assert [entry["kind"] for entry, _ in comm_mod.hub()._reports.values()] == [r.kind]


def test_widget_progress_throttles_and_hands_over_to_the_report(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [100.0]
    monkeypatch.setattr(progress_mod.time, "monotonic", lambda: clock[0])
    sent: list[Any] = []
    p = WidgetProgress(display=False)
    p.widget.observe(lambda change: sent.append(change["new"]), names="progress")
    assert p.widget.progress == {"stage": "Starting", "fraction": None}
    p("copies", 0.10)
    p("copies", 0.105)  # same stage, same instant: not worth a message
    clock[0] += 0.5
    p("copies", 0.104)  # moved less than 1%
    p("copies", 0.2)
    p("launch", 0.2)  # a new stage always goes out
    p("launch", 1.5)  # clamped, and the end always goes out
    assert sent == [
        {"stage": "copies", "fraction": 0.1},
        {"stage": "copies", "fraction": 0.2},
        {"stage": "launch", "fraction": 0.2},
        {"stage": "launch", "fraction": 1.0},
    ]
    r = small_report()
    p.done(r)
    assert p.widget.progress is None
    assert p.widget.report == r.to_dict()


def test_progress_bar_is_dropped_on_error() -> None:
    with pytest.raises(KeyboardInterrupt):
        with WidgetProgress(display=False) as p:
            p("watching", 0.3)
            raise KeyboardInterrupt
    assert p.widget.progress is None


class _Handle:
    """Records what IPython's DisplayHandle would send."""

    def __init__(self) -> None:
        self.updates: list[tuple[Any, dict[str, Any]]] = []

    def update(self, obj: Any, **kwargs: Any) -> None:
        self.updates.append((obj, kwargs))


def test_closing_progress_empties_its_output_and_closes_the_widget() -> None:
    p = WidgetProgress(display=False)
    handle = p._handle = _Handle()
    with p:
        p("copies", 0.5)
    assert handle.updates == [({}, {"raw": True})]
    assert p.widget.comm is None  # closed: gone from the frontend and the kernel's widgets
    p.close()  # again (a caller's own close after the block): nothing more is sent
    assert len(handle.updates) == 1


def test_a_report_handed_to_the_progress_widget_stays() -> None:
    p = WidgetProgress(display=False)
    handle = p._handle = _Handle()
    r = small_report()
    with p:
        p.done(r)
    assert handle.updates == []
    assert p.widget.comm is not None and p.widget.report == r.to_dict()
    assert p.widget.progress is None
    p.widget.close()


def _run_notebook(
    cells: list[str], tmp_path: Path, allow_errors: bool = False
) -> nbformat.NotebookNode:
    """Execute ``cells`` as nbclient does by default (widget state stored), as papermill would."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
        allow_errors=allow_errors,
    ).execute()
    return nb


SMALL_REPORT_CODE = (
    "from gpusight.report import Report, Verdict\n"
    "r = Report(kind='check', machine={'platform': 'linux', 'python': '3', 'cpu_count': 1,"
    " 'gpus': []}, verdict=Verdict(summary='nothing'))\n"
)


@pytest.mark.slow
def test_in_a_kernel_a_report_and_show_display_as_the_bundle(
    tmp_path: Path,
) -> None:
    nb = _run_notebook(
        [
            "from gpusight import load_report\n"
            "from gpusight.jupyter.widget import show\n"
            f"show(load_report({str(FULL)!r}))",
            SMALL_REPORT_CODE + "r",
        ],
        tmp_path,
    )
    shown = nb.cells[0].outputs
    assert len(shown) == 1 and shown[0]["output_type"] == "display_data"
    assert set(shown[0]["data"]) == {REPORT_MIMETYPE, "text/html", "text/plain"}
    assert WIDGET_MIMETYPE not in shown[0]["data"]
    (result,) = nb.cells[1].outputs
    assert result["output_type"] == "execute_result"
    data = result["data"]
    assert set(data) == {REPORT_MIMETYPE, "text/html", "text/plain"}
    validate(data[REPORT_MIMETYPE])
    assert data[REPORT_MIMETYPE]["verdict"]["summary"] == "nothing"
    assert 'data-gpusight="report"' in data["text/html"]
    assert data["text/plain"].startswith("gpusight report: gpusight check report (")
    assert not re.match(r"^Report\(kind=", data["text/plain"])


@pytest.mark.slow
def test_progress_widget_leaves_the_output_to_the_returned_report(tmp_path: Path) -> None:
    """As the magics run: a progress widget while working, then the report they return. The
    report must show once, as its bundle, with no widget output left in the notebook."""
    nb = _run_notebook(
        [
            SMALL_REPORT_CODE + "from gpusight.jupyter.progress import progress_for_shell\n"
            "with progress_for_shell('working') as bar:\n"
            "    bar('halfway', 0.5)\n"
            "r",
            "with progress_for_shell('working') as bar:\n"
            "    bar('halfway', 0.5)\n"
            "    raise ValueError('the loader raised')",
        ],
        tmp_path,
        allow_errors=True,
    )
    emptied, result = nb.cells[0].outputs
    # The widget's output was emptied in place (update_display_data), not left behind.
    assert emptied["output_type"] == "display_data" and emptied["data"] == {}
    assert result["output_type"] == "execute_result"
    assert set(result["data"]) == {REPORT_MIMETYPE, "text/html", "text/plain"}
    # On an error the bar goes too, and the traceback says what happened.
    emptied, error = nb.cells[1].outputs
    assert emptied["data"] == {}
    assert error["output_type"] == "error" and error["ename"] == "ValueError"
    # Nothing in the saved notebook refers to a widget: it needs no widget state to show.
    for cell in nb.cells:
        for output in cell.outputs:
            assert WIDGET_MIMETYPE not in output.get("data", {})
