"""A statement in a framework's step hook run every N steps by the framework's own step counter
(#53): a metric of Lightning's ``training_step``, a Trainer subclass's ``compute_loss``. Pure
text work for the plans; real Lightning on the CPU for the run, whose thinned copy must train
the same weights."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from gpusight.fixes.statement_thinning import Thinning, plan, thinned_text
from gpusight.fixes.step_hooks import batch_hook, step_hook
from gpusight.rules.output_reads import output_lines, output_runs

LIT = """\
import lightning as L
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class Classifier(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        pred = logits.argmax(1).cpu().numpy()
        cm = np.zeros((4, 4))
        for p, t in zip(pred, y.cpu().numpy()):
            cm[t, p] += 1
        self.log("train_acc", float(np.trace(cm) / cm.sum()))
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)
"""


def _line(source: str, text: str) -> int:
    return next(i for i, ln in enumerate(source.splitlines(), 1) if text in ln)


def _plan(source: str, first: str, last: str | None = None) -> Thinning | str:
    call = _line(source, "self(x)")
    through = _line(source, last) if last else None
    return plan(source, call, _line(source, first), through=through)


def test_lightning_training_step_counts_by_its_batch_idx() -> None:
    hook = step_hook(ast.parse(LIT), _line(LIT, "self(x)"))
    assert hook is not None and hook.function.name == "training_step"
    assert hook.counter == "batch_idx"
    # Without the argument, the count of optimizer steps Lightning keeps.
    src = LIT.replace("(self, batch, batch_idx):", "(self, batch):")
    hook = step_hook(ast.parse(src), _line(src, "self(x)"))
    assert hook is not None and hook.counter == "self.global_step"


def test_a_trainer_subclass_counts_by_its_state_and_a_plain_class_has_no_hook() -> None:
    src = """\
from transformers import Trainer


class MyTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        outputs = model(**inputs)
        return outputs.loss
"""
    hook = step_hook(ast.parse(src), _line(src, "model(**inputs)"))
    assert hook is not None and hook.counter == "self.state.global_step"
    plain = src.replace("(Trainer)", "(object)")
    assert step_hook(ast.parse(plain), _line(plain, "model(**inputs)")) is None


def test_the_loss_a_training_step_returns_is_the_steps_not_its_record() -> None:
    call = _line(LIT, "self(x)")
    lines = output_lines(LIT, call)
    assert _line(LIT, "loss = F.cross_entropy") not in lines
    assert _line(LIT, "return loss") not in lines
    # The confusion matrix made for the record, the loop that counts into it and the logger's
    # lines are one run of the record.
    assert output_runs(LIT, call) == [(_line(LIT, "pred = "), _line(LIT, '"train_loss"'))]


MANUAL = """\
class GAN(L.LightningModule):
    def training_step(self, batch, batch_idx):
        opt_g, opt_d = self.optimizers()
        fake = self.g(torch.randn(8, 16))
        d_loss = F.softplus(self.d(fake.detach())).mean()
        opt_d.zero_grad()
        self.manual_backward(d_loss)
        opt_d.step()
        stats = fake.detach().cpu().numpy()
        self.log("fake_std", float(stats.std()))
"""


def test_a_loss_lightnings_manual_backward_takes_is_the_steps_not_its_record() -> None:
    call = _line(MANUAL, "self.g(")
    lines = output_lines(MANUAL, call)
    assert _line(MANUAL, "d_loss = ") not in lines
    assert _line(MANUAL, "manual_backward") not in lines
    assert output_runs(MANUAL, call) == [(_line(MANUAL, "stats = "), _line(MANUAL, "fake_std"))]


def test_the_metric_in_training_step_runs_every_n_batches_and_computes_the_same() -> None:
    t = _plan(LIT, "pred = ", '"train_loss"')
    assert isinstance(t, Thinning), t
    assert (t.mode, t.counter, t.loop_line) == ("every", "batch_idx", _line(LIT, "def training_"))
    new = thinned_text(LIT, t)
    assert new is not None
    assert "        if batch_idx % 10 == 0:  # gpusight: every 10 steps\n            pred = " in new
    assert "\n        return loss\n" in new  # the step's own return stays where it was


def test_the_same_names_in_another_hook_are_that_hooks_own() -> None:
    src = LIT.replace(
        "    def configure_optimizers(self):",
        "    def validation_step(self, batch, batch_idx):\n"
        "        pred = self(batch[0]).argmax(1)\n"
        '        self.log("val_acc", (pred == batch[1]).float().mean())\n\n'
        "    def configure_optimizers(self):",
    )
    assert isinstance(_plan(src, "pred = logits", '"train_loss"'), Thinning)


def test_filling_an_object_of_the_step_is_allowed_and_filling_the_modules_is_not() -> None:
    t = _plan(LIT.replace("cm[t, p] += 1", "self.cm[t, p] += 1"), "pred = ", '"train_loss"')
    assert isinstance(t, str) and "it updates `self.cm[t, p]`" in t
    # An object the step did not make (the batch's own array) is not the record's to change.
    src = LIT.replace("cm = np.zeros((4, 4))", "cm = y.numpy()")
    assert isinstance(_plan(src, "pred = ", '"train_loss"'), str)


def test_a_metric_a_monitor_reads_runs_on_every_step() -> None:
    src = LIT + '\n\ncheckpoint = L.pytorch.callbacks.ModelCheckpoint(monitor="train_acc")\n'
    t = _plan(src, "pred = ", '"train_loss"')
    assert isinstance(t, str)
    assert "logs `train_acc`, which a `monitor=` reads" in t
    # A scheduler's monitor, in configure_optimizers' dict, too.
    src = LIT.replace(
        "return torch.optim.SGD(self.parameters(), lr=0.1)",
        "opt = torch.optim.SGD(self.parameters(), lr=0.1)\n"
        "        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt)\n"
        '        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, '
        '"monitor": "train_loss"}}',
    )
    t = _plan(src, "pred = ", '"train_loss"')
    assert isinstance(t, str) and "logs `train_loss`" in t


SCRIPT = (
    LIT
    + """

def main():
    import sys

    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    ds = TensorDataset(torch.randn(2048, 16), torch.randint(0, 4, (2048,)))
    trainer = L.Trainer(max_epochs=2, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    model = Classifier()
    trainer.fit(model, DataLoader(ds, batch_size=32, shuffle=True))
    torch.save(model.state_dict(), sys.argv[1])


if __name__ == "__main__":
    main()
"""
)


def _thinned_trains_the_same(tmp_path: Path, script: Path, changes: dict[str, object]) -> None:
    """The statement knob's edit of ``script`` runs the line by ``batch_idx``, and the user's
    script and the thinned copy train the same weights from one seed, tensor for tensor."""
    import torch
    from gpusight.knobs.statement import Statement

    edits = Statement().source_edits(changes)
    assert isinstance(edits, dict)
    assert "        if batch_idx % " in edits[str(script)]
    thinned = tmp_path / "thinned.py"
    thinned.write_text(edits[str(script)])
    for name, path in (("w1.pt", script), ("w2.pt", thinned)):
        done = subprocess.run([sys.executable, str(path), str(tmp_path / name)],
                              capture_output=True, text=True, timeout=240)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
    before, after = torch.load(tmp_path / "w1.pt"), torch.load(tmp_path / "w2.pt")
    assert before.keys() == after.keys()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_a_lightning_run_gets_the_arm_and_its_change_trains_the_same_weights(
    tmp_path: Path,
) -> None:
    """End to end on the CPU: the watched run times the metric's lines in ``training_step``;
    the statement knob plans them every N batches by ``batch_idx``; the changed script trains
    the same weights as the user's."""
    from gpusight.knobs import Situation
    from gpusight.knobs.statement import Statement

    script = tmp_path / "train_lit.py"
    script.write_text(SCRIPT)
    facts_path = tmp_path / "facts.json"
    cmd = [sys.executable, "-m", "gpusight", "run", "--facts",
           str(facts_path), "--json", str(tmp_path / "r.json"), str(script),
           str(tmp_path / "w0.pt")]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    facts = json.loads(facts_path.read_text())
    assert facts["forward_site"]["line"] == _line(SCRIPT, "self(x)")
    # The metric runs in the closure Lightning hands the optimizer's step: host work outside
    # the model, named on its lines ahead of trainer.fit's (the library's own per-step code).
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["run"]["breakdown_ms"]["other_cpu"] > 0
    host = next(f for f in report["findings"] if f["id"] == "load.cpu_preprocessing")
    lines = [e["source"]["line"] for e in host["evidence"] if e.get("source")]
    assert lines[0] == _line(SCRIPT, "pred = "), host["evidence"]
    assert f"train_lit.py:{_line(SCRIPT, 'pred = ')}-" in host["title"]
    groups = Statement().groups(Situation.of(facts))
    arms = [a for g in groups for a in g.arms if not a.skipped]
    assert arms, [a.skipped for g in groups for a in g.arms]
    change = arms[0].changes["statement"]
    assert (change["first"], change["counter"]) == (_line(SCRIPT, "pred = "), "batch_idx")
    _thinned_trains_the_same(tmp_path, script, arms[0].changes)


PLAIN = """\
import torch

for step, (x, y) in enumerate(loader):
    out = model(x)
    loss = crit(out, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    cm = torch.zeros(10, 10)
    for t, p in zip(y, out.argmax(1)):
        cm[t, p] += 1
    print(step, (cm.diag().sum() / cm.sum()).item())
"""


def test_a_plain_loops_confusion_matrix_made_each_step_is_thinned_with_its_print() -> None:
    call = _line(PLAIN, "model(x)")
    assert output_runs(PLAIN, call) == [(_line(PLAIN, "cm = "), _line(PLAIN, "print("))]
    t = plan(PLAIN, call, _line(PLAIN, "cm = "), through=_line(PLAIN, "print("))
    assert isinstance(t, Thinning) and (t.counter, t.mode) == ("step", "every"), t
    # A matrix kept across the steps (made before the loop) is the run's state: the count
    # would change if it skipped steps.
    kept = PLAIN.replace("    cm = torch.zeros(10, 10)\n", "").replace(
        "for step,", "cm = torch.zeros(10, 10)\nfor step,"
    )
    got = plan(
        kept, _line(kept, "model(x)"), _line(kept, "for t, p"), through=_line(kept, "print(")
    )
    assert isinstance(got, str) and "it updates `cm[t, p]`" in got


HOOKS = """\
import lightning as L
import numpy as np
from transformers import TrainerCallback


class GradNorms(L.Callback):
    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        norms = [p.grad.norm().item() for p in pl_module.parameters() if p.grad is not None]
        pl_module.log("grad_norm_max", max(norms))

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        print(f"step {batch_idx}: loss {outputs['loss'].item():.4f}")

    def on_train_epoch_end(self, trainer, pl_module):
        print("epoch", trainer.current_epoch)


class Net(L.LightningModule):
    def on_train_batch_end(self, outputs, batch, batch_idx):
        self.log("np_loss", float(outputs["loss"].detach().cpu().numpy()))

    def on_after_backward(self):
        self.log("grad0", float(next(self.parameters()).grad.abs().mean()))


class Printer(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        print(state.global_step, np.mean(state.log_history[-1:] and [1.0]))
"""


def test_a_frameworks_once_a_batch_hooks_count_by_their_own_arguments() -> None:
    """A callback's line is in no loop of the file: the framework calls the hook once a batch
    (or a step), and it carries its counter (Lightning's ``batch_idx``, the trainer's
    ``global_step``)."""
    tree = ast.parse(HOOKS)
    want = {
        'pl_module.log("grad_norm_max': "trainer.global_step",
        'print(f"step': "batch_idx",
        'self.log("np_loss"': "batch_idx",
        'self.log("grad0"': "self.global_step",
        "print(state.global_step": "state.global_step",
    }
    for text, counter in want.items():
        hook = batch_hook(tree, _line(HOOKS, text))
        assert hook is not None and hook.counter == counter, text
    # Once an epoch is not once a step; a plain method is no hook.
    assert batch_hook(tree, _line(HOOKS, 'print("epoch"')) is None
    # The call of the model elsewhere (no loop in this file): the callback's line is planned
    # by its own hook.
    t = plan(HOOKS, 1, _line(HOOKS, "norms = "), through=_line(HOOKS, "grad_norm_max"))
    assert isinstance(t, Thinning), t
    assert (t.counter, t.loop_line) == ("trainer.global_step", _line(HOOKS, "def on_before_o"))
    new = thinned_text(HOOKS, t)
    assert new is not None
    assert "        if trainer.global_step % 10 == 0:  # gpusight: every 10 steps\n" in new
    got = plan(HOOKS, 1, _line(HOOKS, 'print("epoch"'))
    assert isinstance(got, str) and "no loop around the model's call" in got


CALLBACK = LIT.replace(
    "        return loss\n",
    '        return {"loss": loss, "logits": logits.detach()}\n',
).replace(
    "        pred = logits.argmax(1).cpu().numpy()\n"
    "        cm = np.zeros((4, 4))\n"
    "        for p, t in zip(pred, y.cpu().numpy()):\n"
    "            cm[t, p] += 1\n"
    '        self.log("train_acc", float(np.trace(cm) / cm.sum()))\n'
    '        self.log("train_loss", loss)\n',
    "",
).replace(
    "class Classifier(",
    "class ConfusionLogger(L.Callback):\n"
    "    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):\n"
    "        x, y = batch\n"
    '        pred = outputs["logits"].argmax(1).cpu().numpy()\n'
    "        cm = np.zeros((4, 4))\n"
    "        for p, t in zip(pred, y.cpu().numpy()):\n"
    "            cm[t, p] += 1\n"
    '        pl_module.log("train_acc", float(np.trace(cm) / cm.sum()))\n\n\n'
    "class Classifier(",
) + SCRIPT[len(LIT) :].replace(
    "enable_model_summary=False)",
    "enable_model_summary=False,\n                        callbacks=[ConfusionLogger()])",
)


def test_a_lightning_callbacks_logger_gets_the_arm_and_trains_the_same_weights(
    tmp_path: Path,
) -> None:
    """End to end on the CPU: a ``Callback``'s ``on_train_batch_end`` logs a numpy accuracy
    every batch; the line clock times its logger's line, the statement knob plans it by the
    hook's ``batch_idx``, and the changed script trains the same weights (the logger's fix
    text: ``test_output_reads``)."""
    from gpusight.knobs import Situation
    from gpusight.knobs.statement import Statement

    assert "callbacks=[ConfusionLogger()]" in CALLBACK and "return {" in CALLBACK
    script = tmp_path / "train_cb.py"
    script.write_text(CALLBACK)
    facts_path = tmp_path / "facts.json"
    cmd = [sys.executable, "-m", "gpusight", "run", "--facts", str(facts_path),
           "--json", str(tmp_path / "r.json"), str(script), str(tmp_path / "w0.pt")]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    logged = _line(CALLBACK, "pl_module.log(")
    # The line clock times the callback's lines as the user's own (the finding's share of the
    # step, and so whether it is raised, is the CPU's timing: a busy 2-core host moved it).
    report = json.loads((tmp_path / "r.json").read_text())
    timed = [row["line"] for row in report["run"]["host_lines"]["lines"]]
    assert logged in timed, timed
    facts = json.loads(facts_path.read_text())
    arms = [a for g in Statement().groups(Situation.of(facts)) for a in g.arms if not a.skipped]
    change = next(a.changes["statement"] for a in arms if a.changes["statement"]["first"] == logged)
    assert (change["counter"], change["loop_line"]) == (
        "batch_idx",
        _line(CALLBACK, "def on_train_batch_end"),
    )
    _thinned_trains_the_same(tmp_path, script, {"statement": change})
