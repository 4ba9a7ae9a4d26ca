"""What a what-if row says it measured (rerun/results.py), on outcomes made of plain runs."""

from __future__ import annotations

from pathlib import Path

from gpusight.report import Report
from gpusight.rerun.driver import Outcome, RunResult
from gpusight.rerun.plan import Arm
from gpusight.rerun.results import _fix_for, apply


def _result(label: str, changes: dict[str, object], step_ms: float, **injected: int) -> RunResult:
    run = {"steps": 20, "step_time_ms": step_ms, "items_per_step": 32,
           "step_times_ms": [step_ms] * 20}  # fmt: skip
    return RunResult(label, changes, True, 5.0, {"run": run}, {"injected": injected})


def _moved(**injected: int) -> Report:
    arm = Arm("to_device", "model and batches on the GPU", {"to_device": "cuda"}, "code.cpu_model")
    out = Outcome(baseline=_result("baseline", {}, 20.0), control=None, noise_pct=1.0)
    out.arms = [(arm, _result("moved", arm.changes, 5.0, to_device=1, **injected))]
    rep = Report(kind="watch", machine={"platform": "x", "python": "3", "cpu_count": 2,
                                        "gpus": []})  # fmt: skip
    apply(rep, out)
    rep.validate()
    return rep


def test_a_moved_model_whose_outputs_came_back_says_the_fix_gains_more() -> None:
    f = _moved(outputs_back=20).finding("code.cpu_model")
    assert f is not None and f.impact.basis == "measured" and f.impact.speedup == 4.0
    assert "copied back to the CPU every step" in f.impact.text


def test_a_moved_model_whose_outputs_stayed_says_nothing_more() -> None:
    f = _moved().finding("code.cpu_model")
    assert f is not None and f.impact.speedup == 4.0
    assert "copied back" not in f.impact.text


def _moved_twice(together_ms: float | None) -> Report:
    """The moved model measured alone (4x) and again as the only member of the winners."""
    arm = Arm("to_device", "model and batches on the GPU", {"to_device": "cuda"}, "code.cpu_model")
    out = Outcome(baseline=_result("baseline", {}, 20.0), control=None, noise_pct=1.0)
    out.arms = [(arm, _result("moved", arm.changes, 5.0, to_device=1))]
    again = None if together_ms is None else _result("together", arm.changes, together_ms)
    out.together = ([arm], again)
    rep = Report(kind="watch", machine={"platform": "x", "python": "3", "cpu_count": 2,
                                        "gpus": []})  # fmt: skip
    apply(rep, out)
    rep.validate()
    return rep


def test_a_change_measured_again_as_the_only_winner_keeps_one_gain() -> None:
    rep = _moved_twice(4.0)
    f = rep.finding("code.cpu_model")
    assert f is not None and f.impact.speedup == 4.0
    together = rep.what_if[-1]
    assert together.params is not None and together.params["repeat_of"] == rep.what_if[0].change
    assert together.fix is None and together.speedup == 5.0  # kept as data, shown as no gain
    assert "Measured again in another run (all winners together: model and batches" in (
        f.impact.text
    )
    assert "5.00x" in f.impact.text and "5.00" not in f.title
    # The verdict names the change's own gain, not the second run's.
    assert "4.00x faster" in rep.verdict.summary and "5.00x" not in rep.verdict.summary


def test_a_skipped_winners_run_gives_no_number() -> None:
    rep = _moved_twice(None)
    together = rep.what_if[-1]
    assert together.skipped == "over the budget"
    assert together.speedup is None and together.after_ms is None and together.fix is None
    f = rep.finding("code.cpu_model")
    assert f is not None and f.impact.speedup == 4.0 and "again" not in f.impact.text


CONV = """import torch
from torch import nn

model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(2, 3, 8, 8)
for _ in range(3):
    out = model(x)
    out.sum().backward()
    opt.step()
"""


def test_a_measured_channels_last_is_a_patch_of_the_scripts_model_and_input(
    tmp_path: Path,
) -> None:
    # conv_nchw_amp on the H200: the what-if measured channels_last, and its row's fix (which
    # stands for the finding's) was a generic snippet with no patch.
    script = tmp_path / "train.py"
    script.write_text(CONV)
    arm = Arm("channels_last", "channels_last for the model and its inputs",
              {"channels_last": True}, "load.channels_last")  # fmt: skip
    site = {"file": str(script), "shown": "train.py", "line": 8}
    facts = {"forward_site": site, "model": {"has_conv": True, "input_channels_last": False}}
    f = _fix_for(arm, 2, facts)
    assert f.patch is not None and f.patch_files and f.patch_files[0].path == "train.py"
    assert "+model = model.to(memory_format=torch.channels_last)" in f.patch
    assert "+    out = model(x.contiguous(memory_format=torch.channels_last))" in f.patch
    # An input the watch did not see in NCHW is left as it is (it may not be 4-d).
    facts["model"]["input_channels_last"] = None
    assert "contiguous" not in (_fix_for(arm, 2, facts).patch or "")


CPU_MODEL = """import torch
from torch import nn


def main():
    model = nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    xs, ys = torch.randn(4, 2, 8), torch.randint(0, 2, (4, 2))
    for i in range(10):
        x, y = xs[i % 4], ys[i % 4]
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
"""


def test_a_measured_to_device_is_a_patch_of_the_scripts_model_and_batch(tmp_path: Path) -> None:
    # cpu_model on the H200: the what-if measured the model on the GPU, and its row's fix (which
    # stands for the finding's) was the generic placement snippet.
    script = tmp_path / "train.py"
    script.write_text(CPU_MODEL)
    arm = Arm("to_device", "model and batches on the GPU", {"to_device": "cuda"}, "code.cpu_model")
    site = {"file": str(script), "shown": "train.py", "line": 11}
    f = _fix_for(arm, 2, {"forward_site": site})
    assert f.patch is not None and f.patch_files and f.patch_files[0].path == "train.py"
    assert '+    model = model.to("cuda")' in f.patch
    assert (
        '+        x, y = x.to("cuda", non_blocking=True), y.to("cuda", non_blocking=True)'
        in f.patch
    )
    assert f.code  # the snippet stays beside it
    # A model called on a dict's entries: no patch, the snippet alone.
    script.write_text(CPU_MODEL.replace("model(x)", "model(x['a'])"))
    g = _fix_for(arm, 2, {"forward_site": site})
    assert g.patch is None and g.code


def test_a_measured_compile_says_its_compile_time_apart_from_its_gain() -> None:
    arm = Arm("compile", "torch.compile(model, mode='reduce-overhead')",
              {"compile": "reduce-overhead"}, "load.launch_bound")  # fmt: skip
    base = _result("baseline", {}, 2.0)
    control = _result("control", {}, 2.0)
    control.facts = {"warmup_step_ms": [2.0, 2.0, 2.0]}
    compiled = _result("compiled", arm.changes, 1.0, compile=1)
    # Three steps as the control's, the compile in the third, then six compiled steps.
    compiled.facts = {"injected": {"compile": 1},
                      "warmup_step_ms": [2.0, 2.0, 12_002.0, *[1.0] * 6]}  # fmt: skip
    out = Outcome(baseline=base, control=control, noise_pct=2.0)
    out.arms = [(arm, compiled)]
    rep = Report(kind="watch", machine={"platform": "x", "python": "3", "cpu_count": 2,
                                        "gpus": []})  # fmt: skip
    apply(rep, out)
    rep.validate()
    (row,) = rep.what_if
    assert row.speedup == 2.0
    assert row.params is not None and row.params["compile_s"] == 12.0
    assert row.params["break_even_steps"] == 12_000.0  # 12 s over 1 ms saved a step
    f = rep.finding("load.launch_bound")
    assert f is not None and f.impact.basis == "measured" and f.impact.speedup == 2.0
    assert "Compiling took 12.0 s once, at the start; it pays for itself after about 12,000" in (
        f.impact.text
    )
    assert f.fix is not None and "mode='reduce-overhead'" in (f.fix.code or "")


def _workers_outcome(*control_ms: float) -> Report:
    """A compute-bound script diagnosed at 6.3 ms a step; its controls at ``control_ms``; the
    workers arm at 8.1 ms (as on a busy 2-core machine, issue #48)."""
    arm = Arm("workers", "DataLoader num_workers=2", {"num_workers": 2}, "load.input_bound")
    first, *more = (_result("control", {}, ms) for ms in control_ms)
    out = Outcome(baseline=_result("baseline", {}, 6.3), control=first, noise_pct=2.0)
    out.controls = list(more)
    out.arms = [(arm, _result("workers", arm.changes, 8.1, num_workers=2))]
    rep = Report(kind="watch", machine={"platform": "x", "python": "3", "cpu_count": 2,
                                        "gpus": []})  # fmt: skip
    apply(rep, out)
    rep.validate()
    return rep


def test_controls_another_load_slowed_leave_no_measured_gain() -> None:
    rep = _workers_outcome(61.2, 52.0, 89.0)
    (row,) = rep.what_if
    assert row.speedup is None and row.skipped is not None
    assert row.skipped.startswith("not measured: the machine was too noisy")
    assert "61.2, 52.0, 89.0 ms a step against 6.3 ms" in row.skipped
    assert all(f.impact.basis != "measured" for f in rep.findings)
    assert "Measured" not in rep.verdict.summary
    assert any("too noisy" in n for n in rep.notes)


def test_controls_that_agree_with_the_diagnosed_run_keep_the_rows() -> None:
    rep = _workers_outcome(6.0, 6.2)
    (row,) = rep.what_if
    assert row.skipped is None and row.speedup is not None and row.speedup < 1.0


def test_a_batch_set_through_the_scripts_argument_says_how_in_its_row() -> None:
    arg = {"option": "--batch-size", "value": 128, "was": 32}
    arm = Arm("batch", "--batch-size 128 (the script's batch argument)", {"script_arg": arg},
              "load.small_batch", items_factor=4.0)  # fmt: skip
    out = Outcome(baseline=_result("baseline", {}, 20.0), control=None, noise_pct=1.0)
    out.arms = [(arm, _result("batch", arm.changes, 40.0))]
    rep = Report(kind="watch", machine={"platform": "x", "python": "3", "cpu_count": 2,
                                        "gpus": []})  # fmt: skip
    row = apply(rep, out).what_if[0]
    assert (row.params or {}).get("set_script_arg") == "--batch-size 128"
    assert "set_script_arg" not in (apply(rep, _moved_outcome()).what_if[0].params or {})


def _moved_outcome() -> Outcome:
    arm = Arm("to_device", "model and batches on the GPU", {"to_device": "cuda"}, "code.cpu_model")
    out = Outcome(baseline=_result("baseline", {}, 20.0), control=None, noise_pct=1.0)
    out.arms = [(arm, _result("moved", arm.changes, 5.0))]
    return out


def _workers_lost(arm_ms: float) -> Report:
    """The rule's input-bound finding, and a workers arm measured at ``arm_ms`` per step."""
    from gpusight.report import Finding, Fix

    arm = Arm("workers", "DataLoader num_workers=2", {"num_workers": 2}, "load.input_bound")
    out = Outcome(baseline=_result("baseline", {}, 10.0), control=None, noise_pct=5.0)
    out.arms = [(arm, _result("workers", arm.changes, arm_ms))]
    rep = Report(kind="watch", machine={"platform": "x", "python": "3", "cpu_count": 2,
                                        "gpus": []})  # fmt: skip
    rep.findings.append(Finding(id="load.input_bound", severity="warn", title="starved",
                                fix=Fix(text="more workers")))  # fmt: skip
    apply(rep, out)
    rep.validate()
    return rep


def test_a_fix_measured_slower_says_slower_not_within_the_noise() -> None:
    f = _workers_lost(26.0).finding("load.input_bound")
    assert f is not None and f.impact.basis == "measured"
    assert (f.impact.speedup or 1.0) < 0.4
    assert "slower beyond the noise (±5.0%)" in f.impact.text
    assert "within the noise" not in f.impact.text
    g = _workers_lost(10.2).finding("load.input_bound")
    assert g is not None and "within the noise (±5.0%): not significant" in g.impact.text
