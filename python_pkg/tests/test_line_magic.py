"""``%gpusight`` in a real IPython shell (and, once, a real kernel) on the CPU: check + quick
benchmarks as one schema-valid report, the subcommands, usage messages, and Ctrl-C."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Jupyter-side packages are absent on the GPU machine: skip this module there, not fail.
pytest.importorskip("nbformat")
pytest.importorskip("IPython")
pytest.importorskip("nbclient")
pytest.importorskip("ipywidgets")
import nbformat
import torch
from gpusight.bench.flags import snapshot
from gpusight.jupyter import line_magic
from gpusight.jupyter.display import REPORT_MIMETYPE
from gpusight.jupyter.widget import WIDGET_MIMETYPE
from gpusight.report import Report
from gpusight.report_schema import validate
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from nbclient import NotebookClient

needs_no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA path")

# Small enough to keep the test quick; the environment check itself takes a few seconds.
BUDGET = "--budget 0.3"


@pytest.fixture(scope="module")
def shell() -> Iterator[InteractiveShell]:
    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "gpusight")
    yield sh
    sh.run_line_magic("unload_ext", "gpusight")


@needs_no_cuda
def test_gpusight_is_check_plus_benchmarks_in_one_report(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = snapshot()
    rng = torch.random.get_rng_state()
    report = shell.run_line_magic("gpusight", BUDGET)
    assert isinstance(report, Report)
    data = report.to_dict()
    validate(data)
    assert data["kind"] == "bench"
    # The environment check: its checks, its finding, its verdict.
    assert "env.cpu_only_build" in report.finding_ids
    assert {"torch.build", "cuda.available"} <= {c.id for c in report.checks}
    assert data["verdict"]["bottleneck"] == "environment"
    assert data["verdict"]["summary"].startswith("Not ready: ")
    # The benchmarks: the CPU matmul measured, every GPU row skipped with the reason.
    rows = {b.id: b for b in report.benchmarks}
    cpu = rows["cpu.matmul.fp32"]
    assert cpu.value is not None and cpu.value > 0
    assert cpu.params is not None and cpu.params["threads"] == torch.get_num_threads()
    gpu = [b for b in report.benchmarks if b.id.startswith(("matmul.", "copy.", "launch."))]
    assert len(gpu) >= 10
    for row in gpu:
        assert row.value is None and (row.skipped or "").startswith("no CUDA device"), row.id
    assert f"CPU fp32 matmul: {cpu.value:,.0f} GFLOP/s" in data["verdict"]["summary"]
    # One machine, the check's (probed once), with the benchmarks' skip notes after its own.
    assert data["machine"]["torch"]["version"] == torch.__version__
    assert any("skipped: no CUDA device" in note for note in data["notes"])
    out = capsys.readouterr().out
    assert "checking the environment" in out and "cpu matmul" in out  # the progress line
    assert out.endswith("\r")  # ... erased once the report is there
    assert snapshot() == flags
    assert torch.equal(torch.random.get_rng_state(), rng)


def test_check_subcommand_is_the_check_alone(shell: InteractiveShell) -> None:
    report = shell.run_line_magic("gpusight", "check")
    assert isinstance(report, Report)
    validate(report.to_dict())
    assert report.kind == "check" and report.benchmarks == []
    assert report.checks
    if not torch.cuda.is_available() and torch.version.cuda is None:
        assert "env.cpu_only_build" in report.finding_ids


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("frobnicate", "unknown command 'frobnicate'"),
        ("--frob", "unrecognized arguments: --frob"),
        ("bench --budget soon", "not a number: 'soon'"),
        ("bench --budget 0", "must be positive"),
        ("check now", "check takes no arguments"),
        ('bench "unclosed', "No closing quotation"),
    ],
)
def test_bad_lines_get_a_usage_message_not_a_traceback(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], line: str, message: str
) -> None:
    result = shell.run_cell(f"%gpusight {line}")
    assert isinstance(result.error_in_exec, UsageError)
    err = capsys.readouterr().err
    assert err.startswith("UsageError: ") and message in err
    assert "usage:" in err and "%gpusight check" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("line", ["--help", "-h", "help", "bench --help"])
def test_help_prints_the_usage(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], line: str
) -> None:
    result = shell.run_cell(f"%gpusight {line}")
    assert result.success and result.result is None
    out = capsys.readouterr().out
    assert "%gpusight check" in out and "%gpusight bench [--budget S]" in out


def test_diagnose_is_routed_to_the_diagnose_magic(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    result = shell.run_cell("%gpusight diagnose no_such_model loader")
    assert isinstance(result.error_in_exec, UsageError)
    err = capsys.readouterr().err
    # The diagnose magic's own message, naming what it could not find.
    assert "no_such_model" in err and "%gpusight diagnose" in err


def test_ctrl_c_stops_cleanly_and_says_so(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real SIGINT (what Ctrl-C / the stop button sends), delivered while the CPU matmul runs."""
    flags = snapshot()
    rng = torch.random.get_rng_state()
    threads = set(threading.enumerate())
    drawn = line_magic.TextProgress.__call__
    sent: list[str] = []

    def draw_then_interrupt(self: Any, stage: str, fraction: float | None = None) -> None:
        drawn(self, stage, fraction)
        if stage == "cpu matmul" and not sent:
            sent.append(stage)
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(line_magic.TextProgress, "__call__", draw_then_interrupt)
    result = shell.run_cell(f"%gpusight {BUDGET}")
    assert sent == ["cpu matmul"]
    assert result.success and result.result is None
    captured = capsys.readouterr()
    assert "%gpusight: interrupted" in captured.err
    assert "Traceback" not in captured.err + captured.out
    assert captured.out.endswith("\r")  # the progress line is gone
    assert snapshot() == flags
    assert torch.equal(torch.random.get_rng_state(), rng)
    assert set(threading.enumerate()) == threads
    # The shell is fine afterwards.
    after = shell.run_line_magic("gpusight", "bench --quick --budget 0.2")
    assert isinstance(after, Report) and after.kind == "bench"


@needs_no_cuda
def test_merged_verdict_keeps_the_environment_unless_a_benchmark_is_critical() -> None:
    from gpusight.bench import build_report
    from gpusight.doctor import check
    from gpusight.report import Finding

    env = check()
    bench = build_report([], machine=env.machine)  # no rows: only the findings matter here
    bench.findings = [Finding(id="hw.h2d_below_link", severity="critical", title="PCIe at x1")]
    merged = line_magic.merge(env, bench)
    # The environment has a critical finding of its own (CPU-only build): its verdict stands.
    assert merged.verdict.summary.startswith(env.verdict.summary)
    assert merged.finding_ids[0] in {"env.cpu_only_build", "hw.h2d_below_link"}
    env.findings = [f for f in env.findings if f.severity != "critical"]
    merged = line_magic.merge(env, bench)
    assert merged.verdict.bottleneck == "environment"
    assert merged.verdict.summary == "Not ready: PCIe at x1."
    validate(merged.to_dict())


@pytest.mark.slow
def test_in_a_kernel_the_progress_widget_gives_way_to_the_report(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext gpusight"),
        nbformat.v4.new_code_cell(f"%gpusight {BUDGET}"),
    ]
    client = NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    outputs = nb.cells[1].outputs
    results = [o for o in outputs if o["output_type"] == "execute_result"]
    # The report shows once, as its self-contained bundle (no widget: gpusight/jupyter/display.py).
    assert len(results) == 1 and results[0]["data"][REPORT_MIMETYPE]["kind"] == "bench"
    assert not [o for o in outputs if o["output_type"] == "stream"]  # no text bar in a kernel
    shown = [o for o in outputs if o["output_type"] == "display_data"]
    assert len(shown) == 1  # the progress widget, its output emptied when the work was done
    assert shown[0]["data"] == {}
    assert not [o for o in outputs if WIDGET_MIMETYPE in o.get("data", {})]
    # The closed widget was left with no bar.
    reports = [s for s in client.widget_state.values() if s.get("_model_name") == "ReportModel"]
    assert [s["progress"] for s in reports] == [None]


def test_outside_a_kernel_the_text_bar_needs_no_ipywidgets() -> None:
    # A fresh process: this one imported ipywidgets for the tests above.
    code = (
        "import sys\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "sh = InteractiveShell.instance()\n"
        "sh.run_line_magic('load_ext', 'gpusight')\n"
        f"report = sh.run_line_magic('gpusight', {BUDGET!r})\n"
        "print('KIND', report.kind, 'IPYWIDGETS', 'ipywidgets' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert "KIND bench IPYWIDGETS False" in done.stdout
    assert "checking the environment" in done.stdout  # the text bar was drawn
