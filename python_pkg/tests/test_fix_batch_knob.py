"""A larger batch as a patch of the knob that sets a hand-cut batch's width (fixes/batch_knob.py,
``load.small_batch`` / ``infer.unbatched`` without a DataLoader): several shapes of code, the
shapes that get no patch, the finding and the measured what-if row that carry it, and the public
scenario patched with ``patch -p1`` and run on the CPU."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpusight.fixes.batch_knob import batch_knob_text
from gpusight.fixes.cell_patch import CellSource
from gpusight.fixes.patch_files import text_sha256
from gpusight.fixes.statement_patches import compiles
from gpusight.rerun.plan import Arm
from gpusight.rerun.results import _fix_for
from gpusight.rules.workload import (
    BREAKDOWN_KEYS,
    CodeSource,
    GpuWindow,
    Placement,
    WorkloadEvidence,
    analyse,
)
from scenario_support import SCENARIOS, apply_patch, copy_scenario, run_scenario, watch_scenario

NOTE = "  # a larger batch: the same launches, more items"


def line_of(source: str, text: str) -> int:
    return next(i for i, ln in enumerate(source.splitlines(), 1) if text in ln)


def knobbed(source: str, call: str = "model(xb)", batch: int = 256) -> str | None:
    return batch_knob_text(source, line_of(source, call), batch)


RANGE_STEP = """import torch

model = Net()
bs = 8
for i in range(0, len(X), bs):
    xb = X[i : i + bs]
    out = model(xb)
"""


def test_a_range_loop_sets_its_step_after_the_knobs_binding() -> None:
    new = knobbed(RANGE_STEP)
    assert new == RANGE_STEP.replace("bs = 8\n", f"bs = 8\nbs = 256{NOTE}\n")


def test_the_loop_variable_with_any_upper_bound_takes_the_ranges_step() -> None:
    src = RANGE_STEP.replace("X[i : i + bs]", "X[i : min(i + bs, len(X))]")
    assert f"bs = 256{NOTE}" in (knobbed(src) or "")
    # The loop strides by one width, the slice takes another: no one knob to change.
    odd = RANGE_STEP.replace("len(X), bs)", "len(X), 8)")
    assert knobbed(odd) is None


def test_a_start_plus_width_slice_stacked_and_moved_in_a_while_loop() -> None:
    src = (
        "def serve(model, reqs, dev):\n"
        "    group = 4 if dev == 'cpu' else 1\n"
        "    i = 0\n"
        "    while i < 100:\n"
        "        start = (i * group) % len(reqs)\n"
        "        batch = torch.stack(reqs[start : start + group]).to(dev)\n"
        "        out = model(batch)\n"
        "        i += 1\n"
    )
    new = knobbed(src, "model(batch)", 64) or ""
    assert f"    group = 4 if dev == 'cpu' else 1\n    group = 64{NOTE}\n    i = 0\n" in new


def test_a_scaled_slice_and_a_moved_name_followed_back() -> None:
    src = (
        "bs = 16\n"
        "for i in range(len(X) // bs):\n"
        "    xb = X[i * bs:(i + 1) * bs]\n"
        "    xb = xb.to(dev).float()\n"
        "    loss = crit(model(xb), Y[i * bs:(i + 1) * bs])\n"
    )
    assert f"bs = 16\nbs = 256{NOTE}\nfor i" in (knobbed(src) or "")


def test_a_slice_on_the_forward_line_itself() -> None:
    src = "bs = 2\nfor i in range(0, n, bs):\n    out = model(X[i:i + bs, :3])\n"
    assert f"bs = 2\nbs = 256{NOTE}\n" in (knobbed(src, "model(X") or "")


def test_an_attribute_knob_goes_after_what_binds_its_object_or_it() -> None:
    src = (
        "import argparse\n"
        "def main():\n"
        "    args = parse()\n"
        "    model = Net()\n"
        "    for i in range(0, len(X), args.batch_size):\n"
        "        xb = X[i : i + args.batch_size]\n"
        "        model(xb)\n"
    )
    new = knobbed(src) or ""
    assert f"    args = parse()\n    args.batch_size = 256{NOTE}\n    model = Net()\n" in new
    set_later = src.replace("    model = Net()\n", "    model = Net()\n    args.batch_size = 8\n")
    assert f"    args.batch_size = 8\n    args.batch_size = 256{NOTE}\n" in (
        knobbed(set_later) or ""
    )


def test_a_notebook_like_cell_with_torch_under_another_name() -> None:
    cell = (
        "import torch as T\n"
        "n = 1\n"
        "with T.inference_mode():\n"
        "    for s in range(0, len(reqs), n):\n"
        "        preds = net(T.stack(reqs[s : s + n]))\n"
    )
    new = batch_knob_text(cell, 5, 32) or ""
    assert new.startswith(f"import torch as T\nn = 1\nn = 32{NOTE}\nwith T.inference_mode():\n")


@pytest.mark.parametrize(
    ("source", "call", "why"),
    [
        (RANGE_STEP.replace("X[i : i + bs]", "X[i : i + 1]"), "model(xb)", "a literal width"),
        (
            "for i in range(0, len(X), 4):\n    xb = X[i : i + 4]\n    model(xb)\n",
            "model(xb)",
            "a literal in the range and the slice",
        ),
        (RANGE_STEP.replace("X[i : i + bs]", "X[i]"), "model(xb)", "no slice"),
        (RANGE_STEP.replace("X[i : i + bs]", "X[i : i + 2 * bs]"), "model(xb)", "an expression"),
        (RANGE_STEP.replace("X[i : i + bs]", "X[:bs]"), "model(xb)", "not a shape"),
        (RANGE_STEP.replace("bs = 8\n", "bs = 8\nbs *= 2\n"), "model(xb)", "not plainly bound"),
        (
            RANGE_STEP.replace("X[i : i + bs]", "cat([X[i : i + bs], Y[i : i + n]])"),
            "model(xb)",
            "slices that disagree",
        ),
        (
            RANGE_STEP.replace("    xb = X", "    bs = pick(i)\n    xb = X"),
            "model(xb)",
            "bound in the loop",
        ),
        (
            "def f(model, X, bs):\n    for i in range(0, len(X), bs):\n"
            "        model(X[i : i + bs])\n",
            "model(X",
            "a parameter never rebound",
        ),
        (
            "bs = 8\nxb = X[0 : 0 + bs]\nfor _ in range(3):\n    model(xb)\n",
            "model(xb)",
            "the input made before the loop",
        ),
        ("bs = 8\nxb = X[0 : bs]\nmodel(xb)\n", "model(xb)", "no loop"),
        (
            "bs = 8\nfor xb in chunks(X, bs):\n    model(xb)\n",
            "model(xb)",
            "the loop's own target",
        ),
    ],
)
def test_no_batch_knob_patch(source: str, call: str, why: str) -> None:
    assert batch_knob_text(source, line_of(source, call), 64) is None, why


UNBATCHED = (SCENARIOS / "unbatched_inference.py").read_text()
GROUP = "    group = args.batch or (64 if args.fix else 1)\n"


def test_the_unbatched_scenario_sets_its_group_after_the_line_that_binds_it() -> None:
    new = batch_knob_text(UNBATCHED, line_of(UNBATCHED, "model(batch)"), 64)
    assert new is not None and compiles(new)
    assert f"{GROUP}    group = 64{NOTE}\n    answers:" in new


def _launch_bound(mode: str, batch: int, src: CodeSource) -> WorkloadEvidence:
    """A GPU run whose small batches leave the step to the launches (as test_rules_workload)."""
    split = dict.fromkeys(BREAKDOWN_KEYS, 0.0)
    split.update(compute=0.3, launch_overhead=1.4, other_cpu=0.3)
    return WorkloadEvidence(
        step_mode=mode, step_times_ms=[2.0] * 6, cuda_available=True, cuda_devices=1,
        window=GpuWindow(steps=3, gpu=True, split_ms=split, launches_per_step=420),
        placement=Placement(module="Net", param_devices=["cuda"], input_devices=["cuda"],
                            batch_size=batch),
        forward_source=src,
    )  # fmt: skip


def _unbatched_evidence(source: str) -> WorkloadEvidence:
    src = CodeSource("unbatched.py", source, line_of(source, "model(batch)"))
    return _launch_bound("forward", 1, src)


def test_the_unbatched_finding_carries_the_patch_with_its_suggested_batch() -> None:
    f = next(f for f in analyse(_unbatched_evidence(UNBATCHED)).findings
             if f.id == "infer.unbatched").fix  # fmt: skip
    assert f.patch is not None and f.patch.startswith("--- a/unbatched.py\n")
    assert f"+    group = 64{NOTE}" in f.patch
    assert [(p.path, p.sha256) for p in f.patch_files or []] == [
        ("unbatched.py", text_sha256(UNBATCHED))
    ]
    assert f.code  # the snippet stays beside it
    # A literal width: the generic snippet alone.
    lit = UNBATCHED.replace("requests[start : start + group]", "requests[start : start + 1]")
    g = next(f for f in analyse(_unbatched_evidence(lit)).findings if f.id == "infer.unbatched")
    assert g.fix.patch is None and g.fix.code


def test_the_small_batch_finding_carries_the_knob_patch_without_a_loader() -> None:
    src = RANGE_STEP.replace(
        "    out = model(xb)", "    loss = model(xb).sum()\n    loss.backward()"
    )
    ev = _launch_bound("optimizer", 8, CodeSource("train.py", src, line_of(src, "model(xb)")))
    found = {f.id: f for f in analyse(ev).findings}
    assert "load.small_batch" in found, sorted(found)
    assert f"+bs = 256{NOTE}" in (found["load.small_batch"].fix.patch or "")


def test_a_notebook_cells_finding_carries_the_cells_patch() -> None:
    cell = "n = 1\nfor s in range(0, len(reqs), n):\n    preds = net(T.stack(reqs[s : s + n]))"
    src = CellSource(cell, cell + "\n", 3, execution_count=4, torch_alias="T")
    ev = _launch_bound("forward", 1, CodeSource("<cell>", cell + "\n", 3, cell=src))
    f = next(f for f in analyse(ev).findings if f.id == "infer.unbatched").fix
    assert f.cell is not None and f.cell.label == "cell [4]"
    assert f.cell.patched.startswith(f"n = 1\nn = 64{NOTE}\nfor s in")


def test_a_measured_replicated_batch_row_is_a_patch_of_the_knob(tmp_path: Path) -> None:
    script = tmp_path / "serve.py"
    script.write_text(UNBATCHED)
    arm = Arm("batch", "16 requests per forward", {"replicate": 16}, "infer.unbatched")
    site = {"file": str(script), "shown": "serve.py", "line": line_of(UNBATCHED, "model(batch)")}
    f = _fix_for(arm, 2, {"forward_site": site})
    assert f.patch is not None and f.patch_files and f.patch_files[0].path == "serve.py"
    assert f"+    group = 32{NOTE}" in f.patch  # the baseline's 2 items, 16 times
    # With a DataLoader's batch_size to change, the row stays the loader's patch (none here).
    sized = Arm("batch", "batch 32", {"batch_size": 32}, "infer.unbatched")
    assert _fix_for(sized, 2, {"forward_site": site}).patch is None


LIGHTNING_FIT = """\
import lightning as L
from torch.utils.data import DataLoader


class Classifier(L.LightningModule):
    def training_step(self, batch, batch_idx):
        x, y = batch
        return self.loss(self(x), y)


trainer = L.Trainer(max_epochs=3)
trainer.fit(Classifier(), DataLoader(ds, batch_size=256, shuffle=True))
"""


def test_a_replicated_batch_row_where_a_framework_feeds_the_model_patches_its_loader(
    tmp_path: Path,
) -> None:
    """Lightning calls the model in ``training_step`` with the batch of the user's DataLoader:
    no knob of the user's cuts it, so the row's fix is that DataLoader's batch_size, not a
    template with names the script does not have."""
    script = tmp_path / "train.py"
    script.write_text(LIGHTNING_FIT)
    arm = Arm("batch", "4096 items per forward", {"replicate": 16}, "load.small_batch")
    fwd = {"file": str(script), "shown": "train.py", "line": line_of(LIGHTNING_FIT, "self(x)")}
    loader = {**fwd, "line": line_of(LIGHTNING_FIT, "trainer.fit(")}
    f = _fix_for(arm, 256, {"forward_site": fwd, "loader_site": loader})
    assert f.patch is not None, f.text
    assert "+trainer.fit(Classifier(), DataLoader(ds, batch_size=4096, shuffle=True))" in f.patch
    # Without the loader's site, no patch: the text alone, never another script's names.
    assert _fix_for(arm, 256, {"forward_site": fwd}).patch is None


@pytest.mark.slow
def test_the_scenarios_patch_from_a_watched_run_applies_and_runs_on_the_cpu(
    tmp_path: Path,
) -> None:
    # The whole path: the watch finds infer.unbatched on the CPU, `--patch` writes the knob's
    # diff, `patch -p1` applies it, and the patched script serves 64 requests per forward.
    copy_scenario("unbatched_inference", tmp_path)
    watched = watch_scenario(
        tmp_path, "--steps", "16", "--profile-steps", "0", "--patch", "fix.diff",
        "unbatched_inference.py", "--iters", "60", "--device", "cpu",
    )  # fmt: skip
    assert watched.returncode == 0, watched.stderr[-2000:]
    diff = (tmp_path / "fix.diff").read_text()
    assert f"+    group = 64{NOTE}" in diff, diff
    apply_patch(tmp_path)
    patched = (tmp_path / "unbatched_inference.py").read_text()
    assert patched == batch_knob_text(UNBATCHED, line_of(UNBATCHED, "model(batch)"), 64)
    assert compiles(patched)
    result = run_scenario(
        tmp_path, "unbatched_inference", "--device", "cpu", "--iters", "4", "--warmup", "1"
    )
    assert result["samples_per_step"] == 64
