"""A larger batch as a patch of the knob that sizes a tensor the script makes with a torch
factory (fixes/factory_batch.py through batch_knob_text): the same scope, a helper that returns
it (benchmarks/scenarios/tiny_batch.py), a parameter, the shapes that get no patch, the rule's
and the what-if row's fix, and the scenario patched with ``patch -p1`` and run on the CPU."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpusight.fixes.batch_knob import batch_knob_text
from gpusight.fixes.statement_patches import compiles
from gpusight.rerun.plan import Arm
from gpusight.rerun.results import _fix_for
from gpusight.rules.workload import CodeSource, analyse
from scenario_support import SCENARIOS, apply_patch, copy_scenario, run_scenario
from test_fix_batch_knob import NOTE, _launch_bound, line_of

TINY = (SCENARIOS / "tiny_batch.py").read_text()
TINY_CALL = "model(xs[i % 16])"
BATCH = "    batch = batch or (1024 if fix else 8)\n"


def knobbed(source: str, call: str = "model(x", batch: int = 256) -> str | None:
    return batch_knob_text(source, line_of(source, call), batch)


def test_the_tiny_batch_scenario_sets_its_batch_in_the_helper_that_makes_the_tensors() -> None:
    # model(xs[i % 16]): dim 1 of xs, made by build()'s torch.randn(16, batch, width); its labels
    # ys = torch.randint(0, 10, (16, batch)) follow the same knob.
    new = batch_knob_text(TINY, line_of(TINY, TINY_CALL), 1024)
    assert new is not None and compiles(new)
    assert new == TINY.replace(BATCH, f"{BATCH}    batch = 1024{NOTE}\n")


SAME_SCOPE = """import torch

batch_size = 32
model = Net().cuda()
x = torch.randn(batch_size, 3, 224, 224, device="cuda")
for step in range(n):
    loss = model(x).sum()
    loss.backward()
"""


def test_a_factory_in_the_loops_scope_sets_its_knob_after_its_binding() -> None:
    new = knobbed(SAME_SCOPE)
    assert new == SAME_SCOPE.replace(
        "batch_size = 32\n", f"batch_size = 32\nbatch_size = 256{NOTE}\n"
    )


def test_the_input_moved_and_indexed_in_the_loop_with_labels_of_the_same_knob() -> None:
    src = (
        "import torch as T\n"
        "import torch.nn.functional as F\n"
        "def main(args):\n"
        "    bs = args.bs or 4\n"
        "    xs = T.rand(10, bs, 8)\n"
        "    ys = T.randint(0, 10, size=(10, bs))\n"
        "    for epoch in range(3):\n"
        "        for i, _ in enumerate(range(10)):\n"
        "            xb = xs[i % 10, :].to('cuda', non_blocking=True).float()\n"
        "            loss = F.cross_entropy(model(xb), ys[i % 10].cuda())\n"
    )
    new = knobbed(src, "model(xb)") or ""
    assert f"    bs = args.bs or 4\n    bs = 256{NOTE}\n    xs = T.rand" in new


def test_tokens_from_randint_and_an_args_knob() -> None:
    src = (
        "import torch\n"
        "args = parse()\n"
        "model = LM()\n"
        "tokens = torch.randint(0, args.vocab, (args.batch_size, 128))\n"
        "for _ in range(args.steps):\n"
        "    model(tokens).sum().backward()\n"
    )
    new = knobbed(src, "model(tokens)") or ""
    assert f"args = parse()\nargs.batch_size = 256{NOTE}\nmodel = LM()\n" in new


def test_a_parameter_knob_is_set_first_in_its_function_after_the_docstring() -> None:
    src = (
        "import torch\n"
        "import torch.nn.functional as F\n"
        "def train(model, opt, batch_size, steps=10):\n"
        '    """Noise in, noise out."""\n'
        "    x = torch.randn(batch_size, 3, 32, 32)\n"
        "    y = torch.randint(10, (batch_size,))\n"
        "    for _ in range(steps):\n"
        "        loss = F.cross_entropy(model(x), y)\n"
        "        loss.backward()\n"
    )
    new = knobbed(src) or ""
    assert compiles(new)
    assert f'"""Noise in, noise out."""\n    batch_size = 256{NOTE}\n    x = torch' in new
    no_doc = src.replace('    """Noise in, noise out."""\n', "")
    assert f"steps=10):\n    batch_size = 256{NOTE}\n    x = torch" in (knobbed(no_doc) or "")


def test_a_helpers_parameter_knob_and_a_notebook_torch_alias() -> None:
    src = (
        "def make(n, width):\n"
        "    return T.full((n, width), 0.5), T.zeros([n], dtype=T.long)\n"
        "\n"
        "x, y = make(8, 64)\n"
        "for s in range(100):\n"
        "    loss = crit(net(x), y)\n"
    )
    line = line_of(src, "net(x)")
    assert batch_knob_text(src, line, 64) is None  # no name for torch in the cell itself
    new = batch_knob_text(src, line, 64, torch_alias="T") or ""
    assert new.startswith(f"def make(n, width):\n    n = 64{NOTE}\n    return T.full")


_BUILD = """import torch

def build(dev, batch):
    batch = batch or 8
    xs = torch.randn(16, batch, 64, device=dev)
    ys = torch.randint(0, 10, (16, batch), device=dev)
    return model, xs, ys

model, xs, ys = build("cpu", None)
for i in range(60):
    loss = F.cross_entropy(model(xs[i % 16]), ys[i % 16])
"""

_LATER = (
    "import torch\nbs = 8\nx = torch.randn(bs, 3)\ny = torch.randint(0, 9, (N,))\n"
    "for step in range(9):\n    out = model(x)\n    loss = crit(out, y)\n"
    "    print(step, loss.item())\n"
)
_SCOPE = "import torch\nbs = 8\nx = torch.randn(bs, 3)\nfor i in range(9):\n    model(x)\n"


@pytest.mark.parametrize(
    ("source", "why"),
    [
        (_SCOPE.replace("torch.randn(bs, 3)", "torch.randn(8, 3)"), "a literal size"),
        (
            "import torch\nfor i in range(9):\n    bs = pick(i)\n"
            "    x = torch.randn(bs, 3)\n    model(x)\n",
            "the knob bound in the loop",
        ),
        (_SCOPE + "    bs = 16\n", "the loop rebinds the knob"),
        (
            _SCOPE.replace("bs = 8\n", "bs = 8\nn = 8\n").replace(
                "    model(x)", "    crit(model(x), torch.randint(0, 9, (n,)))"
            ),
            "labels of another size",
        ),
        (
            _BUILD.replace("(16, batch), device", "(16, 8), device"),
            "the helper's labels of a literal size",
        ),
        (
            _SCOPE.replace("x = torch", "n = 4\ny = torch.randn(n, 3)\nx = torch").replace(
                "model(x)", "model(x) + model(y)"
            ),
            "two factories that disagree",
        ),
        (
            _BUILD + 'other = build("cpu", 64)\n',
            "the helper called again with other arguments",
        ),
        (_LATER.replace("(N,)", "(8,)"), "labels on a later line, of a literal size"),
        (
            _SCOPE.replace("model(x)", "model(x, mask=torch.ones(4, 3))"),
            "another input of the model, of another size",
        ),
        (_SCOPE.replace("torch.randn(bs, 3)", "load(bs)"), "the input not from a factory"),
        (_SCOPE.replace("torch.randn(bs, 3)", "torch.randint(bs, (8, 4))"), "randint's high"),
        (
            _SCOPE.replace("torch.randn(bs, 3)", "torch.randint(0, bs, (8, 4))"),
            "randint's low/high, not its size",
        ),
        (_SCOPE.replace("torch.randn(bs, 3)", "torch.randn(cfg.bs, 3)"), "another object's"),
        (_SCOPE.replace("torch.randn(bs, 3)", "torch.randn(2 * bs, 3)"), "an expression"),
        (_SCOPE.replace("torch.randn(bs, 3)", "torch.randn_like(base)"), "a _like factory"),
        (_SCOPE.replace("torch.randn(bs, 3)", "torch.randn(bs)"), "one name: maybe a shape"),
        (_SCOPE.replace("model(x)", "model(x[:4])"), "a part of the batch's dimension"),
        (_SCOPE.replace("model(x)", "model(x.view(-1, 1))"), "a view: dimensions change"),
        (_SCOPE.replace("model(x)", "model(x[idx])"), "indexed by a tensor, maybe"),
        (_SCOPE.replace("torch.randn(bs, 3)", "torch.randn(3, bs)"), "the knob on dim 1"),
        (
            _SCOPE.replace(
                "x = torch.randn(bs, 3)",
                "if c:\n    x = torch.randn(bs, 3)\nelse:\n    x = torch.randn(n, 3)",
            ),
            "made under a branch",
        ),
        (
            "import torch\ndef f(model, bs):\n    bs *= 2\n    x = torch.randn(bs, 3)\n"
            "    for _ in range(9):\n        model(x)\n",
            "a parameter rebound, not plainly",
        ),
        (
            _BUILD.replace(
                "    return model, xs, ys",
                "    if dev:\n        return model, xs, ys\n    return model, xs, xs",
            ),
            "a helper with two returns",
        ),
        (
            _BUILD.replace("def build(", "@cache\ndef build("),
            "a decorated helper",
        ),
        (_SCOPE.replace("import torch\n", ""), "no name for torch"),
    ],
)
def test_no_factory_knob_patch(source: str, why: str) -> None:
    assert batch_knob_text(source, line_of(source, "model(x"), 64) is None, why


@pytest.mark.parametrize(
    ("source", "shape"),
    [
        (_SCOPE.replace("model(x)", "model(x[:, :2].to(dev).half())"), "a whole slice, moved"),
        (
            "import torch\nbs = 8\nfor i in range(9):\n    x = torch.ones(bs, 3)\n    model(x)\n",
            "the factory in the loop, its knob before it",
        ),
        (
            _SCOPE.replace("x = torch", "y = torch.zeros((bs, 3))\nx = torch").replace(
                "model(x)", "model(x) + model(y)"
            ),
            "two factories that agree",
        ),
        (
            _SCOPE.replace("model(x)", "crit(model(x), torch.empty(size=(bs,)))"),
            "labels made on the line, by the same knob",
        ),
        (_LATER.replace("(N,)", "(bs,)"), "labels on a later line, a log of the step"),
    ],
)
def test_more_shapes_that_set_the_knob(source: str, shape: str) -> None:
    assert f"bs = 8\nbs = 64{NOTE}\n" in (knobbed(source, batch=64) or ""), shape


def test_the_build_shape_is_patched_where_the_negatives_are_not() -> None:
    # The base of the negative cases above gets its patch: each case breaks only its one thing.
    assert f"    batch = batch or 8\n    batch = 64{NOTE}\n" in (knobbed(_BUILD, batch=64) or "")
    assert f"bs = 8\nbs = 64{NOTE}\n" in (knobbed(_SCOPE, batch=64) or "")
    same_args = _BUILD + 'again = build("cpu", None)\n'
    assert knobbed(same_args, batch=64) is not None  # called twice, with the same arguments


def test_the_small_batch_finding_carries_the_helpers_knob_patch() -> None:
    ev = _launch_bound("optimizer", 8, CodeSource("tiny_batch.py", TINY, line_of(TINY, TINY_CALL)))
    found = {f.id: f for f in analyse(ev).findings}
    assert "load.small_batch" in found, sorted(found)
    patch = found["load.small_batch"].fix.patch or ""
    assert patch.startswith("--- a/tiny_batch.py\n")
    assert f"+    batch = 256{NOTE}" in patch  # max(256, 8 * 8)


def test_a_measured_replicated_batch_row_sets_the_helpers_knob(tmp_path: Path) -> None:
    script = tmp_path / "tiny_batch.py"
    script.write_text(TINY)
    arm = Arm("batch", "128 items per forward", {"replicate": 16}, "load.small_batch")
    site = {"file": str(script), "shown": "tiny_batch.py", "line": line_of(TINY, TINY_CALL)}
    f = _fix_for(arm, 8, {"forward_site": site})
    assert f"+    batch = 128{NOTE}" in (f.patch or "")  # the baseline's 8 items, 16 times


@pytest.mark.slow
def test_the_tiny_batch_patch_applies_and_runs_on_the_cpu(tmp_path: Path) -> None:
    # The watch raises load.small_batch only on a GPU run, so the finding comes from a GPU-like
    # run's evidence over the real scenario; its diff is applied with `patch -p1` and the
    # patched script trains 256 samples per step on the CPU.
    copy_scenario("tiny_batch", tmp_path)
    ev = _launch_bound("optimizer", 8, CodeSource("tiny_batch.py", TINY, line_of(TINY, TINY_CALL)))
    fix = next(f for f in analyse(ev).findings if f.id == "load.small_batch").fix
    apply_patch(tmp_path, fix.patch or "")
    patched = (tmp_path / "tiny_batch.py").read_text()
    assert patched == batch_knob_text(TINY, line_of(TINY, TINY_CALL), 256)
    result = run_scenario(
        tmp_path, "tiny_batch", "--device", "cpu", "--iters", "4", "--warmup", "1"
    )
    assert result["samples_per_step"] == 256
