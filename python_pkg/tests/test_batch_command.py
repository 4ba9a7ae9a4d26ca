"""A larger batch fixed by the command that passes the script's own batch option: where
``gpusight run`` saw the script take its batch size on its command line, the findings that
grow the batch give that command, not a number written over the option in its DataLoader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gpusight.cli import main
from gpusight.report import Report
from gpusight.rules.workload import analyse
from gpusight.rules.workload_evidence import (
    CodeSource,
    GpuWindow,
    LoaderInfo,
    Placement,
    WorkloadEvidence,
)
from gpusight.script_command import BatchCommand
from thread_support import one_thread  # noqa: F401 (autouse: one torch thread)

TRAIN = (
    "import argparse\n"
    "from torch.utils.data import DataLoader\n"
    "p = argparse.ArgumentParser()\n"
    "p.add_argument('-b', '--batch-size', type=int, default=4)\n"
    "args = p.parse_args()\n"
    "loader = DataLoader(ds, batch_size={size}, shuffle=True)\n"
)


def _launch_bound(size: str, cmd: BatchCommand | None) -> Report:
    """The findings of a launch-bound GPU step at batch 4 (this machine has no GPU)."""
    ev = WorkloadEvidence(
        step_mode="optimizer", step_times_ms=[2.0] * 6, cuda_available=True, cuda_devices=1
    )
    ev.window = GpuWindow(
        steps=3,
        gpu=True,
        split_ms={"compute": 0.3, "copy": 0.1, "launch_overhead": 1.4, "other_cpu": 0.2},
        launches_per_step=420,
        median_kernel_us=4.0,
    )
    ev.placement = Placement(
        module="MLP", param_devices=["cuda"], input_devices=["cuda"], batch_size=4
    )
    ev.loader = LoaderInfo(num_workers=2, pin_memory=True, batch_size=4)
    ev.loader_source = CodeSource("train.py", TRAIN.format(size=size), 6)
    ev.batch_command = cmd
    rep = Report(kind="watch", machine={"platform": "x", "python": "3", "cpu_count": 2, "gpus": []})
    rep.findings = analyse(ev).findings
    return rep


def test_a_small_batch_set_by_the_scripts_option_is_fixed_by_its_command() -> None:
    cmd = BatchCommand(
        "--batch-size", 4, "train.py", ["--lr", "0.1", "-b", "4"], ["-b", "--batch-size"]
    )
    f = _launch_bound("args.batch_size", cmd).finding("load.small_batch")
    assert f is not None
    assert f.fix.language == "shell" and f.fix.code == "python train.py --lr 0.1 -b 256"
    assert f.fix.text == "Run the script with --batch-size 256 (and scale the learning rate)."
    assert f.fix.patch is None  # no number written over the option the script reads


def test_the_loader_call_is_changed_where_the_option_does_not_set_the_batch() -> None:
    # A number in the DataLoader call sets the batch: the option sizes something else.
    cmd = BatchCommand("--batch-size", 4, "train.py", [], ["-b", "--batch-size"])
    f = _launch_bound("4", cmd).finding("load.small_batch")
    assert f is not None and f.fix.language == "python"
    assert "+loader = DataLoader(ds, batch_size=256, shuffle=True)" in (f.fix.patch or "")
    # The option's value is not the batch the model saw (a global batch split across ranks).
    split = BatchCommand("--batch-size", 32, "train.py", [], ["--batch-size"])
    f = _launch_bound("args.batch_size // 8", split).finding("load.small_batch")
    assert f is not None and f.fix.language == "python" and f.fix.patch
    # No command line (a notebook cell): the DataLoader call, as before.
    f = _launch_bound("args.batch_size", None).finding("load.small_batch")
    assert f is not None and "batch_size=256" in (f.fix.patch or "")


INFER = (
    "import argparse\n"
    "import torch\n"
    "from torch import nn\n"
    "p = argparse.ArgumentParser()\n"
    "p.add_argument('--batch-size', '-b', type=int, default=1)\n"
    "p.add_argument('--requests', type=int, default=400)\n"
    "args = p.parse_args()\n"
    "model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).eval()\n"
    "queue = torch.randn(args.requests, 32)\n"
    "with torch.no_grad():\n"
    "    for i in range(0, args.requests, args.batch_size):\n"
    "        out = model(queue[i : i + args.batch_size])\n"
)


def test_one_request_per_forward_is_fixed_by_the_command_the_script_ran_with(
    tmp_path: Path,
) -> None:
    script = tmp_path / "serve.py"
    script.write_text(INFER)
    out = tmp_path / "r.json"
    code = main(["run", "--quiet", "--json", str(out), str(script), "--requests", "300", "-b", "1"])
    assert code == 0
    rep = json.loads(out.read_text())
    f = next(f for f in rep["findings"] if f["id"] == "infer.unbatched")
    # The user's spelling of the option replaced, the other arguments kept; no learning rate
    # to scale in inference.
    assert f["fix"]["code"] == f"python {script} --requests 300 -b 64"
    assert f["fix"]["language"] == "shell"
    assert f["fix"]["text"] == "Run the script with --batch-size 64."
    assert script.read_text() == INFER


SMALL_TRAIN = (
    "import argparse\n"
    "import torch\n"
    "p = argparse.ArgumentParser()\n"
    "p.add_argument('--batch-size', type=int, default=8)\n"
    "args = p.parse_args()\n"
    "model = torch.nn.Linear(4, 2)\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "for _ in range(30):\n"
    "    model(torch.randn(args.batch_size, 4)).sum().backward()\n"
    "    opt.step()\n"
    "    opt.zero_grad()\n"
)


def test_a_re_run_in_a_scratch_copy_names_the_script_as_the_user_ran_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The what-if runs a scratch copy of the folder: its fix's command is still the user's
    (``python train.py --batch-size 32``), never the copy's path, which is gone afterwards."""
    from gpusight.rerun import sandbox
    from gpusight.rerun.driver import ScriptRunner

    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(SMALL_TRAIN)
    monkeypatch.chdir(project)
    box = sandbox.make(str(project))
    try:
        runner = ScriptRunner("train.py", ["--batch-size", "8"], steps=5, warmup=1, sandbox=box)
        assert runner.script != "train.py"  # the copy's
        res = runner("baseline", {}, False, 120.0)
        assert res.ok, res.error
        assert res.facts is not None
        assert res.facts["command"] == {"script": "train.py", "args": ["--batch-size", "8"]}
    finally:
        runner.close()
        box.remove()


def test_a_measured_inference_batch_has_no_learning_rate_to_scale() -> None:
    from gpusight.knobs import by_name
    from gpusight.rerun.plan import Arm

    arg = {"option": "--batch-size", "aliases": ["--batch-size"], "value": 64, "was": 1}
    facts = {"command": {"script": "serve.py", "args": ["--batch-size", "1"]}}
    knob = by_name("batch")
    assert knob is not None
    for finding, said in (("infer.unbatched", ""), ("load.small_batch", " (and scale")):
        arm = Arm("batch", "--batch-size 64", {"script_arg": arg}, finding)
        f = knob.fix(arm, 1, facts)
        assert f.text.startswith(f"Run the script with --batch-size 64{said}")
        assert f.code == "python serve.py --batch-size 64"
