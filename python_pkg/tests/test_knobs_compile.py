"""The compile knob: its arms, the CUDA-graph safety check, its compile time and ``--try``.

The baselines are real watched runs of real CPU torch (``gpusight run --facts``); this machine
has no GPU, so the facts are then read as a launch-bound GPU run would give them, and torch's
sync-debug warning (what a GPU run's ``.item()`` raises) is raised where the script syncs.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from gpusight.cli import main
from gpusight.knobs import Situation, by_name, extra_warmup
from gpusight.knobs.compile import Compile, compile_s
from gpusight.knobs.graph_safety import blockers, staying_syncs
from gpusight.rerun.driver import Driver, RunResult
from gpusight.rerun.inject import Injected, InjectError, check
from gpusight.rerun.plan import Arm

SCRIPT = """\
import warnings

import torch
from torch import nn

SYNC = "called a synchronizing CUDA operation"


class Gate(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(16, 16)
        self.b = nn.Linear(16, 4)

    def forward(self, x):
        h = self.a(x)
        if GATED and h.mean().item() > -1e9: warnings.warn(SYNC)  # GATE
        return self.b(h)


GATED = {gated}
torch.manual_seed(0)
model = Gate()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(200):
    x = torch.randn(8, 16)
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    seen = loss.item(); warnings.warn(SYNC)  # LOG
"""


def _line(source: str, marker: str) -> int:
    return next(i for i, ln in enumerate(source.splitlines(), 1) if ln.endswith(marker))


def _baseline(tmp_path: Path, gated: bool) -> tuple[str, dict[str, Any]]:
    source = SCRIPT.format(gated=gated)
    script = tmp_path / "train.py"
    script.write_text(source)
    facts = tmp_path / "facts.json"
    assert main(["run", "--quiet", "--steps", "12", "--facts", str(facts), str(script)]) == 0
    return source, json.loads(facts.read_text())


def _on_a_gpu(facts: dict[str, Any]) -> dict[str, Any]:
    """The same facts as a launch-bound GPU run would give them."""
    model = {**facts["model"], "param_devices": ["cuda"], "input_devices": ["cuda"]}
    split = {"launch_overhead": 6.0, "compute": 3.0, "other_cpu": 1.0}
    return {**facts, "cuda": True, "model": model, "breakdown_ms": split,
            "finding_ids": ["load.launch_bound"]}  # fmt: skip


def _arms(facts: dict[str, Any]) -> dict[str, Arm]:
    groups = Compile().groups(Situation.of(facts))
    assert [g.name for g in groups] == ["compile"]
    return {str(a.changes["compile"]): a for a in groups[0].arms}


@pytest.mark.slow
def test_a_sync_inside_the_model_refuses_cuda_graphs_and_names_its_line(tmp_path: Path) -> None:
    source, facts = _baseline(tmp_path, gated=True)
    gate, log = _line(source, "# GATE"), _line(source, "# LOG")
    syncs = {s["line"]: s for s in facts["syncs"]}
    # Both syncs seen at their lines; only the one in the forward counted inside the model.
    assert syncs[gate]["in_model"] > 0 and syncs[gate]["in_model"] == syncs[gate]["count"]
    assert syncs[log]["count"] > 0 and syncs[log]["in_model"] == 0

    arms = _arms(_on_a_gpu(facts))
    assert arms["default"].skipped is None  # compiling alone is still measured
    why = arms["reduce-overhead"].skipped or ""
    assert why.startswith("CUDA graphs are unsafe here")
    assert f"train.py:{gate}" in why and "h.mean().item()" in why
    assert f"train.py:{log}" not in why  # the logging read outside the model is no blocker


@pytest.mark.slow
def test_without_syncs_in_the_model_both_modes_run(tmp_path: Path) -> None:
    source, facts = _baseline(tmp_path, gated=False)
    g = _on_a_gpu(facts)
    assert blockers(g) == []
    arms = _arms(g)
    assert arms["default"].skipped is None and arms["reduce-overhead"].skipped is None
    # What stays in the step whatever the graph: the loop's own read.
    (stays,) = staying_syncs(g)
    assert stays.endswith(f"train.py:{_line(source, '# LOG')}")
    # One input shape a call: nothing to record again.
    assert facts["model"]["input_shapes"] == [[8, 16]]
    assert facts["compiled"] is False


def test_the_safety_check_reads_shapes_and_placement() -> None:
    base = {"cuda": True, "breakdown_ms": {"launch_overhead": 5.0, "compute": 5.0}}
    ragged = {**base, "model": {"name": "Net", "param_devices": ["cuda"],
                                "input_shapes": [[8, 31], [8, 40], [8, 57]]}}  # fmt: skip
    (b,) = blockers(ragged)
    assert "input shape changes" in b.text() and "8x31" in b.text()
    # An epoch's last, shorter batch is one more shape, not a blocker.
    two = {**ragged, "model": {**ragged["model"], "input_shapes": [[8, 31], [3, 31]]}}
    assert blockers(two) == []
    on_cpu = {**base, "model": {"name": "Net", "param_devices": ["cpu"]}}
    assert "on the CPU" in blockers(on_cpu)[0].text()


def test_no_compile_arm_where_it_cannot_help() -> None:
    busy = {"cuda": True, "model": {"name": "Net"}, "breakdown_ms": {"compute": 95.0,
            "launch_overhead": 5.0}}  # fmt: skip
    assert Compile().groups(Situation.of(busy)) == []
    launch = {**busy, "breakdown_ms": {"compute": 40.0, "launch_overhead": 60.0}}
    assert Compile().groups(Situation.of(launch))  # launch-bound: planned
    assert Compile().groups(Situation.of({**launch, "compiled": True})) == []
    assert Compile().groups(Situation.of({**launch, "cuda": False})) == []
    dp = {**launch, "model": {"name": "DataParallel"}}
    assert Compile().groups(Situation.of(dp)) == []


def test_compile_time_and_break_even_come_from_the_warm_up() -> None:
    # Control: 3 warm-up steps of 10 ms. Compiled: 9, of which the third compiled for 30 s.
    ref = {"warmup_step_ms": [10.0, 10.0, 10.0]}
    arm = {"warmup_step_ms": [10.0, 10.0, 30_010.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0]}
    assert compile_s(arm, ref, 4.0) == pytest.approx((30_054.0 - 30.0 - 6 * 4.0) / 1000.0)
    got = Compile().cost(arm, ref, 4.0, 10.0)
    assert got["compile_s"] == pytest.approx(30.0, abs=0.05)
    assert got["break_even_steps"] == 5000.0  # 30 s over 6 ms saved a step
    assert Compile().cost(arm, ref, 12.0, 10.0) == {"compile_s": pytest.approx(30.0, abs=0.1)}
    assert Compile().cost({}, ref, 4.0, 10.0) == {}


def test_the_compiled_runs_warm_up_longer_and_the_budget_counts_the_compile() -> None:
    assert extra_warmup({"compile": "default"}) == Compile.extra_warmup > 0
    assert extra_warmup({"autocast": "bfloat16"}) == 0
    control = RunResult("control", {}, True, 10.0, report={"run": {"step_time_ms": 5.0,
                        "steps": 20}})  # fmt: skip
    d = Driver(lambda *a: control, budget_s=100.0, warmup=3)  # type: ignore[arg-type]
    plain = d.forecast_s(control, Arm("tf32", "", {"tf32": True}))
    compiled = d.forecast_s(control, Arm("compile", "", {"compile": "default"}, extra_s=60.0))
    assert compiled == pytest.approx(plain + 60.0 + Compile.extra_warmup * 0.005)


def test_modes_are_checked() -> None:
    assert check({"compile": "reduce-overhead"})
    with pytest.raises(InjectError, match="compile must be one of"):
        check({"compile": "max-speed"})


def test_prepare_compiles_the_forward_and_undo_restores_it() -> None:
    model = torch.nn.Linear(4, 2)
    bound = model.forward

    hooks = SimpleNamespace(torch=torch, changes={"compile": "default"},
                            inj=Injected({"compile": "default"}))  # fmt: skip
    knob = by_name("compile")
    assert knob is not None
    knob.prepare(hooks, model)
    assert model.forward is not bound and hasattr(model.forward, "_torchdynamo_orig_callable")
    assert hooks.inj.applied == {"compile": 1}
    hooks.inj.undo()
    assert "forward" not in vars(model) and model.forward == bound


def test_try_takes_known_knobs_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "t.py"
    script.write_text("print('never run')\n")
    assert main(["run", "--what-if", "--try", "compile,warp", str(script)]) == 2
    err = capsys.readouterr().err
    assert "--try: unknown change(s) warp" in err and "compile" in err


@pytest.mark.slow
def test_the_fix_compiles_the_model_where_the_script_makes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fix is the user's file with ``model.compile()`` after the line that makes the model
    (in place: the state_dict keeps its keys), the mode as the row measured it; none where the
    script compiles it already."""
    from gpusight.fixes.diff_apply import apply, parse

    source, facts = _baseline(tmp_path, gated=False)
    arms = _arms(_on_a_gpu(facts))
    # As a run started in the script's folder names it (a diff names relative paths).
    facts["forward_site"]["shown"] = "train.py"
    monkeypatch.chdir(tmp_path)
    for mode, line in (("default", "model.compile()"),
                       ("reduce-overhead", "model.compile(mode='reduce-overhead')")):  # fmt: skip
        fix = Compile().fix(arms[mode], 8, facts)
        assert fix.patch is not None, fix
        (diff,) = parse(fix.patch)
        after = apply(source, diff).splitlines()
        assert after[after.index("model = Gate()") + 1] == line
        assert line in fix.text
    (tmp_path / "train.py").write_text(
        source.replace("model = Gate()\n", "model = Gate()\nmodel.compile()\n")
    )
    assert Compile().fix(arms["default"], 8, facts).patch is None


def test_through_the_trainer_the_fix_is_its_own_switch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpusight.fixes.diff_apply import apply, parse

    script = 'args = TrainingArguments(output_dir="out", bf16=True)\ntrainer = Trainer(args=args)\n'
    (tmp_path / "train.py").write_text(script)
    monkeypatch.chdir(tmp_path)
    facts = {"framework": "transformers", "command": {"script": "train.py", "args": []}}
    arm = Arm(
        "compile", "torch.compile(model, mode='reduce-overhead')", {"compile": "reduce-overhead"}
    )
    fix = Compile().fix(arm, 8, facts)
    assert fix.patch is not None and fix.code is not None and "torch_compile=True" in fix.code
    (diff,) = parse(fix.patch)
    out = apply(script, diff)
    assert "torch_compile=True" in out and "torch_compile_mode='reduce-overhead'" in out
