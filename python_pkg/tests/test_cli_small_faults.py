"""The small ways a run can go wrong, each said plainly: a failure's reason is its error line
(not the ``^^^^`` under the source), a script that ran out of host memory is named so, a folder
with ``__main__.py`` runs as Python runs it, and a report holding an integer of thousands of
digits is refused in words about the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gpusight.cli import main
from gpusight.report import load_report
from gpusight.report_schema import ReportValidationError
from gpusight.rerun.run_failure import CPU_OOM
from gpusight.rerun.run_failure import reason as _reason
from html_support import typical_report

TRACEBACK = """Traceback (most recent call last):
  File "train.py", line 3, in <module>
    model(x).sum().backward()
    ^^^^^^^^^^^^^^^^^^^^^^^^^
{error}
             ~~~~~~~~^^^^^^
"""


def test_a_failures_reason_is_its_error_line(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_text(TRACEBACK.format(error="ValueError: shapes (4, 8) and (3, 2) do not match"))
    why = _reason(1, log)
    assert "ValueError: shapes (4, 8) and (3, 2) do not match" in why
    assert "^^^" not in why and "~~~" not in why


def test_a_failures_reason_holds_no_line_the_script_printed(tmp_path: Path) -> None:
    """A reason is printed and kept in the report (and so in a page shared with others): what
    the script printed before it failed, a token among it, is not part of it."""
    log = tmp_path / "log.txt"
    log.write_text("loss 0.31\nAPI_TOKEN=hf_secret123\n" + TRACEBACK.format(error="KeyError: 'x'"))
    why = _reason(1, log)
    assert "KeyError: 'x'" in why and "hf_secret123" not in why and "loss" not in why
    log.write_text("API_TOKEN=hf_secret123\n")  # printed, then exit(3): no line says why
    assert _reason(3, log) == "crashed: the script exited with 3"


def test_a_script_out_of_host_memory_is_named_so(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    error = (
        "RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't "
        "allocate memory: you tried to allocate 68719476736 bytes."
    )
    log.write_text(TRACEBACK.format(error=error))
    assert _reason(1, log) == CPU_OOM
    log.write_text("")
    assert "out-of-memory killer" in _reason(-9, log)


def test_a_folder_with_main_runs_as_python_runs_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = tmp_path / "app"
    app.mkdir()
    (app / "helpers.py").write_text("N = 8\n")
    (app / "__main__.py").write_text(
        "import torch\nfrom helpers import N\nm = torch.nn.Linear(N, 2)\n"
        "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(30):\n    opt.zero_grad()\n    m(torch.randn(4, N)).sum().backward()\n"
        "    opt.step()\n"
    )
    out = tmp_path / "r.json"
    assert main(["run", "--quiet", "--json", str(out), str(app)]) == 0
    assert json.loads(out.read_text())["run"]["steps"] > 0
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["run", str(empty)]) == 2
    assert "a folder without __main__.py" in capsys.readouterr().err


def test_an_integer_of_thousands_of_digits_is_refused_in_words_about_the_report() -> None:
    text = typical_report().to_json().replace('"cpu_count": 16', '"cpu_count": ' + "9" * 5000)
    with pytest.raises(ReportValidationError, match="integer of more than"):
        load_report(text)


def test_os_exit_still_writes_the_report_and_closed_stderr_is_no_error(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "hard.py").write_text(
        "import os, torch\nm = torch.nn.Linear(4, 2)\n"
        "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(20):\n    opt.zero_grad()\n    m(torch.randn(3, 4)).sum().backward()\n"
        "    opt.step()\nos._exit(3)\n"
    )
    (tmp_path / "quiet.py").write_text("import sys\nsys.stderr.close()\nprint('ok')\n")
    gpusight = str(Path(sys.executable).parent / "gpusight")

    def run(name: str) -> subprocess.CompletedProcess[str]:
        cmd = [gpusight, "run", "--json", f"{name}.json", f"{name}.py"]
        return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)

    hard = run("hard")
    assert hard.returncode == 3  # os._exit's code, as under Python
    notes = json.loads((tmp_path / "hard.json").read_text())["notes"]
    assert "the script ended the process with os._exit(3)" in notes
    quiet = run("quiet")
    assert quiet.returncode == 0 and quiet.stdout == "ok\n"  # as `python quiet.py` exits
    assert (tmp_path / "quiet.json").is_file()


@pytest.mark.parametrize(
    "ending",
    [
        "import os\nos.close(1)\nos.close(2)\n",  # its output descriptors closed
        "import sys\nsys.setrecursionlimit(60)\n",  # a recursion limit gpusight cannot work in
        "import sys\nsys.modules['tempfile'] = None\nsys.modules['json'] = None\n",
    ],
)
def test_what_a_script_does_to_python_at_its_end_loses_no_report(
    tmp_path: Path, ending: str
) -> None:
    """A script that, at its end, closes its output descriptors, lowers the recursion limit or
    blocks standard modules exits as under Python (0), and its report is written."""
    import subprocess
    import sys

    script = tmp_path / "ends.py"
    script.write_text("print('done')\n" + ending)
    gpusight = str(Path(sys.executable).parent / "gpusight")
    under_python = subprocess.run([sys.executable, str(script)], cwd=tmp_path, timeout=60)
    got = subprocess.run(
        [gpusight, "run", "--lean", "--json", "r.json", "ends.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert got.returncode == under_python.returncode == 0, got.stderr[-500:]
    assert load_report(tmp_path / "r.json")["kind"] == "watch"


def test_a_dataloader_traceback_holds_no_frame_of_gpusight(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "bad_data.py"
    script.write_text(
        "import torch\nfrom torch.utils.data import DataLoader, Dataset\n\n"
        "class Broken(Dataset):\n    def __len__(self):\n        return 64\n\n"
        "    def __getitem__(self, i):\n        if i == 40:\n"
        "            raise KeyError('sample 40 is missing')\n        return torch.randn(4)\n\n"
        "m = torch.nn.Linear(4, 2)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for x in DataLoader(Broken(), batch_size=4):\n    opt.zero_grad()\n"
        "    m(x).sum().backward()\n    opt.step()\n"
    )
    assert main(["run", "--quiet", str(script)]) == 1
    err = capsys.readouterr().err
    assert "KeyError: 'sample 40 is missing'" in err and "in __getitem__" in err
    assert f'File "{script}"' in err
    assert "gpusight/" not in err.split("Traceback", 1)[1]


@pytest.mark.timeout(120)
def test_a_forked_child_that_exits_ends_and_leaves_the_report_to_the_parent(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys

    (tmp_path / "forks.py").write_text(
        "import os, sys, torch\nm = torch.nn.Linear(4, 2)\n"
        "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for i in range(40):\n    opt.zero_grad()\n    m(torch.randn(3, 4)).sum().backward()\n"
        "    opt.step()\n    if i == 5:\n        pid = os.fork()\n        if pid == 0:\n"
        "            sys.exit(0)\n        os.waitpid(pid, 0)\nprint('parent done')\n"
    )
    gpusight = str(Path(sys.executable).parent / "gpusight")
    done = subprocess.run([gpusight, "run", "--json", "r.json", "forks.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=90)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "parent done\n"
    assert done.stderr.count("\ngpusight: ") == 1  # one summary: the parent's
    assert json.loads((tmp_path / "r.json").read_text())["run"]["steps"] > 0


@pytest.mark.parametrize("empties", ["sys.argv.clear()", "sys.argv = []"])
def test_a_script_that_empties_sys_argv_exits_as_under_python(tmp_path: Path, empties: str) -> None:
    script = tmp_path / "argv.py"
    script.write_text(f"import sys\n{empties}\nprint('ok')\n")
    out = tmp_path / "r.json"
    assert main(["run", "--quiet", "--json", str(out), str(script)]) == 0
    assert not any("raised" in n for n in json.loads(out.read_text())["notes"])
