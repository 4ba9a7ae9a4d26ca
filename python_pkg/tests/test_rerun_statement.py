"""Measure the line (issue #50): ``gpusight run --what-if`` re-runs the script with its costliest
statement skipped or run every 10 or 100 steps, in a copy holding that change, and hands the change
over as the patch; ``--verify`` of that patch measures about the same gain. A statement whose
value the loop reads later is refused with the reason. Real CPU torch, the CLI as users run
it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from gpusight.cli import main

HEAD = """\
import gc
import numpy as np
import torch
from torch import nn

torch.set_num_threads(1)
torch.manual_seed(0)
# A step of about 30 ms on one core: the collector (about 100 ms with torch loaded) a few times
# that, so that the gain is a few x and the comparison of two runs is not one of 1 ms steps.
model = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
"""
# The training loop's head and its step, each script's costly statement after it.
LOOP = """\
for step in range(400):
    x = torch.randn(512, 512)
    loss = nn.functional.cross_entropy(model(x), torch.randint(0, 10, (512,)))
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

GC_EVERY_STEP = (
    HEAD
    + LOOP
    + """\
    gc.collect()
"""
)

HISTOGRAMS = (
    HEAD
    + 'log = open("hist.log", "w")\n'
    + LOOP
    + """\
    for name, p in model.named_parameters():
        counts, edges = np.histogram(np.tile(p.detach().numpy().ravel(), 4), bins=100)
        log.write(f"{step} {name} {counts.tolist()}\\n")
"""
)

READ_LATER = (
    HEAD
    + LOOP
    + """\
    v = float(np.sort(np.sin(np.arange(400_000) * loss.item()))[0])
    if v > 1e9:
        break
"""
)


def _what_if(tmp_path: Path, source: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(source, encoding="utf-8")
    code = main(["run", "--quiet", "--what-if", "--try", "statement", "--budget", "90",
                 "--steps", "10", "--json", "before.json", "--patch", "fix.diff",
                 "train.py"])  # fmt: skip
    assert code == 0
    assert (tmp_path / "train.py").read_text(encoding="utf-8") == source
    return json.loads((tmp_path / "before.json").read_text(encoding="utf-8"))


def _row(rep: dict[str, Any]) -> dict[str, Any]:
    rows = [r for r in rep["what_if"] if (r.get("params") or {}).get("group") == "statement"]
    assert rows, rep["what_if"]
    return rows[0]


def _verified(capsys: pytest.CaptureFixture[str]) -> dict[str, float]:
    """--verify's figures: its gain, its noise band (%), and the ms per step of the original
    and the patched script."""
    capsys.readouterr()
    assert main(["run", "--verify", "fix.diff", "--report", "before.json", "--steps", "10",
                 "train.py"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    got = re.search(r"measured: ([0-9.]+)x items per second \(noise ±([0-9.]+)%\)", out)
    ms = re.findall(r"steps, ([0-9.]+) ms/step\)", out)
    assert got and len(ms) == 2, out
    return {"gain": float(got[1]), "noise": float(got[2]), "before_ms": float(ms[0]),
            "after_ms": float(ms[1])}  # fmt: skip


def _agree(v: dict[str, float], row: dict[str, Any]) -> None:
    """--verify saves what the row said the change saves per step (#50): within 20 %, or
    within the two measurements' noise bands together (in ms of the step) where those are
    wider. Compared as time saved, not as two ratios: a statement that is most of the step
    leaves a fast step whose few ms of jitter on this 2-core machine swing a 10x ratio by a
    third (8.71x against 11.52x once)."""
    saved_row = float(row["before_ms"]) - float(row["after_ms"])
    saved = v["before_ms"] - v["after_ms"]
    noise_ms = (v["noise"] + float(row.get("noise_pct") or 0.0)) / 100.0 * v["before_ms"]
    assert saved > 0 and abs(saved - saved_row) <= max(0.2 * saved_row, noise_ms), (v, row)


def _line(source: str, text: str) -> int:
    return next(i for i, ln in enumerate(source.splitlines(), 1) if text in ln)


@pytest.mark.slow
def test_a_gc_collect_every_step_is_measured_skipped_and_verify_agrees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rep = _what_if(tmp_path, GC_EVERY_STEP, monkeypatch)
    row = _row(rep)
    n = _line(GC_EVERY_STEP, "gc.collect()")
    assert row["change"] == f"line {n} `gc.collect()` skipped"
    assert row.get("skipped") is None and row["speedup"] > 2.0, row
    diff = (tmp_path / "fix.diff").read_text(encoding="utf-8")
    assert "-    gc.collect()\n" in diff and "\n+" not in diff.split("+++", 1)[1]
    f = next(f for f in rep["findings"] if f["id"] == "load.cpu_preprocessing")
    assert f["impact"]["basis"] == "measured"
    assert f["fix"]["text"].startswith(f"Remove train.py:{n} (`gc.collect()`) from the loop")
    _agree(_verified(capsys), row)


@pytest.mark.slow
def test_a_histogram_of_every_parameter_runs_less_often_and_verify_agrees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rep = _what_if(tmp_path, HISTOGRAMS, monkeypatch)
    row = _row(rep)
    n = _line(HISTOGRAMS, "for name, p in")
    # The loop is thinned whole, its lines said.
    assert re.match(
        rf"lines {n}-{n + 2} `for name, p in model\.named_parameters\(\):", row["change"]
    )
    # Every 100 steps where the re-run's window holds three of them, else every 10.
    every = re.search(r"every (10|100) steps$", row["change"])
    assert every, row["change"]
    assert row.get("skipped") is None and row["speedup"] > 1.5, row
    diff = (tmp_path / "fix.diff").read_text(encoding="utf-8")
    n = every[1]
    assert f"+    if step % {n} == 0:  # gpusight: every {n} steps\n" in diff
    assert "+        for name, p in model.named_parameters():\n" in diff
    _agree(_verified(capsys), row)


@pytest.mark.slow
def test_a_value_the_loop_reads_later_is_refused_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rep = _what_if(tmp_path, READ_LATER, monkeypatch)
    row = _row(rep)
    n = _line(READ_LATER, "v = float(")
    assert row["change"].startswith(f"line {n} `v = float(")
    assert row["speedup"] is None
    assert f"line {n} assigns `v`, which other code of the loop reads" in row["skipped"]
    assert not (tmp_path / "fix.diff").exists() or "v = float" not in (
        tmp_path / "fix.diff"
    ).read_text(encoding="utf-8")
