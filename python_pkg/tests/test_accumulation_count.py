"""The loop's own accumulation count (``fixes/accumulation_count.py``): the name the optimizer's
step waits on, found where the file sets it once to the run's number, and set to another."""

from __future__ import annotations

import textwrap

from gpusight.fixes.accumulation_count import find, with_count

SKIPPING = textwrap.dedent("""
    def main(args):
        micro = 16
        accum = 8
        accum = args.accum_steps or accum
        for images, target in loader:
            output = model(images)
            loss = loss_fn(output, target) / accum
            loss.backward()
            micro_step += 1
            if micro_step % accum:
                continue
            optimizer.step()
            optimizer.zero_grad()
""")

NANOGPT = textwrap.dedent("""
    gradient_accumulation_steps = 5 * 8
    eval_interval = 40
    while True:
        if iter_num % eval_interval == 0:
            estimate_loss()
        for micro_step in range(gradient_accumulation_steps):
            logits, loss = model(X, Y)
            loss = loss / gradient_accumulation_steps
            scaler.scale(loss).backward()
        scaler.step(optimizer)
""")


def _line(source: str, text: str) -> int:
    return next(i for i, s in enumerate(source.splitlines(), 1) if text in s)


def test_the_name_the_step_waits_on_where_the_file_sets_it_to_the_runs_number() -> None:
    c = find(SKIPPING, _line(SKIPPING, "model(images)"), 8)
    assert c is not None and (c.name, c.code) == ("accum", "accum = 8")
    assert c.line == _line(SKIPPING, "accum = 8")
    changed = with_count(SKIPPING, "accum", 8, 1)
    assert changed is not None
    assert changed.splitlines()[c.line - 1] == "    accum = 1"
    # Only that line changes: the option that may override it stays.
    assert changed.replace("accum = 1\n", "accum = 8\n", 1) == SKIPPING
    assert find(SKIPPING, _line(SKIPPING, "model(images)"), 4) is None  # not the run's number


def test_a_loop_of_micro_batches_inside_the_step_loop() -> None:
    """nanoGPT's shape: ``range(N)`` of micro-batches, N a product of literals; a ``%`` whose
    branch evaluates, not steps, is not the count even where it is the run's number."""
    call = _line(NANOGPT, "model(X, Y)")
    c = find(NANOGPT, call, 40)
    assert c is not None and c.name == "gradient_accumulation_steps"
    changed = with_count(NANOGPT, c.name, 40, 1)
    assert changed is not None and "gradient_accumulation_steps = 1\n" in changed


def test_a_stepping_condition_in_the_common_form() -> None:
    src = textwrap.dedent("""
        ACCUM_STEPS: int = 4
        LOG_EVERY = 4
        for i, (x, y) in enumerate(loader):
            loss = crit(model(x), y) / ACCUM_STEPS
            loss.backward()
            if (i + 1) % ACCUM_STEPS == 0:
                opt.step()
                opt.zero_grad()
            if i % LOG_EVERY == 0:
                print(loss.item())
    """)
    c = find(src, _line(src, "model(x)"), 4)
    assert c is not None and c.name == "ACCUM_STEPS"


def test_no_count_where_the_number_is_not_set_once_in_the_file() -> None:
    loop = textwrap.dedent("""
        for i, x in enumerate(loader):
            model(x).sum().backward()
            if (i + 1) % accum == 0:
                opt.step()
    """)
    assert find("accum = 4\n" + loop, 3, 4) is not None
    twice = "accum = 4\nif fast:\n    accum = 4\n" + loop
    assert find(twice, _line(twice, "model(x)"), 4) is None
    assert find("accum = args.accum\n" + loop, 3, 4) is None
    # A parameter of the function around the loop: its caller's number, not the file's.
    param = "accum = 4\ndef train(accum):" + textwrap.indent(loop, "    ")
    assert find(param, _line(param, "model(x)"), 4) is None
    assert find(param.replace("train(accum)", "train()"), _line(param, "model(x)"), 4)
    assert find("def broken(:\n", 1, 4) is None
    # The file changed since the run: nothing to set.
    assert with_count("accum = 2\n", "accum", 4, 1) is None


def test_a_config_objects_field_or_the_trainers_own_attribute() -> None:
    """``cfg.grad_accum`` with the dataclass field setting it, and a trainer class's
    ``self.accum_steps`` set in its ``__init__``: the line that sets it is the one changed."""
    config = textwrap.dedent("""
        from dataclasses import dataclass

        @dataclass
        class TrainConfig:
            batch_size: int = 8
            grad_accum: int = 8
            log_every: int = 8

        cfg = TrainConfig()
        for step, (x, y) in enumerate(loader):
            crit(model(x), y).backward()
            if (step + 1) % cfg.grad_accum == 0:
                opt.step()
            if step % cfg.log_every == 0:
                print(step)
    """)
    c = find(config, _line(config, "model(x)"), 8)
    assert c is not None and (c.name, c.code) == ("TrainConfig.grad_accum", "grad_accum: int = 8")
    changed = with_count(config, c.name, 8, 1)
    assert changed is not None and "    grad_accum: int = 1\n" in changed
    assert "batch_size: int = 8" in changed and "log_every: int = 8" in changed
    trainer = textwrap.dedent("""
        class Trainer:
            def __init__(self, model):
                self.model = model
                self.accum_steps = 4

            def fit(self, loader):
                for i, x in enumerate(loader):
                    self.model(x).sum().backward()
                    if i % self.accum_steps == self.accum_steps - 1:
                        self.opt.step()
    """)
    c = find(trainer, _line(trainer, "self.model(x)"), 4)
    assert c is not None and c.name == "self.accum_steps"
    changed = with_count(trainer, c.name, 4, 1)
    assert changed is not None and "self.accum_steps = 1\n" in changed


def test_a_count_the_file_imports() -> None:
    """A count set in another module: the module, its relative level and the name there, for
    ``from config import ...`` (an alias too) and ``import settings as S`` with
    ``S.GRAD_ACCUM``; the module's own line that sets it."""
    from gpusight.fixes.accumulation_count import imported, set_in

    src = textwrap.dedent("""
        import settings as S
        from .config import ACCUM_STEPS as ACCUM, LR
        for i, x in enumerate(loader):
            model(x).sum().backward()
            if (i + 1) % ACCUM == 0:
                opt.step()
            if (i + 1) % S.GRAD_ACCUM == 0:
                sched.step()
    """)
    got = imported(src, _line(src, "model(x)"))
    assert sorted(got) == [("config", 1, "ACCUM_STEPS"), ("settings", 0, "GRAD_ACCUM")]
    c = set_in("LR = 1e-3\nACCUM_STEPS: int = 2 * 4\n", "ACCUM_STEPS", 8)
    assert c is not None and (c.line, c.code) == (2, "ACCUM_STEPS: int = 2 * 4")
    assert set_in("ACCUM_STEPS = 8\nACCUM_STEPS = 8\n", "ACCUM_STEPS", 8) is None
