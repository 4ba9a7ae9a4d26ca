"""``%%gpusight`` driven through a real IPython shell: data wait, cell lines, restore."""

from __future__ import annotations

import statistics
from typing import Any

import pytest

pytest.importorskip("IPython")
from gpusight.jupyter.cell_magic import last_report
from gpusight.report import Report
from IPython.core.error import UsageError
from watch_support import SlowDataset, snapshot

pytestmark = pytest.mark.usefixtures("one_torch_thread")


SETUP = """
import warnings
import torch
from torch import nn
from torch.utils.data import DataLoader
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = nn.CrossEntropyLoss()
"""

STEP = """for i in range({n}):
    loss_fn(model(torch.randn(2, 32)), torch.zeros(2, dtype=torch.long)).backward()
    optimizer.step()
"""

TRAIN = """for x, y in loader:
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    warnings.warn("called a synchronizing CUDA operation")
"""


def test_cell_magic_slow_loader(ip: Any) -> None:
    ds = SlowDataset()
    ip.user_ns["ds"] = ds
    ip.run_cell(SETUP + "loader = DataLoader(ds, batch_size=2)\n").raise_error()
    before = snapshot()
    rep = ip.run_cell_magic("gpusight", "--steps 5 --warmup 1 --profile-steps 2", TRAIN)
    assert snapshot() == before
    assert isinstance(rep, Report) and last_report() is rep
    rep.validate()
    assert rep.run is not None and rep.run["steps"] == 5
    truth_ms = statistics.fmean(ds.spent) * 2 * 1000
    data = rep.run["breakdown_ms"]["data_wait"]
    assert truth_ms <= data * 1.02 + 0.5 and data <= truth_ms * 1.15 + 3.0
    assert data / rep.run["step_time_ms"] > 0.5
    assert rep.verdict.bottleneck == "input_pipeline"
    # The sync is on the 6th line of the cell as the editor numbers it (%%gpusight is line 1).
    sync = rep.run["syncs"][0]
    assert sync["source"]["file"] == "cell" and sync["source"]["line"] == 7
    assert sync["source"]["code"].startswith("warnings.warn(")
    assert sync["count"] == 5


def test_cell_that_raises_is_restored(ip: Any) -> None:
    ip.run_cell(SETUP).raise_error()
    before = snapshot()
    cell = STEP.format(n=10) + "    if i == 4:\n        raise ValueError('bad batch')\n"
    with pytest.raises(ValueError, match="bad batch"):
        ip.run_cell_magic("gpusight", "--warmup 1 --profile-steps 2", cell)
    assert snapshot() == before
    rep = last_report()
    assert rep is not None and any("raised ValueError" in n for n in rep.notes)


def test_a_cells_error_shows_the_cell_not_gpusight(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The traceback of a watched cell's own error is the cell's: gpusight's frames (the magic,
    the watch around the cell's code) are hidden, as IPython hides its own."""
    ip.run_cell(SETUP).raise_error()
    capsys.readouterr()
    cell = STEP.format(n=6) + "raise ValueError('bad value')\n"
    result = ip.run_cell(f"%%gpusight --steps 2 --profile-steps 0\n{cell}")
    assert isinstance(result.error_in_exec, ValueError)
    shown = capsys.readouterr().out
    assert "bad value" in shown and "raise ValueError" in shown
    assert "gpusight/jupyter" not in shown and "cell_magic.py" not in shown


def test_a_cell_raising_in_forward_at_its_first_step_reports_the_cells_line(ip: Any) -> None:
    ip.run_cell(
        SETUP + "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(32, 4)\n"
        "    def forward(self, x):\n"
        "        return self.fc(x).numpy()\n"
        "model = Net()\n"
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.01)\n"
    ).raise_error()
    with pytest.raises(RuntimeError, match="numpy"):
        ip.run_cell_magic("gpusight", "--warmup 1 --profile-steps 2", STEP.format(n=10))
    rep = last_report()
    assert rep is not None and rep.run is not None
    rep.validate()
    error = rep.run["error"]
    assert error["measured_steps"] == 0 and error["in_forward"] is True
    # The loop's line in the watched cell (%%gpusight is its line 1), the raise in the earlier
    # cell's forward.
    assert error["call"]["file"] == "cell" and error["call"]["line"] == 3
    assert "model(torch.randn(2, 32))" in error["call"]["code"]
    assert error["function"] == "Net.forward" and ".numpy()" in error["source"]["code"]
    assert [f.id for f in rep.findings] == ["code.raised"]
    assert rep.verdict.summary.startswith("The watched code raised RuntimeError at ")


def test_cell_interrupted_is_restored_and_shows_report(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    ip.run_cell(SETUP).raise_error()
    before = snapshot()
    cell = STEP.format(n=10) + "    if i == 6:\n        raise KeyboardInterrupt\n"
    with pytest.raises(KeyboardInterrupt):
        ip.run_cell_magic("gpusight", "--warmup 1 --profile-steps 1", cell)
    assert snapshot() == before
    rep = last_report()
    assert rep is not None and rep.run is not None and rep.run["steps"] >= 1
    assert any("interrupted" in n for n in rep.notes)
    # The partial report was displayed before the interrupt propagated.
    assert "interrupted after" in capsys.readouterr().out


def test_usage_errors(ip: Any) -> None:
    with pytest.raises(UsageError):
        ip.run_cell_magic("gpusight", "--steps 0", "pass\n")
    with pytest.raises(UsageError):
        ip.run_cell_magic("gpusight", "--bogus", "pass\n")


def test_json_written(ip: Any, tmp_path: Any) -> None:
    ip.run_cell(SETUP).raise_error()
    out = tmp_path / "r.json"
    cell = STEP.format(n=20)
    rep = ip.run_cell_magic(
        "gpusight", f"--steps 2 --warmup 0 --profile-steps 0 --json {out}", cell
    )
    from gpusight.report import load_report

    assert load_report(out)["run"]["steps"] == 2 == rep.run["steps"]


def test_json_never_writes_over_the_users_code_and_is_checked_before_the_cell_runs(
    ip: Any, tmp_path: Any
) -> None:
    """The command line's output check, in the notebook: ``--json utils.py`` once overwrote the
    user's module, and a missing folder raised a traceback after the whole cell had run."""
    ip.run_cell("ran = 0").raise_error()
    code = tmp_path / "utils.py"
    code.write_text("def helper():\n    return 1\n")
    before = code.read_bytes()
    for target, says in ((code, "a .py file is code"), (tmp_path / "no" / "r.json", "no such")):
        with pytest.raises(UsageError, match=says):
            ip.run_cell_magic("gpusight", f"--steps 2 --json {target}", "ran += 1\n")
    assert code.read_bytes() == before
    assert ip.user_ns["ran"] == 0  # refused before the cell ran


def test_a_report_write_that_fails_is_said_not_raised(
    ip: Any, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    ip.run_cell(SETUP).raise_error()
    folder = tmp_path / "out"
    folder.mkdir()
    # The folder goes away while the cell runs: the cell's report is still its result.
    cell = f"import shutil\nshutil.rmtree({str(folder)!r})\n" + STEP.format(n=12)
    rep = ip.run_cell_magic(
        "gpusight", f"--steps 2 --warmup 0 --profile-steps 0 --json {folder / 'r.json'}", cell
    )
    assert rep.run["steps"] == 2
    assert "could not write" in capsys.readouterr().err


def test_cell_lines_when_the_magic_line_was_added_for_the_user(ip: Any) -> None:
    # The sidebar's "watch next cell" prefixes `%%gpusight --first-line 1`: the user's cell has
    # no magic line, so the sync stands on its 6th line, not the 7th.
    ip.user_ns["ds"] = SlowDataset()
    ip.run_cell(SETUP + "loader = DataLoader(ds, batch_size=2)\n").raise_error()
    rep = ip.run_cell_magic(
        "gpusight", "--steps 2 --warmup 1 --profile-steps 0 --first-line 1", TRAIN
    )
    assert isinstance(rep, Report) and rep.run is not None
    sync = rep.run["syncs"][0]
    assert sync["source"]["file"] == "cell" and sync["source"]["line"] == 6


def test_a_model_compiled_in_place_in_an_earlier_cell_is_seen(ip: Any) -> None:
    """``model.compile()`` in one cell, inference in a ``%%gpusight`` cell: the watch finds the
    model in the notebook's namespace (its hooks would run inside the compiled call, unseen)."""
    ip.run_cell(
        SETUP + "model.eval().compile(backend='eager')\nx = torch.randn(2, 32)\n"
    ).raise_error()
    rep = ip.run_cell_magic(
        "gpusight",
        "--steps 20 --warmup 2 --profile-steps 0",
        "with torch.no_grad():\n    for _ in range(200):\n        model(x)\n",
    )
    assert rep.run is not None and rep.run["steps"] == 20
    assert rep.run["kernels"]["step_mode"] == "forward"
