"""Another model's calls (a teacher, a GAN's other half) told from the main model's own,
through a real watch on CPU torch: the former are the step's computation, the latter (a
validation batch every step) the user's work."""

from __future__ import annotations

import torch


def test_the_watch_tells_another_models_calls_from_the_main_models_own() -> None:
    """A teacher's call is the step's computation (``model_calls``); the main model's own call
    on a validation batch every step stays the user's work."""
    import os

    from gpusight.watch.code_sources import forward_site, model_calls
    from gpusight.watch.session import Watch
    from torch import nn

    student = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
    teacher = nn.Sequential(nn.Linear(16, 4))
    opt = torch.optim.SGD(student.parameters(), lr=0.01)
    x, xv = torch.randn(8, 16), torch.randn(8, 16)
    lines: dict[str, int] = {}
    with Watch(steps=6, warmup=2, profile_steps=0) as w:
        while True:
            lines["teacher"] = _here() + 1
            target = teacher(x).softmax(-1).detach()
            lines["student"] = _here() + 1
            out = student(x)
            loss = nn.functional.kl_div(out.log_softmax(-1), target, reduction="batchmean")
            opt.zero_grad()
            loss.backward()
            opt.step()
            lines["val"] = _here() + 1
            val = student(xv).sum().item()
            assert val == val
    site = forward_site(w)
    assert site is not None and site.line == lines["student"]
    name = os.path.basename(__file__)
    others, mains = model_calls(w)
    assert (name, lines["teacher"]) in others
    assert (name, lines["student"]) not in others and (name, lines["val"]) not in others
    assert {(name, lines["student"]), (name, lines["val"])} <= mains


def _here() -> int:
    import sys

    return sys._getframe(1).f_lineno


def test_the_main_model_run_again_every_step_is_named_with_its_fix() -> None:
    from gpusight.rules.host_line_fix import HostLine
    from gpusight.rules.workload import CodeSource
    from test_rules_workload import _small_batch_evidence, report_of

    ev = _small_batch_evidence(other_cpu=1.2, launch=0.4)
    val = "val_loss = crit(model(xv), yv).item()"
    ev.host_lines = [
        HostLine("train.py", 30, val, "<module>", 6.0, 30.0),
        HostLine("train.py", 21, "out = model(x)", "<module>", 8.0, 40.0),
    ]
    ev.forward_source = CodeSource("train.py", "out = model(x)\n", 21)
    ev.main_model_calls = frozenset({("train.py", 21), ("train.py", 30)})
    f = report_of(ev).finding("load.cpu_preprocessing")
    assert f is not None and f.title.startswith("train.py:30 (`val_loss")
    assert f.fix.text.startswith("The model runs again at train.py:30 ")
    # The watch not having seen that line call the model: no such claim.
    ev.main_model_calls = frozenset({("train.py", 21)})
    g = report_of(ev).finding("load.cpu_preprocessing")
    assert g is not None and "runs again" not in g.fix.text


def test_a_sync_on_the_main_models_second_call_gets_that_lines_fix() -> None:
    """On a GPU the validation forward is the GPU's work, and its .item() the host's wait: the
    sync finding names the line, with the fix for running the model again."""
    from gpusight.rules.host_line_fix import HostLine
    from gpusight.rules.workload import CodeSource, SyncSite
    from test_rules_workload import evidence, gpu_window, report_of

    code = "history.append(F.cross_entropy(model(xv), yv).item())"
    ev = evidence(
        window=gpu_window(compute=30.0, sync_stall=60.0, launch_overhead=10.0),
        syncs=[SyncSite(kind="item", count=6, file="train.py", line=24, code=code, idle_ms=300.0)],
        host_lines=[
            HostLine("train.py", 24, code, "<module>", 6.2, 60.0),
            HostLine("train.py", 19, "loss = F.cross_entropy(model(x), y)", "<module>", 3.0, 30.0),
        ],
    )
    ev.forward_source = CodeSource("train.py", "loss = F.cross_entropy(model(x), y)\n", 19)
    ev.main_model_calls = frozenset({("train.py", 19), ("train.py", 24)})
    f = report_of(ev).finding("code.host_sync")
    assert f is not None and f.fix.text.startswith("The model runs again at train.py:24 ")


def test_the_step_call_is_the_training_one_not_an_evaluation_that_came_first() -> None:
    """An evaluation of 50 batches under no_grad after the first step outnumbers the training
    call in the first calls the watch looks at: the model's call is still the training
    step's."""
    from gpusight.watch.code_sources import forward_site
    from gpusight.watch.session import Watch
    from torch import nn

    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    val = [torch.randn(8, 16) for _ in range(50)]
    lines: dict[str, int] = {}
    step = 0
    with Watch(steps=6, warmup=2, profile_steps=0) as w:
        while True:
            if step % 25 == 1:
                with torch.no_grad():
                    for xv in val:
                        lines["eval"] = _here() + 1
                        model(xv)
            lines["train"] = _here() + 1
            loss = model(torch.randn(8, 16)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
    site = forward_site(w)
    assert site is not None and site.line == lines["train"], (site, lines)


SIMCLR = """\
for step, (x1, x2) in enumerate(loader):
    z1 = model(x1)
    z2 = model(x2)
    loss = nt_xent(z1, z2)
    opt.zero_grad()
    loss.backward()
    opt.step()
    val = crit(model(xv), yv).item()
"""


def test_a_second_call_the_backward_differentiates_is_the_steps_own_not_run_again() -> None:
    """A contrastive step's second view (``z2 = model(x2)``) feeds the loss: the step's own
    computation, never "the model runs again"; a validation call beside it still is."""
    from gpusight.rules.host_line_fix import HostLine
    from gpusight.rules.workload import CodeSource
    from test_rules_workload import _small_batch_evidence, report_of

    ev = _small_batch_evidence(other_cpu=1.2, launch=0.4)
    ev.host_lines = [
        HostLine("train.py", 3, "z2 = model(x2)", "<module>", 8.0, 40.0),
        HostLine("train.py", 2, "z1 = model(x1)", "<module>", 8.0, 40.0),
        HostLine("train.py", 8, "val = crit(model(xv), yv).item()", "<module>", 2.0, 10.0),
    ]
    ev.forward_source = CodeSource("train.py", SIMCLR, 2)
    ev.main_model_calls = frozenset({("train.py", 2), ("train.py", 3), ("train.py", 8)})
    f = report_of(ev).finding("load.cpu_preprocessing")
    assert f is not None and f.title.startswith("train.py:8 (`val = ")
    assert "train.py:3" not in f.fix.text and "runs again at train.py:8" in f.fix.text


MAML_STEP = """\
for step in range(steps):
    inner = F.mse_loss(functional_call(model, params, (x,)), y)
    grads = torch.autograd.grad(inner, list(params.values()), create_graph=True)
    fast = {k: v - 0.1 * g for (k, v), g in zip(params.items(), grads)}
    outer = F.mse_loss(functional_call(model, fast, (x,)), y)
    opt.zero_grad()
    outer.backward()
    opt.step()
"""


def test_a_meta_learning_steps_inner_update_is_not_host_work_to_move() -> None:
    from gpusight.rules.host_line_fix import HostLine
    from gpusight.rules.workload import CodeSource
    from test_rules_workload import _small_batch_evidence, report_of

    ev = _small_batch_evidence(other_cpu=1.2, launch=0.4)
    ev.host_lines = [
        HostLine("train.py", 3, MAML_STEP.splitlines()[2].strip(), "<module>", 4.0, 25.0),
        HostLine("train.py", 4, MAML_STEP.splitlines()[3].strip(), "<module>", 2.0, 12.0),
        HostLine("train.py", 5, MAML_STEP.splitlines()[4].strip(), "<module>", 3.0, 20.0),
    ]
    ev.forward_source = CodeSource("train.py", MAML_STEP, 2)
    ev.main_model_calls = frozenset({("train.py", 2), ("train.py", 5)})
    f = report_of(ev).finding("load.cpu_preprocessing")
    # No line of the user's is named: each is the step's computation the backward runs through.
    assert f is None or not any(f"train.py:{n}" in f.title for n in (3, 4, 5))
    assert f is None or "transforms on the GPU" not in f.fix.text
