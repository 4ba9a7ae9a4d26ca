"""The README's quick start runs as written, on the CPU.

Its code blocks run in order, in one namespace, in a scratch directory: ```python blocks with
exec, ```ipython blocks (notebook cells, magics included) in an IPython shell. A block after a
``<!-- readme-test: skip (why) -->`` line is left out; say why there. Shell and text blocks are
commands for a terminal and are not run here (the CLI has its own tests).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
FENCE = re.compile(r"(<!-- readme-test: skip[^>]*-->\s*)?^```(\w+)\n(.*?)^```", re.M | re.S)


def blocks() -> list[tuple[str, str, bool]]:
    """(language, code, skipped) for each fenced block, in order."""
    text = README.read_text("utf-8")
    return [(m.group(2), m.group(3), bool(m.group(1))) for m in FENCE.finditer(text)]


def test_the_first_two_commands_are_make_lab_and_make_test() -> None:
    lang, code, _ = blocks()[0]
    commands = [line.split("#")[0].strip() for line in code.splitlines() if line.strip()]
    assert lang == "bash" and commands[:2] == ["make lab", "make test"]


def test_the_readme_has_quick_starts_for_notebook_and_script() -> None:
    langs = [lang for lang, _, skipped in blocks() if not skipped]
    assert langs.count("ipython") >= 2 and langs.count("python") >= 2
    assert "pip install gpusight" in README.read_text("utf-8")


@pytest.mark.slow
def test_the_quick_start_runs_on_the_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    torch = pytest.importorskip("torch")
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    shell = InteractiveShell.instance()
    try:
        namespace = shell.user_ns
        ran = 0
        for lang, code, skipped in blocks():
            if skipped or lang not in ("python", "ipython"):
                continue
            if lang == "python":
                exec(compile(code, f"README.md ({lang} block {ran})", "exec"), namespace)
            else:
                result = shell.run_cell(code)
                assert result.success, f"README block failed:\n{code}\n{result.error_in_exec}"
            ran += 1
        assert ran >= 4
    finally:
        InteractiveShell.clear_instance()

    # What the quick start promises: a watched report saved as HTML, a diagnosis with measured
    # what-ifs, and the cell magic's report.
    page = tmp_path / "report.html"
    assert page.is_file() and "gpusight" in page.read_text("utf-8")[:2000]
    report = namespace["report"]
    assert report.kind == "diagnose" and report.what_if
    assert namespace["w"].report.run["steps"] == 20
    assert "gpusight watch" in capsys.readouterr().out
