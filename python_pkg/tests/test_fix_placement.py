"""The model and its batches moved to the GPU as a patch of the user's lines (fixes/placement.py,
``code.cpu_model``): several shapes of training code, the shapes that get no patch, the watch's
finding that carries it, and the public scenario patched with ``patch -p1``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from gpusight.fixes.patch import unified_diff
from gpusight.fixes.patch_files import text_sha256
from gpusight.fixes.placement import to_device_text
from gpusight.fixes.statement_patches import compiles
from gpusight.rules.workload import CodeSource, Placement, WorkloadEvidence, analyse
from scenario_support import SCENARIOS, apply_patch, copy_scenario, run_scenario

MOVE_X = 'x = x.to("cuda", non_blocking=True)'
MOVE_XY = 'x, y = x.to("cuda", non_blocking=True), y.to("cuda", non_blocking=True)'


def line_of(source: str, text: str) -> int:
    return next(i for i, ln in enumerate(source.splitlines(), 1) if text in ln)


def moved(source: str, call: str = "model(x)") -> str | None:
    return to_device_text(source, line_of(source, call))


LOADER = """import torch
from torch import nn

model = nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
crit = nn.CrossEntropyLoss()
for epoch in range(2):
    for x, y in loader:
        loss = crit(model(x), y)
        loss.backward()
        opt.step()
"""


def test_a_loader_loop_moves_its_tuple_target_first_and_the_model_where_it_is_made() -> None:
    new = moved(LOADER)
    assert new is not None
    assert (
        'model = nn.Linear(8, 2)\nmodel = model.to("cuda")\nopt = torch.optim.SGD(' in new
    )  # before the optimizer is built
    assert f"    for x, y in loader:\n        {MOVE_XY}\n        loss = crit(" in new


def test_a_single_batch_name_and_an_enumerated_loader_with_tqdm() -> None:
    one = "model = Net()\nfor batch in loader:\n    out = model(batch)\n    out.sum().backward()\n"
    new = moved(one, "model(batch)") or ""
    assert '    batch = batch.to("cuda", non_blocking=True)\n    out = model(batch)\n' in new
    counted = (
        "def fit(loader):\n"
        "    model = Net()\n"
        "    for step, (x, y, _) in tqdm(enumerate(loader)):\n"
        "        loss = crit(model(x), y)\n"
    )
    new = moved(counted) or ""
    # The counter is no tensor, and the name the loop never reads need not move.
    assert f"    for step, (x, y, _) in tqdm(enumerate(loader)):\n        {MOVE_XY}\n" in new
    assert '    model = Net()\n    model = model.to("cuda")\n' in new


def test_the_scenarios_own_statement_moves_the_inputs_and_the_labels_after_it() -> None:
    src = (SCENARIOS / "cpu_model.py").read_text()
    new = moved(src)
    assert new is not None
    assert '    ).to(dev)\n    model = model.to("cuda")\n    opt = torch.optim.AdamW(' in new
    assert (
        "            x, y = xs[i % 8].to(dev, non_blocking=True), ys[i % 8].to(dev, "
        f"non_blocking=True)\n            {MOVE_XY}\n"
        "            loss = F.cross_entropy(model(x), y)\n"
    ) in new


def test_like_statements_beside_the_inputs_move_with_it() -> None:
    src = (
        "import torch\n"
        "model = build()\n"
        "for i in range(100):\n"
        "    x = xs[i % 8]\n"
        "    y = ys[i % 8]\n"
        "    n = len(x)\n"
        "    loss = crit(model(x), y) / n\n"
    )
    new = moved(src) or ""
    assert f"    y = ys[i % 8]\n    {MOVE_XY}\n    n = len(x)\n" in new


def test_a_model_made_inside_a_function_in_the_files_indentation() -> None:
    src = (
        "import torch as T\n"
        "class Trainer:\n"
        "  def fit(self, data):\n"
        "    self.net = T.nn.Linear(4, 4)\n"
        "    opt = T.optim.SGD(self.net.parameters(), lr=0.1)\n"
        "    while True:\n"
        "      batch = next(data)\n"
        "      x = batch[0]\n"
        "      with T.autocast('cuda'):\n"
        "        out = self.net(x)\n"
    )
    new = moved(src, "self.net(x)") or ""
    assert '    self.net = T.nn.Linear(4, 4)\n    self.net = self.net.to("cuda")\n' in new
    assert f"      x = batch[0]\n      {MOVE_X}\n      with T.autocast" in new


def test_a_notebook_like_cell_and_another_device() -> None:
    cell = "net = make()\nfor x, y in dl:\n    p = net(x)\n    l = (p - y).abs().mean()\n"
    new = to_device_text(cell, 3, device="cuda:1") or ""
    assert 'net = net.to("cuda:1")\n' in new
    assert 'x, y = x.to("cuda:1", non_blocking=True), y.to("cuda:1", non_blocking=True)' in new


@pytest.mark.parametrize(
    ("source", "call", "why"),
    [
        (LOADER.replace("model(x)", "model(x.float())"), "model(x.float())", "not a plain name"),
        (
            LOADER.replace("        loss = crit", "        model = Net()\n        loss = crit"),
            "model(x)",
            "the model made inside the loop",
        ),
        (
            "model = Net()\nfor batch in loader:\n    out = model(**batch)\n",
            "model(**batch)",
            "keywords only: a dict",
        ),
        (
            "model = Net()\nfor batch in loader:\n    out = model(batch)\n"
            "    loss = crit(out, batch['y'])\n",
            "model(batch)",
            "a dict's entry",
        ),
        ("model = Net()\nx = data()\nout = model(x)\n", "model(x)", "no loop"),
        (
            "model = Net()\nx = data()\nfor _ in range(3):\n    out = model(x)\n",
            "model(x)",
            "the input made before the loop",
        ),
        (
            "model = Net()\nfor x, y in loader:\n    out = model(x)\n    acc(out, y.numpy())\n",
            "model(x)",
            "a name read on the host",
        ),
        (
            "model = Net()\nfor i in range(3):\n    if i:\n        x = a[i]\n    out = model(x)\n",
            "model(x)",
            "bound under an if",
        ),
        (
            "model = Net()\nfor b in loader:\n    x, *rest = b\n    out = model(x)\n",
            "model(x)",
            "a starred target",
        ),
        (
            "model = Net()\nfor b in loader:\n    x = b[0]; out = model(x)\n",
            "model(x)",
            "two statements on one line",
        ),
        ("def f(model):\n    for x in xs:\n        out = model(x)\n", "model(x)", "a parameter"),
    ],
)
def test_no_placement_patch(source: str, call: str, why: str) -> None:
    assert to_device_text(source, line_of(source, call)) is None, why


def test_the_cpu_model_finding_carries_the_patch() -> None:
    ev = WorkloadEvidence(
        step_mode="optimizer", step_times_ms=[50.0] * 6, cuda_available=True, cuda_devices=1,
        framework_ms=[40.0] * 6,
        placement=Placement(module="Linear", param_devices=["cpu"], input_devices=["cpu"]),
        forward_source=CodeSource("train.py", LOADER, line_of(LOADER, "model(x)")),
    )  # fmt: skip
    f = next(f for f in analyse(ev).findings if f.id == "code.cpu_model").fix
    assert f.patch is not None and f.patch.startswith("--- a/train.py\n")
    assert '+model = model.to("cuda")' in f.patch and f"+        {MOVE_XY}" in f.patch
    assert [(p.path, p.sha256) for p in f.patch_files or []] == [("train.py", text_sha256(LOADER))]
    assert f.code  # the snippet stays beside it
    # Where the batch's names are not known, the generic snippet stands alone.
    bad = LOADER.replace("model(x)", "model(x[0])")
    ev.forward_source = CodeSource("train.py", bad, line_of(bad, "model(x[0])"))
    g = next(f for f in analyse(ev).findings if f.id == "code.cpu_model").fix
    assert g.patch is None and g.code


@pytest.mark.slow
def test_the_scenarios_patch_applies_and_runs_where_cuda_is(tmp_path: Path) -> None:
    # The scenario requires CUDA (REQUIRES_CUDA): on a CPU-only machine the patched script is
    # only compiled and applied; with CUDA it runs.
    copy_scenario("cpu_model", tmp_path)
    src = (SCENARIOS / "cpu_model.py").read_text()
    new = moved(src)
    assert new is not None and compiles(new)
    apply_patch(tmp_path, unified_diff(src, new, "cpu_model.py"))
    assert (tmp_path / "cpu_model.py").read_text() == new
    if not torch.cuda.is_available():
        return
    assert run_scenario(tmp_path, "cpu_model", "--iters", "4", "--warmup", "1")  # its result
