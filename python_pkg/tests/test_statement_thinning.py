"""Which statement of a training loop can run less often, or not at all, and the change made
(issue #50): the statements people leave in their loops, each thinned or refused with the
reason. Pure text work: the changed sources are compiled and the diffs applied here."""

from __future__ import annotations

import pytest
from gpusight.fixes.diff_apply import apply, parse
from gpusight.fixes.statement_thinning import Thinning, plan, said, thinned_patch, thinned_text


def _line(source: str, text: str) -> int:
    return next(i for i, ln in enumerate(source.splitlines(), 1) if text in ln)


def _plan(source: str, hot: str, *, call: str = "model(", **kw: object) -> Thinning | str:
    return plan(source, _line(source, call), _line(source, hot), **kw)  # type: ignore[arg-type]


GC = """\
import gc
import torch

for step, (x, y) in enumerate(loader):
    loss = loss_fn(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    gc.collect()
    torch.cuda.empty_cache()
"""


def test_a_gc_collect_after_every_step_is_skipped_and_the_diff_removes_its_line() -> None:
    t = _plan(GC, "gc.collect()")
    assert isinstance(t, Thinning), t
    assert (t.mode, t.first, t.last) == ("skip", 9, 9)
    assert said(t) == "line 9 `gc.collect()` skipped"
    new = thinned_text(GC, t)
    assert new is not None and "gc.collect()" not in new and "empty_cache()" in new
    diff = thinned_patch(GC, t, "train.py")
    assert diff is not None
    assert apply(GC, parse(diff)[0]) == new


def test_two_cleanup_calls_on_one_line_are_removed_together() -> None:
    src = GC.replace("    gc.collect()\n    torch.cuda.empty_cache()\n",
                     "    gc.collect(); torch.cuda.empty_cache()\n")  # fmt: skip
    t = _plan(src, "gc.collect()")
    assert isinstance(t, Thinning) and t.mode == "skip"
    new = thinned_text(src, t)
    assert new is not None and "collect" not in new and "empty_cache" not in new


def test_the_only_statement_of_a_block_leaves_pass_behind() -> None:
    src = """\
import gc
for step in range(100):
    out = model(x)
    if step > 5:
        gc.collect()
"""
    t = _plan(src, "gc.collect()")
    assert isinstance(t, Thinning) and t.mode == "skip"
    new = thinned_text(src, t)
    assert new is not None and "        pass\n" in new
    compile(new, "x", "exec")


HISTOGRAMS = """\
for step, batch in enumerate(loader):
    loss = model(batch).mean()
    loss.backward()
    opt.step()
    for name, p in model.named_parameters():
        writer.add_histogram(name, p.detach().cpu().numpy(), step)
    print(f"step {step} loss {loss.item():.3f}")
"""


def test_a_histogram_loop_runs_every_ten_steps_of_the_loops_own_counter() -> None:
    t = _plan(HISTOGRAMS, "add_histogram")
    assert isinstance(t, Thinning), t
    assert (t.mode, t.first, t.last, t.counter) == ("every", 5, 6, "step")
    new = thinned_text(HISTOGRAMS, t)
    assert new is not None
    assert (
        "    if step % 10 == 0:  # gpusight: every 10 steps\n"
        "        for name, p in model.named_parameters():\n"
        "            writer.add_histogram(name, p.detach().cpu().numpy(), step)\n"
    ) in new


def test_a_print_of_the_loss_runs_every_ten_steps() -> None:
    t = _plan(HISTOGRAMS, "print(")
    assert isinstance(t, Thinning) and t.mode == "every" and (t.first, t.last) == (7, 7)


def test_a_loop_without_a_counter_gets_one_from_enumerate() -> None:
    src = """\
for x, y in loader:
    loss = loss_fn(model(x), y)
    loss.backward()
    wandb.log({"loss": loss.item()})
"""
    t = _plan(src, "wandb.log")
    assert isinstance(t, Thinning) and t.counter is None
    new = thinned_text(src, t)
    assert new is not None
    assert new.startswith("for step, (x, y) in enumerate(loader):\n")
    assert "    if step % 10 == 0:  # gpusight: every 10 steps\n        wandb.log(" in new


def test_a_logger_of_the_users_own_is_thinned_at_its_call_in_the_loop() -> None:
    src = """\
import numpy as np

class Histograms:
    def __init__(self, path):
        self.f = open(path, "w")

    def add_histogram(self, name, values, step):
        counts, edges = np.histogram(np.sort(values.ravel()), bins=200)
        self.f.write(f"{step} {name} {counts.tolist()}\\n")

writer = Histograms("h.log")
for step in range(300):
    loss = model(x).sum()
    loss.backward()
    for name, p in model.named_parameters():
        writer.add_histogram(name, p.detach().numpy(), step)
"""
    t = _plan(src, "np.histogram", function="Histograms.add_histogram")
    assert isinstance(t, Thinning), t
    assert t.mode == "every" and t.code.startswith("for name, p in model.named_parameters()")


def test_a_helper_in_another_file_is_read_there() -> None:
    loop = """\
from metrics import log_histograms
for step in range(300):
    loss = model(x).sum()
    loss.backward()
    log_histograms(model, step)
"""
    helper = """\
def log_histograms(model, step):
    for name, p in model.named_parameters():
        print(name, p.detach().abs().mean().item(), step)
"""
    t = plan(loop, 3, 3, function="log_histograms", elsewhere=helper)
    assert isinstance(t, Thinning) and t.first == 5 and t.mode == "every"


@pytest.mark.parametrize(
    ("body", "hot", "reason"),
    [
        # The value read later steers the loop.
        ("    v = loss.item()\n    if v > 10:\n        break\n", "v = loss", "assigns `v`"),
        ("    if loss.item() > 10:\n        break\n", "loss.item()", "steers the loop"),
        ("    x.add_(1)\n", "x.add_", "`add_()`"),
        ("    scheduler.step()\n", "scheduler", "`step()`"),
        ("    ema.update(model)\n", "ema.update", "`update()`"),
        ("    print(torch.randn(1))\n", "randn", "`randn()`"),
        ("    history.append(loss.item())\n", "history", "`append()`"),
        ("    train_more(model)\n", "train_more", "cannot tell only reports"),
        ("    stats['loss'] = loss.item()\n", "stats[", "writes `stats['loss']`"),
        ("    total += loss.item()\n", "total +=", "updates `total`"),
    ],
)
def test_what_can_change_the_training_is_refused_with_the_reason(
    body: str, hot: str, reason: str
) -> None:
    src = (
        "import torch\nfor step in range(100):\n    loss = model(x).sum()\n    loss.backward()\n"
        + body
        + "print(total)\n"
    )
    got = _plan(src, hot)
    assert isinstance(got, str), got
    assert reason in got


def test_a_users_function_that_keeps_state_is_refused() -> None:
    src = """\
def record(v):
    seen.append(v)

for step in range(100):
    loss = model(x).sum()
    record(loss.item())
"""
    got = _plan(src, "record(loss")
    assert isinstance(got, str) and "`record()`" in got and "`append()`" in got


def test_a_line_inside_forward_is_refused() -> None:
    src = "for step in range(10):\n    out = model(x)\n"
    got = plan(src, 2, 40, function="Net.forward")
    assert isinstance(got, str) and "Net.forward" in got


def test_a_while_loop_thins_by_the_counter_its_body_counts_up() -> None:
    # nanoGPT's loop: ``while True:`` with ``iter_num += 1`` once a step.
    src = """\
iter_num = 0
while True:
    logits, loss = model(X, Y)
    loss.backward()
    optimizer.step()
    print(f"iter {iter_num}: loss {loss.item():.4f}")
    iter_num += 1
    if iter_num > max_iters:
        break
"""
    t = _plan(src, "print(")
    assert isinstance(t, Thinning) and t.counter == "iter_num" and t.mode == "every"
    new = thinned_text(src, t)
    assert new is not None
    assert "    if iter_num % 10 == 0:  # gpusight: every 10 steps\n        print(" in new


def test_a_while_loop_skips_a_cleanup_but_has_no_counter_to_thin_by() -> None:
    src = """\
import gc
while True:
    out = model(next(it))
    gc.collect()
    print(out.sum().item())
"""
    assert isinstance(_plan(src, "gc.collect()"), Thinning)
    got = _plan(src, "print(")
    assert isinstance(got, str) and "no step counter" in got


def test_a_statement_already_run_every_n_steps_is_left_as_it_is() -> None:
    src = """\
for step in range(100):
    out = model(x)
    if step % 50 == 0:
        print(out.sum().item())
"""
    got = _plan(src, "print(")
    assert isinstance(got, str) and "already runs only on some steps" in got


def test_a_block_whose_own_names_feed_only_its_own_write_is_thinned_whole() -> None:
    src = """\
for step in range(100):
    loss = model(x).sum()
    for name, p in model.named_parameters():
        counts, edges = np.histogram(p.detach().numpy(), bins=100)
        log.write(f"{step} {name} {counts.tolist()}")
"""
    t = _plan(src, "np.histogram")
    assert isinstance(t, Thinning), t
    assert (t.first, t.last, t.mode) == (3, 5, "every")


def test_a_name_the_next_step_reads_is_refused() -> None:
    src = """\
for step in range(100):
    print(prev)
    loss = model(x).sum()
    prev = np.sort(loss.detach().numpy())
"""
    got = _plan(src, "prev = np.sort")
    assert isinstance(got, str) and "assigns `prev`" in got


def test_a_thinned_statement_runs_every_100_steps_where_the_window_holds_three_of_them() -> None:
    from gpusight.knobs.statement import every_for

    # A 2 ms step with a 40 ms histogram: thinned, about 2.4 ms, 800 steps in 2 s.
    assert every_for(40.0, 42.0) == 100
    # A 30 ms step: 66 steps in 2 s hold none of every 100.
    assert every_for(5.0, 35.0) == 10


def test_with_gradient_accumulation_the_loop_is_the_optimizers_not_the_micro_batches() -> None:
    src = """\
for step, batch in enumerate(loader):
    for micro in range(4):
        loss = model(batch[micro]).mean() / 4
        loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    writer.add_scalar("loss", loss.item(), step)
"""
    t = _plan(src, "add_scalar")
    assert isinstance(t, Thinning) and t.counter == "step" and t.loop_line == 1


def test_a_script_with_conditional_expressions_and_lambdas_is_read_past_them() -> None:
    # As the VAE example writes it: a running loss started by a conditional expression, the
    # epochs' loop inside a ``with`` block, a lambda for the schedule; the sum read after.
    src = """\
import torch

def main(args):
    total = torch.zeros(()) if args.fix else 0.0
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda e: 0.95**e)
    step = 0
    with clock:
        while step < args.iters:
            for x, y in loader:
                loss = loss_fn(model(x), y)
                loss.backward()
                opt.step()
                total += loss.item()
                print(f"step {step}: {loss.item():.3f}")
                step += 1
    print(total / step)
"""
    summed = _plan(src, "total += loss.item()")
    assert isinstance(summed, str) and "total" in summed  # read after the loop: kept
    shown = _plan(src, "print(f")
    assert isinstance(shown, Thinning) and shown.mode == "every"
    new = thinned_text(src, shown)
    assert new is not None and "total += loss.item()\n" in new


def test_the_statement_knob_offers_no_arm_for_a_line_of_the_models_forward(
    tmp_path: object,
) -> None:
    from pathlib import Path

    from gpusight.knobs import Situation
    from gpusight.knobs.statement import Statement

    root = Path(str(tmp_path))
    (root / "train.py").write_text(GC)
    call = _line(GC, "model(")

    def facts(*rows: tuple[str, str, float]) -> dict[str, object]:
        lines = [{"file": str(root / "train.py"), "line": _line(GC, code), "code": code,
                  "function": fn, "ms_per_step": pct / 10, "share_pct": pct}
                 for code, fn, pct in rows]  # fmt: skip
        return {"host_lines": {"lines": lines}, "step_time_ms": 10.0,
                "forward_site": {"file": str(root / "train.py"), "line": call}}  # fmt: skip

    knob = Statement()
    # As the recommender on a CPU build: the towers' line in forward, then the loop's gc.
    both = Situation.of(facts(("torch.cuda.empty_cache()", "Net.forward", 40.0),
                              ("gc.collect()", "<module>", 30.0)))  # fmt: skip
    groups = knob.groups(both)
    assert [a.label for g in groups for a in g.arms] == [f"line {_line(GC, 'gc.collect')} "
                                                         "`gc.collect()` skipped"]  # fmt: skip
    model_only = Situation.of(facts(("torch.cuda.empty_cache()", "Net.forward", 40.0)))
    assert knob.groups(model_only) == []
    assert "are in `Net.forward`, the model's own computation" in knob.not_planned(model_only)


METRIC_LOG = """\
import json
import torch

log = open("metrics.jsonl", "w")
for step in range(600):
    x, y = next(batches)
    out = model(x)
    loss = loss_fn(out, y)
    loss.backward()
    opt.step()
    acc = (out.argmax(1) == y).float().mean()
    log.write(json.dumps({"step": step, "loss": loss.item(),
                          "acc": acc.item()}) + "\\n")
    seen = step
"""


def test_a_metric_and_the_logger_line_that_reads_it_run_less_often_together() -> None:
    first = _line(METRIC_LOG, "acc = ")
    alone = _plan(METRIC_LOG, "acc = ")
    assert isinstance(alone, str) and "assigns `acc`" in alone  # the logger reads it
    t = _plan(METRIC_LOG, "acc = ", through=first + 2)
    assert isinstance(t, Thinning), t
    assert (t.mode, t.first, t.last) == ("every", first, first + 2)
    assert (
        said(t)
        == f"lines {first}-{first + 2} `acc = (out.argmax(1) == y).float().mean()` every 10 steps"
    )
    new = thinned_text(METRIC_LOG, t)
    assert new is not None and "    if step % 10 == 0:" in new
    compile(new, "train.py", "exec")
    # A run that takes in a line whose name the loop reads later is refused.
    kept = METRIC_LOG.replace("    seen = step\n", "    seen = acc\n")
    assert isinstance(_plan(kept, "acc = ", through=first + 2), str)


def test_the_statement_knob_offers_a_run_of_the_steps_record_as_one_arm(
    tmp_path: object,
) -> None:
    from pathlib import Path

    from gpusight.knobs import Situation
    from gpusight.knobs.statement import Statement

    root = Path(str(tmp_path))
    (root / "train.py").write_text(METRIC_LOG)
    first = _line(METRIC_LOG, "acc = ")
    rows = [{"file": str(root / "train.py"), "line": _line(METRIC_LOG, code), "code": code,
             "function": "<module>", "ms_per_step": pct / 10, "share_pct": pct}
            for code, pct in (("acc = (out", 4.0), ("log.write(", 3.0))]  # fmt: skip
    site = {"file": str(root / "train.py"), "line": _line(METRIC_LOG, "model(")}
    facts = {"host_lines": {"lines": rows}, "step_time_ms": 10.0, "forward_site": site}
    groups = Statement().groups(Situation.of(facts))
    # Neither line holds 5% alone; together they do, and only together can they be thinned.
    assert [a.label for g in groups for a in g.arms] == [
        f"lines {first}-{first + 2} `acc = (out.argmax(1) == y).float().mean()` every 10 steps"
    ]


LIGHTNING = """\
import lightning as L
import torch.nn.functional as F


class Classifier(L.LightningModule):
    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self(x), y)


trainer = L.Trainer(max_steps=1000)
trainer.fit(model, datamodule=dm)
"""


def test_a_frameworks_fit_call_is_not_a_statement_to_run_less_often(tmp_path: object) -> None:
    from pathlib import Path

    from gpusight.knobs import Situation
    from gpusight.knobs.statement import Statement

    root = Path(str(tmp_path))
    (root / "train.py").write_text(LIGHTNING)
    fit = _line(LIGHTNING, "trainer.fit(")
    # As a Lightning script measured on a CPU build: the fit line holds the framework's step.
    timed = ((fit, "trainer.fit(model, datamodule=dm)", "<module>", 86.0),
             (7, "return self.net(x)", "Classifier.forward", 6.0))  # fmt: skip
    rows = [{"file": str(root / "train.py"), "line": line, "code": code, "function": fn,
             "ms_per_step": pct / 10, "share_pct": pct}
            for line, code, fn, pct in timed]  # fmt: skip
    site = {"file": str(root / "train.py"), "line": _line(LIGHTNING, "F.cross_entropy")}
    s = Situation.of({"host_lines": {"lines": rows}, "step_time_ms": 10.0, "forward_site": site})
    assert Statement().groups(s) == []
    said = Statement().not_planned(s)
    assert (
        f"line {fit} `trainer.fit(model, datamodule=dm)` runs the training framework's loop" in said
    )
    # A costly line of the user's in a step function some other code's loop calls: no loop of
    # theirs, nor a framework's step counter, to thin it by, so no arm (a row "not run: no
    # loop" for each was noise), and the plan says why.
    (root / "train.py").write_text(LIGHTNING.replace("L.LightningModule", "object"))
    metric = {**rows[1], "line": 10, "code": "x, y = batch",
              "function": "Classifier.training_step", "share_pct": 30.0}  # fmt: skip
    s = Situation.of({"host_lines": {"lines": [metric]}, "step_time_ms": 10.0,
                      "forward_site": site})  # fmt: skip
    assert Statement().groups(s) == []
    assert f"the model's call (line {site['line']}) has no loop around it in its file" in (
        Statement().not_planned(s)
    )


DATASET = """\
import torch
from torch.utils.data import DataLoader, Dataset


class Clips(Dataset):
    def __len__(self):
        return 1000

    def __getitem__(self, i):
        wave = torch.sin(torch.arange(16000) * 0.01 * (i % 7 + 1))
        return torch.stft(wave, 400, 160, return_complex=True).abs(), i % 4


for x, y in DataLoader(Clips(), batch_size=64):
    loss = model(x).mean()
    loss.backward()
    opt.step()
"""


def test_a_line_the_dataloader_runs_for_each_item_is_the_input_pipelines() -> None:
    """audio_melspec_loader (run39): the Dataset's feature lines read "not in the loop around
    the model's call", which says nothing of what to do with them."""
    lines = DATASET.splitlines()
    call = lines.index("    loss = model(x).mean()") + 1
    wave = lines.index("        wave = torch.sin(torch.arange(16000) * 0.01 * (i % 7 + 1))") + 1
    got = plan(DATASET, call, wave, function="Clips.__getitem__")
    assert isinstance(got, str)
    assert got.startswith(f"line {wave} is in `Clips.__getitem__`, which the DataLoader runs")
    assert "DataLoader workers run it beside the step" in got
