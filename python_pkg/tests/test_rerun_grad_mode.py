"""``gpusight run --what-if`` on an inference loop that records autograd history: the grad_mode
knob re-runs it with ``torch.inference_mode()`` around the model's calls (CPU torch, real
processes), and a script that then writes into a model output in place says it crashed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gpusight.cli import main
from gpusight.knobs import Situation, by_name
from gpusight.report_schema import validate

SERVE = """
import sys, torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(*[m for _ in range(6) for m in (nn.Linear(256, 256), nn.ReLU())])
requests = [torch.randn(64, 256) for _ in range(8)]
total = 0.0
for i in range(600):
    out = model(requests[i % 8])  # no torch.no_grad(): autograd records every op
    if "--scale-in-place" in sys.argv:
        out *= 0.5
    total += float(out[0, 0])
print(total)
"""


def _what_if(tmp_path: Path, *extra: str) -> dict:
    script = tmp_path / "serve.py"
    script.write_text(SERVE)
    out = tmp_path / "r.json"
    code = main(
        ["run", "--quiet", "--what-if", "--try", "grad_mode", "--budget", "90", "--steps", "20",
         "--json", str(out), str(script), *extra]
    )  # fmt: skip
    assert code == 0
    rep = json.loads(out.read_text())
    validate(rep)
    return rep


def test_grad_mode_is_planned_for_a_forward_loop_that_records_history_only() -> None:
    knob = by_name("grad_mode")
    assert knob is not None
    forward = {"step_mode": "forward", "finding_ids": ["infer.grad_enabled"]}
    (group,) = knob.groups(Situation.of(forward))
    assert [a.changes for a in group.arms] == [{"inference_mode": True}]
    assert knob.groups(Situation.of({**forward, "finding_ids": []})) == []
    training = {"step_mode": "optimizer", "finding_ids": ["infer.grad_enabled"]}
    assert knob.groups(Situation.of(training)) == []
    assert "trains" in knob.not_planned(Situation.of(training))


@pytest.mark.slow
def test_an_inference_loop_is_rerun_under_inference_mode(tmp_path: Path) -> None:
    rep = _what_if(tmp_path)
    assert "infer.grad_enabled" in {f["id"] for f in rep["findings"]}
    row = next(r for r in rep["what_if"] if "inference_mode" in r["change"])
    assert row.get("skipped") is None, row
    assert row["scope"] == "end_to_end" and row["speedup"] > 0
    assert row["finding_id"] == "infer.grad_enabled"


@pytest.mark.slow
def test_a_script_that_writes_into_an_output_in_place_says_the_change_crashed_it(
    tmp_path: Path,
) -> None:
    rep = _what_if(tmp_path, "--scale-in-place")
    row = next(r for r in rep["what_if"] if "inference_mode" in r["change"])
    assert row["skipped"] and "Inplace update to inference tensor" in row["skipped"], row
    assert row.get("speedup") is None
