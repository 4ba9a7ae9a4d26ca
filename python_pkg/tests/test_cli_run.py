"""``gpusight run`` in real subprocesses: argv, __main__, sys.path[0], exit codes, --steps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gpusight.report import load_report
from gpusight.watch.host_lines import STEPS as LINE_STEPS

SCRIPT = """\
import json
import sys
import warnings

import torch

print("ARGS " + json.dumps({"argv": sys.argv, "name": __name__, "path0": sys.path[0]}), flush=True)
mode = sys.argv[1]
if mode == "exit":
    sys.exit(int(sys.argv[2]))
if mode == "raise":
    def fails():
        raise RuntimeError("boom from the script")
    fails()
if mode == "interrupt":
    raise KeyboardInterrupt
torch.set_num_threads(1)
model = torch.nn.Linear(16, 4)
x = torch.randn(8, 16)
step = 0
try:
    while True:  # forever: only --steps ends it (steps end at each backward: no optimizer)
        model.zero_grad()
        model(x).square().mean().backward()
        warnings.warn("called a synchronizing CUDA operation")  # SYNC
        step += 1
finally:
    print(f"FINALLY {step}", flush=True)
"""


def run_all(tmp_path: Path, *cases: list[str]) -> list[subprocess.CompletedProcess[str]]:
    """Start every case at once (each imports torch), then collect them."""
    script = tmp_path / "sub" / "train.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text(SCRIPT, encoding="utf-8")
    pkg = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": pkg + os.pathsep + os.environ.get("PYTHONPATH", "")}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gpusight",
                "run",
                *[a.replace("SCRIPT", str(script)) for a in args],
            ],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for args in cases
    ]
    out = []
    for p, args in zip(procs, cases, strict=True):
        stdout, stderr = p.communicate(timeout=240)
        out.append(subprocess.CompletedProcess(args, p.returncode, stdout, stderr))
    return out


def rep_steps(path: Path) -> int:
    return int(load_report(path)["run"]["steps"])


def args_of(proc: subprocess.CompletedProcess[str]) -> dict[str, object]:
    line = next(x for x in proc.stdout.splitlines() if x.startswith("ARGS "))
    parsed: dict[str, object] = json.loads(line[5:])
    return parsed


@pytest.mark.slow
def test_run_passes_argv_exit_codes_and_stops(tmp_path: Path) -> None:
    exit3, stopped = run_all(
        tmp_path,
        ["SCRIPT", "exit", "3", "--flag", "-x"],
        [
            "--steps",
            "3",
            "--warmup",
            "1",
            "--profile-steps",
            "1",
            "--json",
            "stopped.json",
            "SCRIPT",
            "loop",
        ],
    )
    script = str(tmp_path / "sub" / "train.py")

    # Like `python train.py exit 3 --flag -x`: the script's argv, __main__, its directory first.
    a = args_of(exit3)
    assert a == {
        "argv": [script, "exit", "3", "--flag", "-x"],
        "name": "__main__",
        "path0": str(tmp_path / "sub"),
    }
    assert exit3.returncode == 3, exit3.stderr

    assert stopped.returncode == 0, stopped.stderr
    finally_line = next(x for x in stopped.stdout.splitlines() if x.startswith("FINALLY"))
    # The script's finally ran, after the measured steps, the one whose FLOPs were counted and
    # those timed by line.
    assert int(finally_line.split()[1]) == 1 + 1 + 1 + 3 - 1 + 1 + LINE_STEPS
    rep = load_report(tmp_path / "stopped.json")
    assert rep["kind"] == "watch" and rep["run"]["steps"] == 3
    assert rep["run"]["kernels"]["step_mode"] == "backward"
    sync_line = (
        SCRIPT.splitlines().index(next(x for x in SCRIPT.splitlines() if x.endswith("# SYNC"))) + 1
    )
    src = rep["run"]["syncs"][0]["source"]
    assert (src["file"], src["line"]) == (os.path.join("sub", "train.py"), sync_line)
    assert "gpusight:" in stopped.stderr  # the summary


def test_run_in_process_error_and_interrupt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same command code, called in this process: a failing script, a Ctrl-C, sys.argv back."""
    from gpusight.cli import main

    script = tmp_path / "sub" / "train.py"
    script.parent.mkdir()
    script.write_text(SCRIPT, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    argv, path0 = list(sys.argv), sys.path[0]
    assert (
        main(["run", "--json", "raised.json", "--html", "raised.html", str(script), "raise"]) == 1
    )
    err = capsys.readouterr().err
    assert (
        "Traceback (most recent call last)" in err and "RuntimeError: boom from the script" in err
    )
    assert f'File "{script}", line' in err and "in fails" in err
    assert 'gpusight/commands/run.py"' not in err  # the traceback starts at the script
    rep = load_report(tmp_path / "raised.json")  # written although the script failed
    assert any("raised RuntimeError" in n for n in rep["notes"])
    page = (tmp_path / "raised.html").read_text("utf-8")  # the same report, self-contained
    assert page.lower().startswith("<!doctype html>") and 'data-gpusight="report"' in page
    assert "raised RuntimeError" in page
    assert main(["run", "--quiet", str(script), "interrupt"]) == 130
    assert main(["run", "--quiet", str(script), "exit", "0"]) == 0
    assert (sys.argv, sys.path[0]) == (argv, path0)


def test_run_rejects_missing_script(tmp_path: Path) -> None:
    from gpusight.cli import main

    assert main(["run", str(tmp_path / "nope.py")]) == 2


def test_run_does_not_import_ipython() -> None:
    code = (
        "import sys, gpusight.cli, gpusight.commands.run;"
        "import gpusight.watch.session, gpusight.watch.report_builder;"
        "gpusight.cli.build_parser();"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('IPython', 'ipywidgets')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_run_paths_are_taken_before_the_script_changes_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative --json/--html lands where gpusight was started, and the traceback of a script
    that changed directory (or has a syntax error) starts at the script, not at runpy."""
    from gpusight.cli import main

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "moves.py").write_text(
        f"import os\nos.chdir({str(elsewhere)!r})\n"
        "def f():\n    raise ValueError('after chdir')\nf()\n"
    )
    (tmp_path / "syntax.py").write_text("x = (\n")
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--quiet", "--json", "r.json", "--html", "r.html", "moves.py"]) == 1
    monkeypatch.chdir(tmp_path)  # the script moved this process
    assert (tmp_path / "r.json").is_file() and (tmp_path / "r.html").is_file()
    assert not (elsewhere / "r.json").exists()
    err = capsys.readouterr().err
    assert err.startswith('Traceback (most recent call last):\n  File "moves.py", line 5')
    assert "runpy" not in err and "gpusight" not in err
    assert main(["run", "--quiet", "syntax.py"]) == 1
    err = capsys.readouterr().err
    assert "SyntaxError" in err and "runpy" not in err and "gpusight" not in err
