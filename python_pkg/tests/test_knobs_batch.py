"""The batch knob: through the script's argument or its DataLoader, never a repeat of inputs
that would time another computation; crashed and implausible runs are said as such."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from gpusight.cli import main
from gpusight.knobs import batch_args
from gpusight.knobs.batch import repeat_blocker
from gpusight.knobs.gain_rule import (
    band_excludes_one,
    beyond_bound,
    sweep_goes_on,
    threshold,
    wins,
)
from gpusight.report import Report
from gpusight.rerun.driver import Driver, RunResult, ScriptRunner
from gpusight.rerun.inject import install
from gpusight.rerun.plan import plan
from gpusight.rerun.results import apply
from torch import nn

GRAPHS = '''
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Graphs(Dataset):
    def __len__(self):
        return 100000

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(30, 16, generator=g), torch.randint(0, 30, (2, 60), generator=g), i % 2


class GraphBatch:
    """What a graph library's collate makes: node features, edges and a node->graph vector."""

    def __init__(self, x, edge_index, batch, y):
        self.x, self.edge_index, self.batch, self.y = x, edge_index, batch, y


def collate(items):
    xs, es, bs, off = [], [], [], 0
    for k, (x, e, _) in enumerate(items):
        xs.append(x)
        es.append(e + off)
        bs.append(torch.full((x.shape[0],), k))
        off += x.shape[0]
    return GraphBatch(torch.cat(xs), torch.cat(es, 1), torch.cat(bs),
                      torch.tensor([c for *_, c in items]))


class GraphLoader(DataLoader):
    def __init__(self, dataset, batch_size=1, shuffle=False, **kw):
        super().__init__(dataset, batch_size, shuffle, collate_fn=collate, **kw)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin1, self.out = nn.Linear(16, 32), nn.Linear(32, 2)

    def forward(self, x, edge_index, batch):
        h = torch.relu(self.lin1(x))
        h = h + torch.zeros_like(h).index_add_(0, edge_index[1], h[edge_index[0]])
        pooled = torch.zeros(int(batch.max()) + 1, h.shape[1]).index_add_(0, batch, h)
        return self.out(pooled)


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i, b in enumerate(GraphLoader(Graphs(), batch_size=1)):
    loss = nn.functional.cross_entropy(model(b.x, b.edge_index, b.batch), b.y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if i == 400:
        break
'''

LANGUAGE_MODEL = """
import argparse
import contextlib
import torch
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--batch_size", type=int, default=4)
p.add_argument("--bptt", type=int, default=12)
args = p.parse_args()


class RNNModel(nn.Module):
    def __init__(self, vocab=50, hidden=16):
        super().__init__()
        self.emb, self.rnn = nn.Embedding(vocab, hidden), nn.LSTM(hidden, hidden, 2)
        self.dec = nn.Linear(hidden, vocab)

    def forward(self, data, hidden):
        out, hidden = self.rnn(self.emb(data), hidden)
        return self.dec(out).view(-1, self.dec.out_features), hidden


corpus = torch.randint(0, 50, (20000,))
n = corpus.numel() // args.batch_size
source = corpus[: n * args.batch_size].view(args.batch_size, -1).t().contiguous()
model = RNNModel()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
hidden = (torch.zeros(2, args.batch_size, 16), torch.zeros(2, args.batch_size, 16))
for step in range(400):
    i = (step * args.bptt) % (source.shape[0] - args.bptt - 1)
    data, targets = source[i : i + args.bptt], source[i + 1 : i + 1 + args.bptt].reshape(-1)
    hidden = tuple(h.detach() for h in hidden)
    out, hidden = model(data, hidden)
    loss = nn.functional.cross_entropy(out, targets)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _baseline(tmp_path: Path, source: str, *args: str) -> tuple[Path, dict[str, Any]]:
    script = tmp_path / "train.py"
    script.write_text(source)
    facts = tmp_path / "facts.json"
    code = main(["run", "--quiet", "--steps", "10", "--facts", str(facts), str(script), *args])
    assert code == 0
    return script, json.loads(facts.read_text())


def _on_a_gpu(facts: dict[str, Any]) -> dict[str, Any]:
    """The same facts as a launch-bound GPU run would give them (this machine has no GPU)."""
    return {**facts, "cuda": True, "finding_ids": ["load.small_batch"]}


def _batch_arms(facts: dict[str, Any]) -> list[Any]:
    return next(g for g in plan(facts) if g.name == "batch").arms


# -- a graph batch: the loader's batch_size, never its inputs repeated --------------------------
@pytest.mark.slow
def test_a_graph_batch_grows_through_its_loader_and_counts_graphs(tmp_path: Path) -> None:
    script, facts = _baseline(tmp_path, GRAPHS)
    # Items are what the script counts: graphs (the loader's batch), not nodes.
    assert facts["items_per_step"] == 1
    assert facts["model"]["input_dim0s"] == [2, 30]  # edge_index's dim 0 is not the batch
    arms = _batch_arms(_on_a_gpu(facts))
    assert [a.changes for a in arms][:2] == [{"batch_size": 4}, {"batch_size": 16}]
    assert all(a.scope == "end_to_end" and "replicate" not in a.changes for a in arms)
    res = ScriptRunner(str(script), [], steps=6, warmup=2, lean=True)(
        arms[0].label, arms[0].changes, False, 120.0
    )
    assert res.ok, res.error
    assert res.items == 4  # four graphs a step, through the loader subclass's own collate


def test_without_a_loader_a_graph_batch_is_a_skipped_row_with_the_reason() -> None:
    facts = {
        "cuda": True,
        "step_mode": "optimizer",
        "items_per_step": 30,
        "finding_ids": ["load.small_batch"],
        "model": {"param_devices": ["cuda"], "input_dim0s": [2, 30], "input_opaque": []},
    }
    arms = _batch_arms(facts)
    assert len(arms) == 1 and arms[0].skipped and "disagree on dim 0 (2, 30)" in arms[0].skipped
    facts["model"]["input_opaque"] = ["Batch"]
    assert "Batch object" in (_batch_arms(facts)[0].skipped or "")
    assert repeat_blocker({"input_dim0s": [8], "input_opaque": []}) is None


def test_a_repeat_that_would_change_the_computation_is_refused_in_the_run() -> None:
    class TwoInputs(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
            return self.lin(x)[edges[0]]

    model = TwoInputs()
    inj = install({"replicate": 4})
    try:
        x, edges = torch.randn(6, 4), torch.randint(0, 6, (2, 9))
        model(x, edges)  # warm-up
        assert model(x, edges).shape == (9, 4)  # unchanged: the call ran as the script made it
    finally:
        inj.undo()
    assert not inj.applied.get("replicate") and inj.applied.get("replicate_refused")
    assert any("disagree on dim 0 (2, 6)" in n for n in inj.notes)


# -- a language model: its batch-size argument ------------------------------------------------
@pytest.mark.slow
def test_a_language_models_batch_grows_through_its_argument(tmp_path: Path) -> None:
    script, facts = _baseline(tmp_path, LANGUAGE_MODEL)
    assert facts["batch_arg"]["option"] == "--batch_size" and facts["batch_arg"]["value"] == 4
    assert facts["model"]["input_shape"] == [12, 4]  # [bptt, batch]: dim 0 is not the batch
    assert facts["items_per_step"] == 4  # sequences, as the script counts them
    arms = _batch_arms(_on_a_gpu(facts))
    assert arms[0].changes["script_arg"]["value"] == 16
    assert arms[0].label == "--batch_size 16 (the script's batch argument)"
    res = ScriptRunner(str(script), [], steps=6, warmup=2, lean=True)(
        arms[0].label, arms[0].changes, False, 120.0
    )
    assert res.ok, res.error  # no crash: the targets grew with the batch, as the script made them
    assert res.facts is not None and res.facts["model"]["input_shape"] == [12, 16]
    assert res.items == 16
    # The fix is the command that runs the script so, not a DataLoader template it has none of.
    from gpusight.knobs import by_name

    f = by_name("batch").fix(arms[0], 4, facts)  # type: ignore[union-attr]
    assert f.text.startswith("Run the script with --batch_size 16")
    assert (f.language, f.code) == ("shell", f"python {script} --batch_size 16")
    assert f.patch is None


def test_batch_options_are_found_and_set_as_the_user_spells_them() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("-b", "--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.1)
    found = batch_args.from_parser(p, p.parse_args(["--lr", "1"]))
    assert found is not None and (found.option, found.value) == ("--batch-size", 32)
    arg = found.as_dict()
    assert batch_args.with_value(["--lr", "1"], arg, 128) == ["--lr", "1", "--batch-size", "128"]
    assert batch_args.with_value(["-b", "8", "x"], arg, 32) == ["-b", "32", "x"]
    assert batch_args.with_value(["--batch-size=8"], arg, 32) == ["--batch-size=32"]
    hf = argparse.ArgumentParser()
    hf.add_argument("--per_device_train_batch_size", type=int, default=8)
    assert batch_args.from_parser(hf, hf.parse_args([])) is not None
    other = argparse.ArgumentParser()
    other.add_argument("-b", "--beta", type=int, default=3)
    assert batch_args.from_parser(other, other.parse_args([])) is None
    assert batch_args.from_argv(["--bs", "16"]) == batch_args.BatchArg("--bs", ["--bs"], 16, "argv")
    assert batch_args.from_argv(["--epochs", "3"]) is None


@contextlib.contextmanager
def _recording(argv: list[str]) -> Iterator[batch_args.Recorder]:
    """A recorder installed while the script's ``sys.argv`` is ``argv``."""
    rec = batch_args.Recorder().install()
    saved = sys.argv
    sys.argv = argv
    try:
        yield rec
    finally:
        sys.argv = saved
        rec.uninstall()


def test_the_recorder_leaves_argparse_as_it_was() -> None:
    orig = argparse.ArgumentParser.parse_known_args
    with _recording(["train.py", "--batch_size", "12"]) as rec:
        p = argparse.ArgumentParser()
        p.add_argument("--batch_size", type=int, default=4)
        assert p.parse_args().batch_size == 12
    assert argparse.ArgumentParser.parse_known_args is orig
    assert rec.found is not None and rec.found.value == 12


def test_a_camel_case_option_filled_in_after_parsing_is_the_batch_argument() -> None:
    """pytorch/examples' DCGAN spells it ``--batchSize``; a script that picks its default after
    parsing (``args.batchSize = args.batchSize or 64``) has it at that value."""
    with _recording(["dcgan.py", "--workers", "2"]) as rec:
        p = argparse.ArgumentParser()
        p.add_argument("--workers", type=int, default=2)
        p.add_argument("--batchSize", type=int, default=None)
        args = p.parse_args()
        assert rec.result([]) is None  # nothing to take yet
        args.batchSize = args.batchSize or 64
    found = rec.result(["--workers", "2"])
    assert found is not None and (found.option, found.value) == ("--batchSize", 64)
    assert batch_args.with_value(["--workers", "2"], found.as_dict(), 256) == [
        "--workers", "2", "--batchSize", "256"
    ]  # fmt: skip
    for name in ("--trainBatchSize", "--train-batch-size", "--BATCH_SIZE", "--miniBatchSize"):
        q = argparse.ArgumentParser()
        q.add_argument(name, type=int, default=8)
        assert batch_args.from_parser(q, q.parse_args([])) is not None, name
    for name in ("--batches", "--batch-norm", "--sizeBatch"):
        q = argparse.ArgumentParser()
        q.add_argument(name, type=int, default=8)
        assert batch_args.from_parser(q, q.parse_args([])) is None, name


# -- crashes and implausible gains --------------------------------------------------------------
def _facts() -> dict[str, Any]:
    return {
        "cuda": True,
        "step_mode": "optimizer",
        "items_per_step": 8,
        "finding_ids": ["load.small_batch"],
        "breakdown_ms": {"launch_overhead": 9.0, "compute": 1.0},
        "model": {"param_devices": ["cuda"], "input_dim0s": [8], "input_opaque": []},
    }


def _result(changes: dict[str, Any], step_ms: float | None, error: str | None = None) -> RunResult:
    report = {"run": {"step_time_ms": step_ms, "steps": 20, "items_per_step": 8}}
    res = RunResult("r", changes, ok=error is None, wall_s=1.0, report=report, facts=_facts())
    res.error = error
    return res


class FakeRunner:
    def __init__(self, steps: dict[int, list[float | str]]) -> None:
        self.steps = steps  # replicate factor -> step ms (or an error) of each run in turn
        self.calls: list[dict[str, Any]] = []

    def __call__(self, label: str, changes: dict[str, Any], profile: bool, t: float) -> RunResult:
        self.calls.append(changes)
        got = self.steps.get(int(changes.get("replicate") or 1), [10.0])
        v = got.pop(0) if len(got) > 1 else got[0]
        return _result(changes, None, v) if isinstance(v, str) else _result(changes, v)


def _rows(runner: FakeRunner) -> dict[int, tuple[Any, RunResult | None]]:
    out = Driver(runner, budget_s=600.0).what_if()
    return {int(a.changes.get("replicate") or 0): (a, r) for a, r in out.arms}


def test_a_crashed_point_is_said_crashed_and_never_called_the_knee() -> None:
    crash = "crashed: the script exited with 1: ValueError: Expected input batch_size (32)"
    rows = _rows(FakeRunner({4: [crash]}))
    _arm4, res4 = rows[4]
    assert res4 is not None and not res4.ok and res4.error and res4.error.startswith("crashed")
    arm16, res16 = rows[16]
    assert res16 is None and arm16.skipped and "did not run (crashed" in arm16.skipped
    assert "knee" not in arm16.skipped


def test_a_gain_larger_than_the_batch_explains_is_measured_again_then_not_counted() -> None:
    # x4 the items, 10x the items per second (a 4x larger step taking 0.4x the time), twice.
    runner = FakeRunner({4: [4.0, 4.0], 16: [20.0]})
    _, res = _rows(runner)[4]
    assert sum(1 for c in runner.calls if c.get("replicate") == 4) == 2
    assert res is not None and not res.ok and "suspect: 10.00x from 4x" in (res.error or "")
    # Measured again within the bound: the second run stands.
    _arm, res = _rows(FakeRunner({4: [4.0, 12.0], 16: [40.0]}))[4]
    assert res is not None and res.ok


def test_a_gain_past_the_bound_against_a_slow_control_has_the_control_measured_again() -> None:
    """The control ran slow (25 ms against the baseline's 10): the x4 batch reads 10x twice.
    Run again, the control takes 10 ms: against the controls' median the batch gains 4x, which
    counts, and its row says so."""
    runner = FakeRunner({1: [10.0, 25.0, 10.0, 10.0], 4: [10.0], 16: [40.0]})
    out = Driver(runner, budget_s=600.0).what_if()
    arm, res = next((a, r) for a, r in out.arms if a.changes.get("replicate") == 4)
    assert res is not None and res.ok, res and res.error
    assert [c.step_ms for c in out.controls] == [10.0, 10.0]
    assert sum(1 for c in runner.calls if c == {}) == 4  # baseline, control, two again
    rep = Report(kind="watch", machine={"platform": "x", "python": "3", "cpu_count": 2,
                                        "gpus": []})  # fmt: skip
    row = next(r for r in apply(rep, out).what_if if r.change == arm.label)
    assert row.speedup == pytest.approx(4.0)
    # A control that runs slow again: the gain stays past the bound, and does not count.
    runner = FakeRunner({1: [10.0, 25.0, 25.0], 4: [10.0], 16: [40.0]})
    out = Driver(runner, budget_s=600.0).what_if()
    res = next(r for a, r in out.arms if a.changes.get("replicate") == 4)
    assert res is not None and not res.ok and "suspect: 10.00x from 4x" in (res.error or "")


def test_the_gain_rule() -> None:
    assert threshold(0.0) == 1.05 and threshold(12.0) == pytest.approx(1 / 0.88)
    # A winning gain's whole band lies above 1x: the report never draws a winner as noise.
    for noise in (0.0, 3.0, 12.0, 40.0):
        assert band_excludes_one(threshold(noise) * 1.001, noise)
    assert wins(1.2, 10.0) and not wins(1.04, 0.0) and not wins(None, 0.0)
    assert beyond_bound(10.0, 4.0, 5.0) and not beyond_bound(4.3, 4.0, 5.0)
    assert not beyond_bound(3.0, 1.0, 0.0)  # no extra items: no bound
    assert not sweep_goes_on([1.5, None]) and not sweep_goes_on([1.5, 1.52])


def test_two_winners_keep_the_budget_for_their_combined_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gpusight.rerun.driver as driver_mod

    clock = [0.0]
    monkeypatch.setattr(driver_mod.time, "monotonic", lambda: clock[0])
    facts = {
        "cuda": True,
        "step_mode": "optimizer",
        "items_per_step": 8,
        "finding_ids": ["load.amp_unused"],
        "breakdown_ms": {"compute": 9.0, "launch_overhead": 1.0},
        "flags": {"cudnn.benchmark": True},
        "model": {"param_devices": ["cuda"], "has_conv": True, "autocast": False},
    }
    step = {"autocast": 5.0, "tf32": 8.0, "channels_last": 9.0}

    def runner(label: str, changes: dict[str, Any], profile: bool, t: float) -> RunResult:
        clock[0] += 10.0  # every run takes 10 s of the budget
        ms = min([step[k] for k in changes if k in step] or [10.0])
        report = {"run": {"step_time_ms": ms, "steps": 20, "items_per_step": 8}}
        return RunResult(label, changes, ok=True, wall_s=10.0, report=report, facts=facts)

    # baseline, control, autocast, tf32: 40 s; channels_last and the combined run 10 s each.
    out = Driver(runner, budget_s=55.0).what_if()
    skipped = {a.group: a.skipped for a, r in out.arms if r is None}
    assert "kept for the winners together" in (skipped.get("channels_last") or "")
    assert out.together is not None and out.together[1] is not None and out.together[1].ok
    assert {a.group for a in out.together[0]} == {"autocast", "tf32"}
