"""Fixes made where a tensor or model is made (fixes/where_made.py): a pageable host tensor
that the loop copies is pinned once after the statement that makes it; a conv model is put in
channels_last once, its input on the line that calls it. Patches of several shapes of user code,
the shapes that get none, the findings that carry them, and the two public scenarios patched
with ``patch -p1`` and run on the CPU."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
import torch
from gpusight.fixes.patch import unified_diff
from gpusight.fixes.patch_files import text_sha256
from gpusight.fixes.where_made import channels_last_text, pin_source_text
from gpusight.rules.workload import (
    CodeSource,
    CopySite,
    GpuWindow,
    Placement,
    WorkloadEvidence,
    analyse,
)
from gpusight.watch.session import Watch
from scenario_support import SCENARIOS, apply_patch, copy_scenario, run_scenario

MODULE_LEVEL = """import torch

dev = torch.device("cuda")
host = torch.randn(4, 8, 3)  # pageable
for i in range(10):
    x = host[i % 4].to(dev, non_blocking=True)
"""


def line_of(source: str, text: str) -> int:
    return next(i for i, ln in enumerate(source.splitlines(), 1) if text in ln)


def test_a_module_level_tensor_is_pinned_after_the_line_that_makes_it() -> None:
    new = pin_source_text(MODULE_LEVEL, [6])
    assert new is not None
    assert (
        "host = torch.randn(4, 8, 3)  # pageable\n"
        "if torch.cuda.is_available():  # pinned once: non_blocking copies overlap\n"
        "    host = host.pin_memory()\n"
        "for i in range(10):\n"
    ) in new


def test_a_tuple_pins_only_the_copied_names_in_the_functions_indentation() -> None:
    src = (
        "import torch as th\n"
        "def train(dev, steps):\n"
        "  host, labels, meta = th.randn(4, 2), th.zeros(4), {}\n"
        "  model = th.nn.Linear(2, 2).to(dev)\n"
        "  for epoch in range(2):\n"
        "    for i in range(steps):\n"
        "      x = host[i % 4].cuda(non_blocking=True)\n"
        "      y = labels[i % 4].to(dev, non_blocking=True)\n"
        "      out = model(x)\n"
    )
    new = pin_source_text(src, [7, 8])
    assert new is not None
    assert (
        "  host, labels, meta = th.randn(4, 2), th.zeros(4), {}\n"
        "  if th.cuda.is_available():  # pinned once: non_blocking copies overlap\n"
        "    host = host.pin_memory()\n"
        "    labels = labels.pin_memory()\n"
        "  model = th.nn.Linear(2, 2).to(dev)\n"
    ) in new
    only_x = pin_source_text(src, [7]) or ""
    assert "host = host.pin_memory()" in only_x and "labels.pin_memory" not in only_x


def test_pins_go_after_a_later_conditional_rebinding_and_each_after_its_own_line() -> None:
    src = (
        "import torch\n"
        "def main(fix, dev):\n"
        "    host = torch.randn(4, 8)\n"
        "    labels = torch.zeros(4)\n"
        "    if fix:\n"
        "        host = host.float()\n"
        "    for i in range(3):\n"
        "        x, y = host[i].to(dev, non_blocking=True), labels[i].to(dev)\n"
    )
    new = pin_source_text(src, [8])
    assert new is not None
    assert (
        "    labels = torch.zeros(4)\n"
        "    if torch.cuda.is_available():  # pinned once: non_blocking copies overlap\n"
        "        labels = labels.pin_memory()\n"
        "    if fix:\n"
        "        host = host.float()\n"
        "    if torch.cuda.is_available():  # pinned once: non_blocking copies overlap\n"
        "        host = host.pin_memory()\n"
        "    for i in range(3):\n"
    ) in new


def test_a_notebook_cell_uses_the_kernels_name_for_torch() -> None:
    cell = "batch = make()\nfor _ in range(3):\n    out = batch.to('cuda', non_blocking=True)\n"
    assert pin_source_text(cell, [3]) is None  # no name for torch at all
    new = pin_source_text(cell, [3], torch_alias="tc") or ""
    assert "if tc.cuda.is_available():" in new and "    batch = batch.pin_memory()\n" in new


@pytest.mark.parametrize(
    ("source", "why"),
    [
        (
            "import torch\nfor x, y in loader:\n    x = x.to('cuda', non_blocking=True)\n",
            "the loop's own target: the DataLoader's pin_memory is that fix",
        ),
        (
            "import torch\nfor i in range(3):\n    h = torch.randn(2)\n"
            "    x = h.to('cuda', non_blocking=True)\n",
            "made inside the loop",
        ),
        (
            "import torch\ndef f(h):\n    for i in range(3):\n"
            "        x = h.to('cuda', non_blocking=True)\n",
            "a parameter, made by the caller",
        ),
        (
            "import torch\nh = torch.randn(2)\ndef f():\n    for i in range(3):\n"
            "        x = h.to('cuda', non_blocking=True)\n",
            "made in another scope",
        ),
        (
            "import torch\nb = {'x': torch.randn(2)}\nfor i in range(3):\n"
            "    x = b['x'].to('cuda', non_blocking=True)\n",
            "a dict's entry",
        ),
        (
            "import torch\nh = torch.randn(2)\nh += 1\nfor i in range(3):\n"
            "    x = h.to('cuda', non_blocking=True)\n",
            "last bound by an augmented assignment",
        ),
        (
            "import torch\nh = (torch.randn(2), torch.randn(2))\nfor i in range(3):\n"
            "    x = h[0].to('cuda', non_blocking=True)\n",
            "a tuple, not a tensor",
        ),
        (
            "from torch import nn\nh = nn.Parameter()\nfor i in range(3):\n"
            "    x = h.to('cuda', non_blocking=True)\n",
            "no name for torch in the file",
        ),
    ],
)
def test_no_pin_patch(source: str, why: str) -> None:
    assert pin_source_text(source, [line_of(source, "non_blocking")]) is None, why


CONV = """import torch
import torch.nn.functional as F
from torch import nn


def train(dev):
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Flatten()).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    crit = nn.CrossEntropyLoss()
    for x, y in batches():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = crit(model(x), y)
        loss.backward()
"""


def test_channels_last_after_the_model_is_made_and_on_its_input() -> None:
    new = channels_last_text(CONV, line_of(CONV, "model(x)"))
    assert new is not None
    assert (
        "    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Flatten()).to(dev)\n"
        "    model = model.to(memory_format=torch.channels_last)\n"
        "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    ) in new
    assert "loss = crit(model(x.contiguous(memory_format=torch.channels_last)), y)\n" in new
    # The input is left as it is where the watch did not see it 4-d and NCHW.
    only_model = channels_last_text(CONV, line_of(CONV, "model(x)"), inputs=False) or ""
    assert "model = model.to(memory_format" in only_model and "contiguous" not in only_model


def test_channels_last_for_an_attribute_model_a_subscript_input_and_keywords_only() -> None:
    src = (
        "import torch as T\n"
        "class Trainer:\n"
        "    def fit(self, data):\n"
        "        self.net = build()\n"
        "        for b in data:\n"
        "            out = self.net(b[0], scale=2)\n"
        "            out2 = self.net(**b)\n"
    )
    new = channels_last_text(src, 6) or ""
    assert "        self.net = self.net.to(memory_format=T.channels_last)\n" in new
    assert "out = self.net(b[0].contiguous(memory_format=T.channels_last), scale=2)" in new
    kw = channels_last_text(src, 7) or ""
    assert "self.net = self.net.to(memory_format" in kw and "self.net(**b)\n" in kw


@pytest.mark.parametrize(
    ("source", "why"),
    [
        (
            CONV.replace(
                "to(dev)\n", "to(dev)\n    model = model.to(memory_format=torch.channels_last)\n"
            ),
            "converted already",
        ),
        (CONV.replace("    model = nn.Sequential", "    modell = nn.Sequential"), "not made here"),
        (
            CONV.replace("def train(dev):", "def train(dev, model):").replace(
                "    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Flatten()).to(dev)\n", ""
            ),
            "a parameter",
        ),
        (CONV.replace("import torch\n", "").replace("torch.", "nn."), "no name for torch"),
        (
            CONV.replace("        loss.backward()", "        model = swap(model)"),
            "rebound inside the loop",
        ),
    ],
)
def test_no_channels_last_patch(source: str, why: str) -> None:
    assert channels_last_text(source, line_of(source, "model(x)")) is None, why


def test_a_conversion_under_a_condition_does_not_count() -> None:
    convert = "        model = model.to(memory_format=torch.channels_last)\n"
    src = CONV.replace("    opt = torch", f"    if fast:\n{convert}    opt = torch")
    new = channels_last_text(src, line_of(src, "model(x)")) or ""
    assert (
        "        model = model.to(memory_format=torch.channels_last)\n"
        "    model = model.to(memory_format=torch.channels_last)\n"
    ) in new


def _gpu_evidence(**kw: object) -> WorkloadEvidence:
    split = dict.fromkeys(
        ("compute", "communication", "copy", "sync_stall", "data_wait", "launch_overhead",
         "other_cpu"), 0.0)  # fmt: skip
    split.update({"compute": 60.0, "copy": 30.0, "other_cpu": 10.0})
    w = GpuWindow(steps=3, gpu=True, split_ms=split)
    w.conv_lowp_ms, w.layout_transform_ms = 40.0, 8.0
    ev = WorkloadEvidence(step_mode="optimizer", step_times_ms=[100.0] * 6, cuda_available=True,
                          cuda_devices=1, window=w, tf32_matmul=True)  # fmt: skip
    for k, v in kw.items():
        setattr(ev, k, v)
    return ev


def test_the_findings_carry_the_patches() -> None:
    src = (SCENARIOS / "pageable_copy.py").read_text()
    conv = (SCENARIOS / "conv_nchw_amp.py").read_text()
    copies = [
        CopySite("pageable_async", 6, 10**6, 3.0, "pageable_copy.py", ln, None,
                 CodeSource("pageable_copy.py", src, ln))
        for ln in (line_of(src, "x = host["), line_of(src, "y = labels["))
    ]  # fmt: skip
    ev = _gpu_evidence(
        copies=copies,
        placement=Placement(has_conv=True, input_channels_last=False, model_channels_last=False),
        forward_source=CodeSource("conv_nchw_amp.py", conv, line_of(conv, "model(x)")),
    )
    found = {f.id: f for f in analyse(ev).findings}
    pin = found["code.pageable_copy"].fix
    assert pin.patch is not None and "+        host = host.pin_memory()" in pin.patch
    assert "+        labels = labels.pin_memory()" in pin.patch
    assert [(p.path, p.sha256) for p in pin.patch_files or []] == [
        ("pageable_copy.py", text_sha256(src))
    ]
    cl = found["load.channels_last"].fix
    assert cl.patch is not None and "+    model = model.to(memory_format=" in cl.patch
    assert "model(x.contiguous(memory_format=torch.channels_last))" in cl.patch
    assert pin.code and cl.code  # the snippets stay beside them
    # A copy of a loader's batch (the loop's target): no patch of the script's own tensor.
    loop = "import torch\nfor x in loader:\n    x = x.to('cuda', non_blocking=True)\n"
    ev2 = _gpu_evidence(copies=[CopySite("pageable_async", 6, 10**6, 3.0, "t.py", 3, None,
                                         CodeSource("t.py", loop, 3))])  # fmt: skip
    f2 = next(f for f in analyse(ev2).findings if f.id == "code.pageable_copy")
    assert f2.fix.patch is None and f2.fix.code


def test_the_watch_pins_the_tensor_its_copy_line_reads() -> None:
    # "meta" stands in for an accelerator (a real copy to another device type), as in
    # test_watch_session.py: the copy's line is recorded, and the file around it patched.
    x = torch.randn(4, 32)
    model = torch.nn.Linear(32, 4)
    with Watch(steps=3, warmup=1, profile_steps=1, device_types=("meta",)) as w:
        while True:
            batch = x.to("meta", non_blocking=True)  # PAGEABLE LINE
            model(x if batch.is_meta else batch).sum().backward()
    rep = w.report
    assert rep is not None
    f = rep.finding("code.pageable_copy")
    assert f is not None and f.fix.patch is not None
    assert (
        "     x = torch.randn(4, 32)\n"
        "+    if torch.cuda.is_available():  # pinned once: non_blocking copies overlap\n"
        "+        x = x.pin_memory()\n"
    ) in f.fix.patch
    here = os.path.relpath(__file__)
    assert f.fix.patch.startswith(f"--- a/{here}\n")


def _scenario_diff(name: str) -> str | None:
    src = (SCENARIOS / f"{name}.py").read_text()
    if name == "pageable_copy":
        lines = [line_of(src, "x = host["), line_of(src, "y = labels[")]
        new = pin_source_text(src, lines)
    else:
        new = channels_last_text(src, line_of(src, "model(x)"))
    return None if new is None else unified_diff(src, new, f"{name}.py")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["pageable_copy", "conv_nchw_amp"])
def test_the_scenarios_patch_applies_and_the_patched_script_runs_on_the_cpu(
    name: str, tmp_path: Path
) -> None:
    # On a CPU these findings are not raised (no pageable copies, no Tensor Core convolutions),
    # so the patch is made from the scenario's real text at the lines the watch records.
    copy_scenario(name, tmp_path)
    diff = _scenario_diff(name)
    assert diff is not None
    apply_patch(tmp_path, diff)
    assert "channels_last" in diff or "pin_memory()" in diff
    assert run_scenario(tmp_path, name, "--device", "cpu", "--iters", "4", "--warmup", "1")


def test_the_model_is_compiled_in_place_after_the_last_line_that_makes_it() -> None:
    from gpusight.fixes.where_made import compile_text

    src = textwrap.dedent("""
        def train(loader, dev):
            model = Net()
            model = model.to(dev)
            opt = torch.optim.AdamW(model.parameters())
            for x, y in loader:
                loss = crit(model(x.to(dev)), y.to(dev))
                loss.backward()
                opt.step()
    """)
    call = next(i for i, s in enumerate(src.splitlines(), 1) if "crit(model(" in s)
    out = compile_text(src, call, "reduce-overhead")
    assert out is not None
    lines = out.splitlines()
    assert lines[lines.index("    model = model.to(dev)") + 1] == (
        "    model.compile(mode='reduce-overhead')"
    )
    assert compile_text(out, call + 1) is None  # compiled already
    done = src.replace("    model = Net()\n", "    model = torch.compile(Net())\n")
    assert compile_text(done, call) is None
    # A model that comes in as an argument is compiled where the caller makes it: no patch.
    param = src.replace("def train(loader, dev):", "def train(model, loader, dev):").replace(
        "    model = Net()\n    model = model.to(dev)\n", ""
    )
    assert compile_text(param, call - 2) is None
