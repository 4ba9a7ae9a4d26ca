"""`gpusight check` as a user runs it: real subprocesses, real environment variables, a real tty."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import gpusight
import pytest
import torch

CPU_BUILD = torch.version.cuda is None and torch.version.hip is None


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "gpusight", "check", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=240,
    )


def test_text_report_and_exit_code() -> None:
    done = run("--no-color")
    assert done.returncode == 0, done.stderr
    assert "Checklist" in done.stdout and "\033[" not in done.stdout
    if CPU_BUILD:
        assert "CRITICAL  env.cpu_only_build" in done.stdout
        assert "Not ready: torch" in done.stdout


@pytest.mark.skipif(not CPU_BUILD, reason="needs a critical finding (the CPU build gives one)")
def test_strict_fails_on_critical() -> None:
    assert run("--strict", "--no-color").returncode == 1


def test_json_file(tmp_path: Path) -> None:
    out = tmp_path / "check.json"
    done = run("--json", str(out), "--no-color")
    assert done.returncode == 0
    assert f"report written to {out}" in done.stderr
    data = gpusight.load_report(out)
    assert data["kind"] == "check"
    assert next(c["id"] for c in data["checks"]) == "torch.import"


def test_json_to_stdout_keeps_stdout_parseable() -> None:
    done = run("--json", "-")
    assert done.returncode == 0
    data = json.loads(done.stdout)
    gpusight.load_report(data)
    assert "Checklist" in done.stderr


def test_unwritable_json_path(tmp_path: Path) -> None:
    done = run("--json", str(tmp_path / "no" / "such" / "dir" / "r.json"))
    assert done.returncode == 2
    assert "cannot write" in done.stderr


def _findings(done: subprocess.CompletedProcess[str]) -> dict[str, dict[str, object]]:
    assert done.returncode == 0, done.stderr
    return {f["id"]: f for f in json.loads(done.stdout)["findings"]}


@pytest.mark.parametrize("value", ["", "-1"])
def test_visible_devices_hiding_everything(value: str) -> None:
    found = _findings(run("--json", "-", env={"CUDA_VISIBLE_DEVICES": value}))
    f = found["env.visible_devices"]
    assert f"CUDA_VISIBLE_DEVICES={value!r}" in str(f["title"])
    assert {"label": "CUDA_VISIBLE_DEVICES", "value": value} in f["evidence"]  # type: ignore[operator]


def test_launch_blocking_from_the_environment() -> None:
    found = _findings(run("--json", "-", env={"CUDA_LAUNCH_BLOCKING": "1"}))
    assert "env.launch_blocking" in found
    clean = {k: v for k, v in os.environ.items() if k != "CUDA_LAUNCH_BLOCKING"}
    done = subprocess.run(
        [sys.executable, "-m", "gpusight", "check", "--json", "-"],
        capture_output=True,
        text=True,
        env=clean,
        timeout=240,
    )
    assert "env.launch_blocking" not in _findings(done)


def test_check_does_not_import_widgets_or_psutil(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from gpusight.cli import main\n"
        f"main(['check', '--no-color', '--json', {str(tmp_path / 'r.json')!r}])\n"
        "print(sorted(m for m in ('ipywidgets', 'psutil', 'IPython', 'tensorflow')"
        " if m in sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert done.stderr.strip().splitlines()[-1] == "[]"


def _on_a_tty(*args: str, env: dict[str, str] | None = None) -> str:
    """Run `gpusight check` with stdout on a pseudo-terminal, as in an interactive shell."""
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpusight", "check", *args],
        stdout=secondary,
        stderr=subprocess.DEVNULL,
        env={**{k: v for k, v in os.environ.items() if k != "NO_COLOR"}, **(env or {})},
    )
    os.close(secondary)
    chunks = []
    while True:
        try:
            data = os.read(primary, 65536)
        except OSError:  # EIO once the child has closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=240)
    os.close(primary)
    return b"".join(chunks).decode()


def test_colour_only_on_a_terminal() -> None:
    assert "\033[" in _on_a_tty(env={"TERM": "xterm"})
    assert "\033[" not in _on_a_tty("--no-color", env={"TERM": "xterm"})
    assert "\033[" not in _on_a_tty(env={"TERM": "xterm", "NO_COLOR": "1"})


def test_console_script() -> None:
    script = Path(sys.executable).with_name("gpusight")
    if not script.exists():
        pytest.skip("gpusight is not installed as a console script here")
    done = subprocess.run([str(script), "check", "--no-color"], capture_output=True, text=True)
    assert done.returncode == 0 and "Checklist" in done.stdout
