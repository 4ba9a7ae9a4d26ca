"""``gpusight run --what-if`` on real scripts (CPU torch, real processes)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from gpusight.cli import main
from gpusight.report_schema import validate

LOADER_BOUND = """
import sys, time, torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

class Slow(Dataset):
    def __len__(self): return 100000
    def __getitem__(self, i):
        time.sleep(0.004)  # 64 ms per batch of 16 in the main process
        return torch.randn(16), i % 4

def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Slow(), batch_size=16)
    if loader.num_workers and "--crash-with-workers" in sys.argv:
        raise RuntimeError("this script cannot use workers")
    for i, (x, y) in enumerate(loader):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        if i == 400: break

if __name__ == "__main__":
    main()
"""


def _what_if(tmp_path: Path, *extra: str, budget: float = 150.0) -> tuple[dict, float]:
    script = tmp_path / "train.py"
    script.write_text(LOADER_BOUND)
    out = tmp_path / "r.json"
    t = time.monotonic()
    code = main(
        ["run", "--quiet", "--what-if", "--budget", str(budget), "--steps", "8",
         "--json", str(out), str(script), *extra]
    )  # fmt: skip
    wall = time.monotonic() - t
    assert code == 0
    rep = json.loads(out.read_text())
    validate(rep)
    return rep, wall


@pytest.mark.slow
def test_what_if_measures_the_worker_change_end_to_end(tmp_path: Path) -> None:
    budget = 150.0
    rep, wall = _what_if(tmp_path, budget=budget)
    # The budget holds (a run in flight may finish past it by its own timeout's margin).
    assert wall <= budget + 30.0
    rows = {r["change"]: r for r in rep["what_if"]}
    workers = rows.get("DataLoader num_workers=2, persistent_workers=True")
    assert workers is not None and workers.get("skipped") is None, rep["what_if"]
    assert workers["scope"] == "end_to_end"
    # Two workers build two batches at once: the loader-bound step gets faster.
    assert workers["speedup"] > 1.2
    # The DataLoader's other settings then run on the winning workers, judged against them.
    on_top = rows.get(
        "DataLoader prefetch_factor=4 on top of DataLoader num_workers=2, persistent_workers=True"
    )
    assert on_top is not None, list(rows)
    if on_top.get("skipped") is None:
        assert on_top["params"]["stacked_on"] == "DataLoader num_workers=2, persistent_workers=True"
    note = next(n for n in rep["notes"] if n.startswith("what-if:"))
    assert "budget" in note and "noise" in note
    f = next(f for f in rep["findings"] if f["id"] == "load.input_bound")
    assert f["impact"]["basis"] == "measured"
    assert rep["findings"][0]["impact"]["basis"] == "measured"


@pytest.mark.slow
def test_a_change_that_crashes_the_script_is_a_skipped_row(tmp_path: Path) -> None:
    rep, _ = _what_if(tmp_path, "--crash-with-workers", budget=90.0)
    row = next(
        r
        for r in rep["what_if"]
        if r["change"] == "DataLoader num_workers=2, persistent_workers=True"
    )
    assert row["skipped"] and "cannot use workers" in row["skipped"]
    f = next(f for f in rep["findings"] if f["id"] == "load.input_bound")
    assert f["impact"]["basis"] == "estimated"


def test_what_if_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "s.py"
    script.write_text("print(1)\n")
    assert main(["run", "--what-if", "--budget", "0", str(script)]) == 2
    assert main(["run", "--what-if", "--budget", "nan", str(script)]) == 2
    err = capsys.readouterr().err
    assert "--budget must be a positive number" in err and "Traceback" not in err


def test_what_if_on_a_script_without_steps_runs_no_changes(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text("print(1)\n")
    out = tmp_path / "r.json"
    assert main(["run", "--quiet", "--what-if", "--json", str(out), str(script)]) == 0
    rep = json.loads(out.read_text())
    assert rep["verdict"]["bottleneck"] == "none"
    assert rep["what_if"] == []


def test_what_if_exits_1_when_the_script_fails(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text("raise RuntimeError('broken before the first step')\n")
    assert main(["run", "--quiet", "--what-if", "--budget", "30", str(script)]) == 1


@pytest.mark.slow
def test_the_readme_terminal_loop_runs_to_the_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """README: ``--what-if --json before.json --patch fix.diff``, then ``--verify fix.diff
    --report before.json``, then ``patch -p1``. The what-if's re-runs are in a scratch copy,
    gone by the time the fixes are written: the patch is still of the user's own line, with the
    measured setting."""
    import shutil
    import subprocess

    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(LOADER_BOUND)
    # The loader's change alone (the batch sweep would only add runs to this loop).
    code = main(["run", "--what-if", "--try", "workers", "--budget", "60", "--steps", "8",
                 "--json", "before.json", "--patch", "fix.diff", "train.py"])  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().err
    diff = (tmp_path / "fix.diff").read_text()
    rep = json.loads((tmp_path / "before.json").read_text())
    row = next(
        r
        for r in rep["what_if"]
        if r["change"] == "DataLoader num_workers=2, persistent_workers=True"
    )
    assert row["speedup"] > 1.2
    assert "-    loader = DataLoader(Slow(), batch_size=16)\n" in diff
    assert (
        "+    loader = DataLoader(Slow(), batch_size=16, num_workers=2, persistent_workers=True)\n"
        in diff
    )
    # The first screen shows the measured change as the user's line, and the next command.
    assert (
        "+    loader = DataLoader(Slow(), batch_size=16, num_workers=2, persistent_workers=True)"
        in printed
    )
    nxt = r"next: gpusight run --verify \S*fix\.diff --report \S*before\.json train\.py"
    assert re.search(nxt, printed), printed

    assert main(["run", "--verify", "fix.diff", "--report", "before.json", "--steps", "8",
                 "--html", "after.html", "train.py"]) == 0  # fmt: skip
    verified = capsys.readouterr().out
    # The patched run's page, as --html gives it on any run (it used to write nothing).
    assert "gpusight" in (tmp_path / "after.html").read_text()
    assert "measured" in verified.lower() and "predicted" in verified.lower(), verified
    assert (tmp_path / "train.py").read_text() == LOADER_BOUND  # verify changed nothing
    patch = shutil.which("patch")
    if patch is not None:
        subprocess.run([patch, "-p1", "-i", "fix.diff"], cwd=tmp_path, check=True,
                       capture_output=True)  # fmt: skip
        assert (
            "DataLoader(Slow(), batch_size=16, num_workers=2, persistent_workers=True)"
            in (tmp_path / "train.py").read_text()
        )
