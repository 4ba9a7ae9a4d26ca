"""A measured step in which torch.compile compiled anew (an epoch's short last batch: a new
shape) is set apart: the watch marks it (``StepRecord.compiled``, the facts'
``recompiled_steps``) and says so in its report, and a re-run's step time and band count it at
the other steps' median, since compiling for a shape is paid once per shape, not every step
(``rerun/outcome.py``)."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from gpusight.rerun.outcome import RunResult

TRAIN = """import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
compiled = torch.compile(model, backend="eager")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(80):
    n = 9 if step % 25 == 24 else 16  # an epoch's short last batch, now and then
    loss = compiled(torch.randn(n, 32)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _watched(
    tmp_path: Path, source: str, key: str
) -> tuple[dict[str, Any], dict[str, Any], list[float], list[int]]:
    """The report and the what-if facts of ``source`` watched over 40 measured steps, its step
    times and the steps the facts' ``key`` marks."""
    (tmp_path / "train.py").write_text(source)
    cmd = [sys.executable, "-m", "gpusight", "run", "--quiet", "--steps", "40",
           "--json", "r.json", "--facts", "f.json", "train.py"]  # fmt: skip
    subprocess.run(cmd, cwd=tmp_path, check=True, timeout=300)
    report = json.loads((tmp_path / "r.json").read_text())
    facts = json.loads((tmp_path / "f.json").read_text())
    return report, facts, report["run"]["step_times_ms"], facts[key]


def test_a_recompile_inside_the_measured_steps_is_counted_once_not_every_step(
    tmp_path: Path,
) -> None:
    report, facts, xs, marked = _watched(tmp_path, TRAIN, "recompiled_steps")
    # One recompile: the first short batch (the later ones reuse the shape-general graph).
    assert len(marked) == 1
    others = [x for i, x in enumerate(xs) if i not in marked]
    assert xs[marked[0]] > 20 * statistics.median(others)
    # The watch's own report says so, with the mean step both ways.
    said = next(n for n in report["notes"] if "compiled anew" in n)
    assert said.startswith(f"torch.compile compiled anew in 1 measured step(s) ({marked[0] + 1};")
    assert "paid once per shape, not every step" in said
    res = RunResult("arm", {}, True, 1.0, report, facts)
    assert res.step_ms is not None
    assert res.step_ms < 1.5 * statistics.fmean(others) < statistics.fmean(xs)
    assert res.steady_times_ms[marked[0]] == statistics.median(others)
    # Without the mark, the same run reads the compile as every step's.
    bare = RunResult("arm", {}, True, 1.0, report, {**facts, "recompiled_steps": []})
    assert bare.step_ms is not None and bare.step_ms > 2 * res.step_ms
    assert bare.noise_pct() > res.noise_pct()


def test_a_run_drained_at_its_end_sets_the_recompile_apart_too() -> None:
    xs = [2.0, 2.1, 1.9, 2.0, 90.0, 2.0, 2.1, 1.9, 2.0, 2.0]
    run = {"step_time_ms": statistics.fmean(xs), "steps": len(xs), "step_times_ms": xs,
           "end_drain_ms": 1.0}  # fmt: skip
    res = RunResult("arm", {}, True, 1.0, {"run": run}, {"recompiled_steps": [4]})
    assert res.drained_mean_ms == (sum(xs) - 90.0 + 2.0 + 1.0) / len(xs)
    assert res.step_ms == res.drained_mean_ms


def test_the_report_says_which_runs_compiled_anew_in_their_measured_steps() -> None:
    from gpusight.report import Report
    from gpusight.rerun.driver import Outcome
    from gpusight.rerun.plan import Arm
    from gpusight.rerun.results import apply

    def result(label: str, xs: list[float], marked: list[int]) -> RunResult:
        run = {"steps": len(xs), "step_time_ms": statistics.fmean(xs), "items_per_step": 32,
               "step_times_ms": xs}  # fmt: skip
        return RunResult(label, {}, True, 5.0, {"run": run}, {"recompiled_steps": marked})

    arm = Arm("compile", "torch.compile(model)", {"compile": "default"}, "load.launch_bound")
    out = Outcome(baseline=result("baseline", [4.0] * 20, []),
                  control=result("control", [4.0] * 20, []), noise_pct=1.0)  # fmt: skip
    out.arms = [(arm, result("torch.compile(model)", [2.0] * 9 + [500.0] + [2.0] * 10, [9]))]
    rep = Report(kind="watch", machine={"platform": "x", "python": "3", "cpu_count": 2,
                                        "gpus": []})  # fmt: skip
    apply(rep, out)
    rep.validate()
    assert rep.what_if[0].speedup == 2.0  # not 0.15x: the compile is not every step's
    note = next(n for n in rep.notes if n.startswith("what-if: "))
    assert "torch.compile compiled anew in a measured step of torch.compile(model) (1)" in note


AUTOTUNED = """import time
import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)


class Tuned(torch.nn.Module):
    \"\"\"Pays once for each new batch shape, as cuDNN's autotuning with cudnn.benchmark.\"\"\"

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(32, 4)
        self.tuned = set()

    def forward(self, x):
        if x.shape not in self.tuned:
            self.tuned.add(x.shape)
            time.sleep(0.3)
        return self.lin(x)


data = DataLoader(TensorDataset(torch.randn(500, 32)), batch_size=16)  # the last batch: 4
model = Tuned()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(20):
    for (x,) in data:
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_an_epochs_short_last_batch_autotuned_once_is_counted_once_not_every_step(
    tmp_path: Path,
) -> None:
    report, facts, xs, marked = _watched(tmp_path, AUTOTUNED, "new_shape_steps")
    # Epochs end every 32 steps, but only the first short batch is a shape new to the run.
    assert len(marked) == 1, marked
    others = [x for i, x in enumerate(xs) if i not in marked]
    assert xs[marked[0]] > 20 * statistics.median(others)
    res = RunResult("arm", {}, True, 1.0, report, facts)
    assert res.new_shapes == marked and res.step_ms is not None
    assert res.step_ms < 1.5 * statistics.fmean(others) < statistics.fmean(xs)


def test_a_loader_of_many_shapes_has_none_set_apart() -> None:
    """Text of every length pays for each new shape as it comes: that is every step's cost."""
    xs = [2.0 + (i % 5) for i in range(40)]
    run = {"step_time_ms": statistics.fmean(xs), "steps": len(xs), "step_times_ms": xs}
    res = RunResult("arm", {}, True, 1.0, {"run": run}, {"new_shape_steps": list(range(0, 40, 3))})
    assert res.new_shapes == [] and res.steady_times_ms == xs
    rare = RunResult("arm", {}, True, 1.0, {"run": run}, {"new_shape_steps": [7, 30]})
    assert rare.new_shapes == [7, 30]
    assert rare.steady_times_ms[7] == statistics.median(
        [x for i, x in enumerate(xs) if i not in (7, 30)]
    )


def test_many_new_shapes_that_each_cost_a_one_off_are_set_apart() -> None:
    """bf16 attention in cuDNN builds a plan for each new sequence length: early in a run most
    steps are at a new length and cost several times a step at a length seen before."""
    xs = [30.0 if i % 3 else 300.0 for i in range(30)]  # every third step at a new length
    run = {"step_time_ms": statistics.fmean(xs), "steps": len(xs), "step_times_ms": xs}
    marked = list(range(0, 30, 3))
    res = RunResult("arm", {}, True, 1.0, {"run": run}, {"new_shape_steps": marked})
    assert res.shapes_cost_once and res.new_shapes == marked
    assert res.step_ms == 30.0
    # Too few steps at a length seen before to tell the steady step from.
    few = {"step_time_ms": 100.0, "steps": 8, "step_times_ms": xs[:8]}
    res = RunResult("arm", {}, True, 1.0, {"run": few}, {"new_shape_steps": [0, 3, 6, 7]})
    assert not res.shapes_cost_once and res.new_shapes == []


def padded_loop(model: str, data: str) -> str:
    """A training loop over ``data`` padded by the script's ``pad``, into ``model``'s class."""
    return (
        f"model = {model}()\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.01)\n"
        f"for batch in DataLoader({data}, batch_size=2, collate_fn=pad):\n"
        "    loss = model(**batch)\n"
        "    opt.zero_grad()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
    )


LENGTHS = """import random
import time
from collections import UserDict

import torch
from torch.utils.data import DataLoader

random.seed(0)
torch.manual_seed(0)


class Planned(torch.nn.Module):
    \"\"\"Pays once for each new sequence length, as cuDNN's attention plans in bf16.\"\"\"

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(100, 8)
        self.planned = set()

    def forward(self, input_ids):
        if input_ids.shape[1] not in self.planned:
            self.planned.add(input_ids.shape[1])
            time.sleep(0.05)
        return self.emb(input_ids).mean()


def pad(items):  # Hugging Face's collators return a BatchEncoding, a UserDict
    n = max(len(x) for x in items)
    return UserDict({"input_ids": torch.stack([torch.nn.functional.pad(x, (0, n - len(x)))
                                               for x in items])})


texts = [torch.randint(1, 100, (random.choice([8, 16, 24, 32, 40, 48]),)) for _ in range(4000)]
""" + padded_loop("Planned", "texts")


def test_a_text_loaders_lengths_each_paid_for_once_are_set_apart(tmp_path: Path) -> None:
    _, facts, xs, marked = _watched(tmp_path, LENGTHS, "new_shape_steps")
    assert marked  # a BatchEncoding-like mapping's shapes are seen
    report = json.loads((tmp_path / "r.json").read_text())
    res = RunResult("arm", {}, True, 1.0, report, facts)
    others = [x for i, x in enumerate(xs) if i not in marked]
    assert res.shapes_cost_once and res.new_shapes == marked
    assert res.step_ms is not None and res.step_ms < 1.5 * statistics.fmean(others)
    # The watch's own report says so, and what spares it.
    said = next(n for n in report["notes"] if "took a batch of a shape new to the run" in n)
    assert said.startswith(f"{len(marked)} of {len(xs)} measured steps")
    assert "padded to a few shapes (a multiple of 64)" in said


def test_a_loss_over_a_window_of_new_shapes_is_not_the_changes() -> None:
    """bf16 BERT at batch 16 on an H100: 9 measured steps, nearly all at a new sequence length,
    each building its attention plan: 896 ms a step against fp32's 99 (``h100-run36``). Too few
    steps at a length seen before to tell the steady step: the row says so, with no gain."""
    from gpusight.report import Report
    from gpusight.rerun.driver import Outcome
    from gpusight.rerun.plan import Arm
    from gpusight.rerun.results import apply

    def result(label: str, xs: list[float], marked: list[int]) -> RunResult:
        run = {"steps": len(xs), "step_time_ms": statistics.fmean(xs), "items_per_step": 16,
               "step_times_ms": xs}  # fmt: skip
        return RunResult(label, {}, True, 5.0, {"run": run}, {"new_shape_steps": marked})

    base = [99.0] * 20
    bf16 = Arm("autocast", "bf16 autocast", {"autocast": "bfloat16"}, "load.amp_unused")
    tf32 = Arm("tf32", "TF32", {"tf32": True}, "cfg.tf32_disabled")
    out = Outcome(baseline=result("baseline", base, []), control=result("control", base, []),
                  noise_pct=1.0)  # fmt: skip
    slow = result("bf16", [900.0, 850.0, 880.0, 300.0, 900.0, 860.0, 910.0, 870.0, 890.0],
                  [0, 1, 2, 4, 5, 6, 7, 8])  # fmt: skip
    fast = result("tf32", [60.0] * 9, [0, 1, 2, 4, 5, 6, 7, 8])  # a gain would stand
    out.arms = [(bf16, slow), (tf32, fast)]
    rep = Report(kind="watch", machine={"platform": "x", "python": "3", "cpu_count": 2,
                                        "gpus": []})  # fmt: skip
    apply(rep, out)
    rep.validate()
    row, kept = rep.what_if
    assert row.speedup is None and row.skipped is not None
    assert row.skipped.startswith("not measured steady: 8 of its 9 measured steps")
    assert kept.speedup == 1.65 and kept.skipped is None
    # With enough steps at a length seen before, the usual rule decides.
    settled = result("bf16", [900.0] * 3 + [80.0] * 17, [0, 1, 2])
    assert settled.shapes_unsettled is None


PAIRS = """import random
import time

import torch
from torch.utils.data import DataLoader

random.seed(0)
torch.manual_seed(0)


class CrossPlanned(torch.nn.Module):
    \"\"\"Pays once for each new (source, target) length pair, as a seq2seq decoder's
    cross-attention plans in bf16.\"\"\"

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(100, 8)
        self.planned = set()

    def forward(self, input_ids, labels):
        key = (input_ids.shape[1], labels.shape[1])
        if key not in self.planned:
            self.planned.add(key)
            time.sleep(0.05)
        return self.emb(input_ids).mean() + self.emb(labels).mean()


def pad(pairs):  # DataCollatorForSeq2Seq pads sources and labels each to its own longest
    def stack(xs):
        n = max(len(x) for x in xs)
        return torch.stack([torch.nn.functional.pad(x, (0, n - len(x))) for x in xs])
    return {"input_ids": stack([s for s, _ in pairs]), "labels": stack([t for _, t in pairs])}


pairs = [(torch.randint(1, 100, (random.choice([8, 16, 24]),)),
          torch.randint(1, 100, (random.choice([4, 8, 12, 16]),))) for _ in range(4000)]
""" + padded_loop("CrossPlanned", "pairs")


def test_a_seq2seq_batch_is_new_where_its_target_length_is(tmp_path: Path) -> None:
    """A seq2seq batch's source and target lengths vary apart: a step at a seen source length
    and a new target length pays as one at a new source length (hf_t5_seq2seq's bf16 row read
    0.15x over 20 steps, ``run42``)."""
    _, facts, xs, marked = _watched(tmp_path, PAIRS, "new_shape_steps")
    others = [x for i, x in enumerate(xs) if i not in marked]
    slow = [i for i, x in enumerate(xs) if x > 20 * statistics.median(others)]
    assert marked and slow == marked  # every step that paid, and only those
    report = json.loads((tmp_path / "r.json").read_text())
    res = RunResult("arm", {}, True, 1.0, report, facts)
    assert res.shapes_cost_once and res.new_shapes == marked
    assert res.step_ms is not None and res.step_ms < 1.5 * statistics.fmean(others)


def test_a_batchs_shape_is_every_tensors_in_it_one_level_down_too() -> None:
    """``(inputs, labels)`` with ``inputs`` a dict of a tokenizer's tensors: a new length in the
    dict is a new shape; strings and a PyG-like object have none."""
    import torch
    from gpusight.watch.loader_hooks import batch_shape

    def pair(n: int) -> tuple[dict[str, Any], Any]:
        return {"input_ids": torch.zeros(2, n), "text": ["a", "b"]}, torch.zeros(2)

    assert batch_shape(pair(5)) == ((2, 5), (2,))
    assert batch_shape(pair(5)) != batch_shape(pair(7))
    assert batch_shape(torch.zeros(4, 3)) == ((4, 3),)
    assert batch_shape(object()) is None and batch_shape({"text": ["a"]}) is None
