"""A watched script that raised is reported as such (issue #47): before its first measured step
the verdict is the exception with the user's line (inside ``forward`` where it was), the only
finding is ``code.raised`` with no gain, and the run carries no step figures; after measured
steps the report covers them and says where it stopped. Real CPU torch, ``gpusight run``."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from gpusight.report import load_report
from gpusight.report_schema import validate
from thread_support import one_thread  # noqa: F401 (autouse: one torch thread)

RAISES_IN_FORWARD = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        h = self.fc(x)
        scores = h.to(torch.bfloat16).numpy()
        return h


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(50):
    x = torch.randn(32, 64)
    y = torch.randint(0, 10, (32,))
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

RAISES_LATER = """\
import torch
from torch import nn

model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(1000):
    x = torch.randn(32, 64)
    y = torch.randint(0, 10, (32,))
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step == 30:
        raise ValueError(f"loss went bad at step {step}")
"""


def _run(
    tmp_path: Path, source: str, capsys: pytest.CaptureFixture[str], *flags: str
) -> tuple[int, dict, str]:
    from gpusight.cli import main

    script = tmp_path / "x.py"
    script.write_text(source, encoding="utf-8")
    rc = main(["run", "--json", str(tmp_path / "r.json"), *flags, str(script)])
    out = capsys.readouterr()
    return rc, load_report(tmp_path / "r.json"), out.out + out.err


def test_a_script_raising_in_forward_at_its_first_step_is_reported_as_that_exception(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    rc, rep, printed = _run(tmp_path, RAISES_IN_FORWARD, capsys, "--steps", "10")
    validate(rep)
    assert rc == 1  # as under plain Python
    error = rep["run"]["error"]
    assert error["type"] == "RuntimeError" and "numpy()" in error["message"]
    assert error["measured_steps"] == 0 and error["in_forward"] is True
    assert error["function"] == "Net.forward"
    assert error["source"]["line"] == 12 and ".numpy()" in error["source"]["code"]
    assert error["call"]["line"] == 21 and "model(x)" in error["call"]["code"]

    summary = rep["verdict"]["summary"]
    assert summary.startswith("The watched code raised RuntimeError at x.py:12 in Net.forward")
    assert "before its first measured step" in summary
    # No finding claims a gain from the start-up step; the one there is the exception.
    assert [f["id"] for f in rep["findings"]] == ["code.raised"]
    assert all(f["impact"]["basis"] == "none" for f in rep["findings"])
    assert rep["run"]["steps"] == 0 and "breakdown_ms" not in rep["run"]
    assert not any("before any clean step" in n for n in rep["notes"])

    # The terminal's first screen: the exception, its line, and what to run next.
    assert "gpusight: error: The watched code raised RuntimeError at x.py:12" in printed
    assert "do this first: Fix the RuntimeError at x.py:12 in Net.forward" in printed
    assert "gain: Nothing was measured" in printed
    assert "estimated" not in printed and "--what-if" not in printed
    assert f"next: gpusight run {tmp_path / 'x.py'}" in printed


def test_a_script_raising_after_measured_steps_keeps_their_analysis(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    rc, rep, _ = _run(tmp_path, RAISES_LATER, capsys)
    validate(rep)
    assert rc == 1
    error = rep["run"]["error"]
    assert error["type"] == "ValueError" and error["message"] == "loss went bad at step 30"
    assert error["source"]["line"] == 14 and "function" not in error  # the script's top level
    assert "call" not in error  # one line of the user's in the traceback
    assert error["measured_steps"] == rep["run"]["steps"] > 0
    assert rep["run"]["breakdown_ms"]  # the measured steps are analysed as usual
    assert "code.raised" not in [f["id"] for f in rep["findings"]]
    note = f"the watched code raised ValueError at x.py:14 after {error['measured_steps']}"
    assert any(n.startswith(note) for n in rep["notes"])


def test_the_raised_report_renders_in_html(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpusight.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.py").write_text(RAISES_IN_FORWARD, encoding="utf-8")
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    assert main(["run", "--quiet", "--html", "r.html", "x.py"]) == 1
    page = (tmp_path / "r.html").read_text("utf-8")
    assert "The watched code raised RuntimeError at x.py:12 in Net.forward" in page
