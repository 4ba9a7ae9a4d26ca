"""Debugging switches a watched script ran its steps with (``rules/debug_switches.py``): found in
the watch's own report, not only by ``gpusight check``, and put first where they slowed a GPU's
every step."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from gpusight.cli import main
from gpusight.report import sort_findings
from gpusight.rules.debug_switches import MEASURED_WITH, debug_switches
from thread_support import one_thread  # noqa: F401 (autouse: one torch thread)

OFF = {"anomaly_detection": False, "deterministic_algorithms": False, "cudnn.deterministic": False}


def test_each_switch_on_is_a_finding_and_the_costly_ones_are_critical_on_a_gpu() -> None:
    assert debug_switches(OFF, {"CUDA_LAUNCH_BLOCKING": "0"}, gpu=True) == []
    on = {**OFF, "anomaly_detection": True, "deterministic_algorithms": True}
    found = {f.id: f for f in debug_switches(on, {"CUDA_LAUNCH_BLOCKING": "1"}, gpu=True)}
    assert set(found) == {"cfg.anomaly_detection", "cfg.deterministic", "env.launch_blocking"}
    assert found["cfg.anomaly_detection"].severity == "critical"
    assert found["env.launch_blocking"].severity == "critical"
    assert found["cfg.deterministic"].severity == "warn"  # its cost is the model's ops'
    assert MEASURED_WITH in (found["cfg.anomaly_detection"].detail or "")
    assert [f.id for f in sort_findings(list(found.values()))][:2] == [
        "cfg.anomaly_detection",
        "env.launch_blocking",
    ]
    # As information (a check's "unset"), a lead's id leads nothing.
    info = found["env.launch_blocking"]
    info.severity = "info"
    assert sort_findings([info, found["cfg.deterministic"]])[0].id == "cfg.deterministic"
    # Without a GPU no launch blocks, and anomaly detection costs the CPU's steps less.
    cpu = {f.id: f for f in debug_switches(on, {"CUDA_LAUNCH_BLOCKING": "1"}, gpu=False)}
    assert set(cpu) == {"cfg.anomaly_detection", "cfg.deterministic"}
    assert cpu["cfg.anomaly_detection"].severity == "warn"


SCRIPT = """\
import torch
from torch import nn

torch.autograd.set_detect_anomaly(True)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(40):
    loss = model(torch.randn(8, 16)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_script_that_turns_anomaly_detection_on_itself_is_told_first(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SCRIPT)
    out = tmp_path / "r.json"
    was = torch.is_anomaly_enabled()
    try:
        assert (
            main(["run", "--quiet", "--steps", "8", "--json", str(out), str(tmp_path / "train.py")])
            == 0
        )
    finally:
        torch.autograd.set_detect_anomaly(was)  # the script's own switch, in this process
    rep = json.loads(out.read_text())
    ids = [f["id"] for f in rep["findings"]]
    assert ids[0] == "cfg.anomaly_detection", ids
    assert rep["findings"][0]["fix"]["snippet_id"] == "torch.anomaly_off"
