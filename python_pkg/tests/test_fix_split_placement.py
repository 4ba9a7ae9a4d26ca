"""Modules left on the CPU moved to the rest's device as a patch of the user's lines
(fixes/split_placement.py) and what the source says about them (fixes/module_source.py): the
shape of issue #47's script, other shapes that get a patch, and those that get none."""

from __future__ import annotations

import pytest
from gpusight.fixes import diff_apply
from gpusight.fixes.module_source import called_module, device_expr
from gpusight.fixes.patch import unified_diff
from gpusight.fixes.split_placement import move_text

# Issue #47, as the H200 run had it: a backbone moved to the GPU, a head built after it and
# never moved, fed by .cpu(); the labels come from the loader and stay on the CPU.
SCRIPT = """import torch
import torch.nn.functional as F
from torch import nn

dev = torch.device("cuda")
backbone = timm.create_model("vit_base_patch16_224", num_classes=0).to(dev)
head = nn.Sequential(
    nn.Linear(768, 4096), nn.GELU(), nn.Linear(4096, 4096), nn.GELU(), nn.Linear(4096, 1000)
)
opt = torch.optim.AdamW([*backbone.parameters(), *head.parameters()], lr=1e-4)
for epoch in range(2):
    for x, y in loader:
        x = x.to(dev, non_blocking=True)
        feats = backbone(x)
        logits = head(feats.cpu())
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(loss.item())
"""


def line_of(source: str, text: str) -> int:
    return next(i for i, ln in enumerate(source.splitlines(), 1) if text in ln)


def test_the_source_names_the_module_its_statement_and_the_copy_that_feeds_it() -> None:
    got = called_module(SCRIPT, line_of(SCRIPT, "head(feats"))
    assert got is not None and got.name == "head"
    assert got.built is not None and got.built.line == line_of(SCRIPT, "head = nn.Sequential(")
    assert got.built.code == "head = nn.Sequential("
    assert [(c.line, c.segment) for c in got.copies] == [(15, "feats.cpu()")]
    # The device, as the script moved the backbone: its own name for it.
    assert device_expr(SCRIPT, line_of(SCRIPT, "backbone(x)")) == "dev"
    assert device_expr("m = Net().cuda()\nfor x in xs:\n    m(x)\n", 3) == '"cuda"'
    # A dtype is no device.
    assert device_expr("m = Net().to(torch.bfloat16)\nfor x in xs:\n    m(x)\n", 3) is None


def test_the_head_moves_where_it_is_made_the_copy_goes_and_the_labels_follow() -> None:
    new = move_text(SCRIPT, [(line_of(SCRIPT, "head(feats"), None)], "dev")
    assert new is not None
    # Before the optimizer is built: it updates the moved parameters.
    assert ")\nhead = head.to(dev)\nopt = torch.optim.AdamW(" in new
    assert "        logits = head(feats)\n" in new
    # The labels meet the head's output in the loss: they move with it, first thing.
    assert "    for x, y in loader:\n        y = y.to(dev, non_blocking=True)\n" in new
    assert ".cpu()" not in new
    # As a diff of the user's file, it applies to the text it was made from.
    (diff,) = diff_apply.parse(unified_diff(SCRIPT, new, "train.py"))
    assert diff_apply.apply(SCRIPT, diff) == new


def test_a_copy_on_the_statement_before_and_labels_copied_back_are_undone() -> None:
    src = (
        "import torch\n"
        "def train(loader, dev):\n"
        "    backbone = Net().cuda()\n"
        "    head = Head()\n"
        "    crit = torch.nn.CrossEntropyLoss()\n"
        "    for i, (x, y) in enumerate(loader):\n"
        "        x, y = x.to(dev), y.to(dev)\n"
        "        f = backbone(x).cpu()\n"
        "        y = y.cpu()\n"
        "        loss = crit(head(f), y)\n"
        "        loss.backward()\n"
    )
    got = called_module(src, 10)
    assert got is not None and [c.segment for c in got.copies] == ["backbone(x).cpu()"]
    new = move_text(src, [(10, None)], "dev")
    assert new is not None
    assert "    head = Head()\n    head = head.to(dev)\n" in new
    assert "        f = backbone(x)\n        loss = crit(head(f), y)\n" in new  # y = y.cpu() gone


def patched(loop: str) -> str | None:
    src = 'import torch\nbackbone = Net().to("cuda")\nhead = Head()\n' + loop
    line = line_of(src, "head(")
    col = src.splitlines()[line - 1].index("head(")  # the watch tells which call it saw
    return move_text(src, [(line, col)], '"cuda"')


@pytest.mark.parametrize(
    ("loop", "control", "why"),
    [
        (
            "while True:\n"
            "    x = torch.randn(8, 4).cuda()\n"
            "    y = torch.randint(0, 3, (8,))\n"
            "    loss = F.cross_entropy(head(backbone(x).cpu()), y)\n",
            ("torch.randint(0, 3, (8,))", "torch.randint(0, 3, (8,)).cuda().cpu()"),
            "labels made on the CPU in the loop: where they should go is not known",
        ),
        (
            "for x, y in loader:\n"
            "    out = head(backbone(x.cuda()).cpu())\n"
            "    print(y.numpy())\n"
            "    loss = (out - y).pow(2).mean()\n",
            ("    print(y.numpy())\n", ""),
            "the labels are read on the host as well",
        ),
    ],
)
def test_no_patch_where_what_meets_the_output_is_not_known(
    loop: str, control: tuple[str, str], why: str
) -> None:
    assert patched(loop) is None, why
    # The same loop without that gets its patch: the reason above is the one that stopped it.
    new = patched(loop.replace(*control))
    assert new is not None and 'head = Head()\nhead = head.to("cuda")\n' in new


def test_what_reads_the_output_on_the_host_meets_nothing() -> None:
    src = (
        "import torch\n"
        'backbone = Net().to("cuda")\n'
        "head = Head()\n"
        "for x in loader:\n"
        "    x = x.cuda()\n"
        "    out = head(backbone(x).cpu())\n"
        "    seen.append(out.argmax(1).cpu())\n"  # a host list: the output goes back itself
        "    out.sum().backward()\n"
    )
    new = move_text(src, [(6, 10)], '"cuda"')
    assert new is not None and "    out = head(backbone(x))\n" in new
    assert 'head = Head()\nhead = head.to("cuda")\n' in new
