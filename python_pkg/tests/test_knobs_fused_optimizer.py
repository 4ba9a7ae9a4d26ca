"""An optimizer that updates its tensors one at a time: what the watch records of it, the finding
with the user's optimizer line patched to ``fused=True``, and the knob that measures it in a
re-run (real CPU torch: its Adam, AdamW and SGD take ``fused=True`` on the CPU too)."""

from __future__ import annotations

import ast
import inspect
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from gpusight.fixes import diff_apply
from gpusight.knobs import by_name, plan_groups, took_effect
from gpusight.rerun.inject import install
from gpusight.rules.workload import (
    CodeSource,
    GpuWindow,
    OptimizerInfo,
    Placement,
    WorkloadEvidence,
    analyse,
)
from gpusight.watch.report_builder import optimizer_info
from gpusight.watch.session import Watch
from torch import nn


class Tower(nn.Module):
    """Many small layers: 160 parameter tensors, each a few kernels per optimizer step."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(16, 16) for _ in range(80))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = x + torch.tanh(layer(x))
        return x


def test_the_watch_records_the_optimizer_and_its_line() -> None:
    torch.manual_seed(0)
    model = Tower()
    with Watch(steps=6) as w:
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)  # BUILT
        x = torch.randn(8, 16)
        for _ in range(40):
            loss = model(x).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    info = optimizer_info(w)
    assert info is not None
    assert (info.name, info.tensors, info.foreach, info.fused, info.cuda) == (
        "Adam",
        160,
        False,
        None,
        False,
    )
    lines, start = inspect.getsourcelines(test_the_watch_records_the_optimizer_and_its_line)
    built = start + next(i for i, t in enumerate(lines) if "# BUILT" in t)
    assert info.source is not None and info.source.line == built
    assert Path(info.source.path).name == Path(__file__).name
    rec = w.recorder
    assert rec is not None
    # Each measured step's time in optimizer.step() is within its own framework time.
    timed = [
        (r.optimizer_ns, r.framework_ns) for r in rec.records if r.phase == "measure" and r.full
    ]
    assert timed and all(0 < opt_ns <= framework_ns for opt_ns, framework_ns in timed)


SCRIPT = """\
import torch
model = torch.nn.Linear(4, 4)
opt = torch.optim.AdamW(
    model.parameters(),
    lr=3e-4,
    foreach=True,
)
"""


def _launch_bound(optimizer: OptimizerInfo, opt_ms: float) -> WorkloadEvidence:
    return WorkloadEvidence(
        step_mode="optimizer",
        step_times_ms=[55.0] * 6,
        cuda_available=True,
        cuda_devices=1,
        window=GpuWindow(
            steps=3,
            gpu=True,
            split_ms={"compute": 12.0, "launch_overhead": 39.0, "other_cpu": 4.0},
            launches_per_step=5200,
            median_kernel_us=3.0,
        ),
        placement=Placement(
            module="Tower", param_devices=["cuda"], input_devices=["cuda"], batch_size=512
        ),
        optimizer=optimizer,
        optimizer_ms=opt_ms,
    )


def test_a_per_tensor_optimizer_is_found_and_its_line_gets_fused() -> None:
    src = CodeSource("train.py", SCRIPT, 3)
    info = OptimizerInfo("AdamW", 800, True, None, True, src)
    res = analyse(_launch_bound(info, 30.0))
    f = next(f for f in res.findings if f.id == "load.optimizer_unfused")
    assert f.severity == "warn"  # 30 ms of a 55 ms step, but an estimate from 1.12x (the rule)
    assert "800 parameter tensors" in f.title and f.impact.speedup_range is not None
    lo, hi = f.impact.speedup_range
    assert 1.0 < lo < hi < 55.0 / (55.0 - 30.0) + 1e-9
    assert f.fix.patch is not None and f.fix.patch_files
    (diff,) = diff_apply.parse(f.fix.patch)
    patched = diff_apply.apply(SCRIPT, diff)
    call = ast.parse(patched).body[2].value  # type: ignore[attr-defined]
    keywords = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    assert keywords == {"lr": 3e-4, "foreach": None, "fused": True}
    # Built with a loop over the tensors: the larger share of its time comes back.
    loop = analyse(_launch_bound(OptimizerInfo("AdamW", 800, False, None, True, src), 30.0))
    g = next(f for f in loop.findings if f.id == "load.optimizer_unfused")
    assert g.impact.speedup_range is not None and g.impact.speedup_range[0] > lo
    assert "one tensor at a time" in g.title


@pytest.mark.parametrize(
    ("info", "opt_ms"),
    [
        (OptimizerInfo("AdamW", 800, False, True, True), 30.0),  # fused already
        (OptimizerInfo("AdamW", 800, False, None, False), 30.0),  # on the CPU
        (OptimizerInfo("RMSprop", 800, False, None, True), 30.0),  # takes no fused=True
        (OptimizerInfo("AdamW", 20, False, None, True), 30.0),  # too few tensors
        (OptimizerInfo("AdamW", 800, False, None, True), 2.0),  # a small share of the step
    ],
)
def test_no_finding_where_fusing_cannot_help(info: OptimizerInfo, opt_ms: float) -> None:
    res = analyse(_launch_bound(info, opt_ms))
    assert all(f.id != "load.optimizer_unfused" for f in res.findings)


def _facts(**optimizer: object) -> dict[str, object]:
    base = {"name": "AdamW", "tensors": 800, "foreach": False, "fused": None, "cuda": True}
    return {
        "cuda": True,
        "optimizer": {**base, **optimizer},
        "breakdown_ms": {"compute": 12.0, "launch_overhead": 39.0, "other_cpu": 4.0},
        "model": {"name": "Tower"},
    }


def test_the_plan_measures_fused_only_where_it_can_take_effect() -> None:
    group = next(g for g in plan_groups(_facts()) if g.name == "fused_optimizer")
    assert group.arms[0].changes == {"fused_optimizer": True}
    assert "AdamW" in group.arms[0].label
    for other in (_facts(fused=True), _facts(cuda=False), _facts(name="RMSprop")):
        assert not [g for g in plan_groups(other) if g.name == "fused_optimizer"]
    assert took_effect({"injected": {}}, {"fused_optimizer": True}) is not None
    assert took_effect({"injected": {"fused_optimizer": 1}}, {"fused_optimizer": True}) is None


def test_the_knob_builds_the_scripts_optimizer_fused_and_leaves_torch_as_found() -> None:
    before = {n: vars(getattr(torch.optim, n))["__init__"] for n in ("Adam", "AdamW", "SGD")}
    inj = install({"fused_optimizer": True})
    try:
        model = Tower()
        adam = torch.optim.Adam((p for p in model.parameters()), lr=1e-3, foreach=True)
        assert adam.defaults["fused"] is True and not adam.defaults["foreach"]
        assert len(adam.param_groups[0]["params"]) == 160  # the generator read once
        sgd = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        assert sgd.defaults["fused"] is True
        # Not fusable (differentiable updates take no fused kernels): built as asked.
        plain = torch.optim.Adam(model.parameters(), lr=1e-3, differentiable=True)
        assert not plain.defaults.get("fused")
        assert inj.applied.get("fused_optimizer") == 2
        x = torch.randn(4, 16)
        model(x).square().mean().backward()
        adam.step()  # the fused update runs
    finally:
        inj.undo()
    after = {n: vars(getattr(torch.optim, n))["__init__"] for n in ("Adam", "AdamW", "SGD")}
    assert after == before


def test_the_measured_fix_patches_the_line_the_facts_name(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    knob = by_name("fused_optimizer")
    assert knob is not None
    arm = next(g for g in plan_groups(_facts()) if g.name == "fused_optimizer").arms[0]
    facts = _facts(foreach=True, site={"file": str(script), "shown": "train.py", "line": 3})
    fix = knob.fix(arm, 8, facts)
    assert fix.patch is not None
    (diff,) = diff_apply.parse(fix.patch)
    call = ast.parse(diff_apply.apply(SCRIPT, diff)).body[2].value  # type: ignore[attr-defined]
    assert {k.arg: ast.literal_eval(k.value) for k in call.keywords} == {
        "lr": 3e-4,
        "foreach": None,
        "fused": True,
    }
    assert fix.code is not None and "fused=True" in fix.code
    ast.parse(fix.code)


def test_a_rerun_with_the_change_builds_the_scripts_own_optimizer_fused(tmp_path: Path) -> None:
    """End to end: ``gpusight run --inject`` on an unmodified script, which prints what it
    built; the facts say the change took effect once."""
    script = tmp_path / "train_adam.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch
            model = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(4)])
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
            for _ in range(12):
                model(torch.randn(2, 8)).sum().backward()
                opt.step()
                opt.zero_grad()
            print("FUSED", opt.defaults["fused"])
            """
        )
    )
    facts = tmp_path / "facts.json"
    cmd = [sys.executable, "-m", "gpusight", "run", "--inject", '{"fused_optimizer": true}',
           "--facts", str(facts), "--json", str(tmp_path / "r.json"), str(script)]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert "FUSED True" in out.stdout, out.stderr[-2000:]
    data = json.loads(facts.read_text())
    assert data["injected"].get("fused_optimizer") == 1
    assert data["optimizer"]["name"] == "AdamW" and data["optimizer"]["fused"] is True
    assert data["optimizer"]["site"]["line"] == 4


def test_its_fix_renders_in_a_process_that_imported_only_the_fixes_package() -> None:
    # A re-run's parent (``gpusight run --what-if``) builds the knob's fix without the watch's
    # rules ever importing ``fixes.workload``: its snippets must be known all the same.
    import subprocess
    import sys

    code = (
        "from gpusight.fixes import fix\n"
        "f = fix('x', 'optim.fused', site='train.py:3', name='Adam', tensors=800)\n"
        "print('fused=True' in f.code)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"
