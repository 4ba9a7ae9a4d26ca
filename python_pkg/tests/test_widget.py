"""The report widget (gpusight.jupyter.widget / progress): traits, display, and a real kernel."""

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
from gpusight.jupyter import progress as progress_mod
from gpusight.jupyter.progress import NoProgress, WidgetProgress, progress_for_shell
from gpusight.jupyter.widget import (
    WIDGET_MIMETYPE,
    ReportWidget,
    as_report_dict,
    in_kernel,
    show,
    widget_mimebundle,
)
from gpusight.report import Report, Verdict
from gpusight.report_schema import ReportValidationError
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
    assert widget_mimebundle(small_report()) is None
    assert small_report()._repr_mimebundle_() is None
    assert isinstance(progress_for_shell(), NoProgress)
    show(FULL)
    out = capsys.readouterr().out
    assert "resnet50 training step, batch 64" in out
    assert "non_blocking copies from pageable memory block the host" in out


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


def _run_notebook(cells: list[str], tmp_path: Path) -> list[dict[str, Any]]:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    return [o for cell in nb.cells for o in cell.outputs]


@pytest.mark.slow
def test_in_a_kernel_a_report_displays_as_the_widget_with_a_text_fallback(tmp_path: Path) -> None:
    outputs = _run_notebook(
        [
            "from gpusight import load_report\n"
            "from gpusight.jupyter.widget import show\n"
            f"show(load_report({str(FULL)!r}))",
            "from gpusight.report import Report, Verdict\n"
            "Report(kind='check', machine={'platform': 'linux', 'python': '3', 'cpu_count': 1,"
            " 'gpus': []}, verdict=Verdict(summary='nothing'))",
        ],
        tmp_path,
    )
    shown = [o for o in outputs if o["output_type"] == "display_data"]
    assert len(shown) == 1 and WIDGET_MIMETYPE in shown[0]["data"]
    result = [o for o in outputs if o["output_type"] == "execute_result"]
    assert len(result) == 1
    data = result[0]["data"]
    assert WIDGET_MIMETYPE in data
    # Frontends without ipywidgets still have the text report.
    assert "text/plain" in data and not re.match(r"^Report\(kind=", data["text/plain"])
