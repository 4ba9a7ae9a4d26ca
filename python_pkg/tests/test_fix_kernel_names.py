"""A fix's code in the user's names, and what it would still need from their kernel."""

from __future__ import annotations

import torch
from gpusight.fixes.kernel_names import bind, free_names, mark_unbound, rename, user_names
from gpusight.report import Fix
from torch.utils.data import DataLoader, TensorDataset

LOADER = (
    "# Measured: 1.90x faster per step (num_workers=2).\n"
    "loader = torch.utils.data.DataLoader(dataset, batch_size=8, num_workers=2)\n"
)
LOOP = (
    "import torch\n"
    "for x, y in loader:\n"
    "    with torch.autocast('cuda', dtype=torch.bfloat16):\n"
    "        loss = loss_fn(model(x.to(device)), y.to(device))\n"
    "    total = sum(p.numel() for p in model.parameters())\n"
    "    loss.backward()\n"
)


def test_free_names_are_read_before_bound_in_execution_order() -> None:
    assert free_names(LOADER) == ["torch", "dataset"]  # `loader` is the code's own
    assert free_names(LOOP) == ["loader", "loss_fn", "model", "device"]  # x, y, p, loss bound
    assert free_names("x = x + 1\n") == ["x"]
    more = (
        "try:\n    import apex\nexcept ImportError as exc:\n    print(exc)\n"
        "key = lambda b, *a: b.size(0) + k\n"
        "if (n := len(items)) > 1:\n    pass\n"
        "class Cfg(Base):\n    pass\nCfg()\n"
    )
    assert free_names(more) == ["k", "items", "Base"]
    assert free_names("not python (") == []


def test_rename_touches_variables_only() -> None:
    code = "loader = DataLoader(dataset, batch_size=8)\nds = DataLoader(dataset=dataset)\n"
    out = rename(code, {"dataset": "train_set", "loader": "train_loader"})
    assert out == (
        "train_loader = DataLoader(train_set, batch_size=8)\n"
        "ds = DataLoader(dataset=train_set)\n"  # the keyword stays, its value is renamed
    )
    assert rename("model.dataset\n", {"dataset": "ds"}) == "model.dataset\n"


def test_the_users_names_come_from_what_their_namespace_binds() -> None:
    # The issue's notebook: `DataLoader(dataset, ...)` raised NameError in a kernel that named
    # its data `train_ds` and its loader `train_loader`.
    train_ds = TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,)))
    train_loader = DataLoader(train_ds, batch_size=8)
    net = torch.nn.Linear(4, 2)
    ns = {"torch": torch, "train_ds": train_ds, "train_loader": train_loader, "net": net,
          "_": net}  # fmt: skip
    objects = {"model": net, "loader": train_loader, "dataset": train_ds, "optimizer": None}
    names = user_names(objects, ns)
    assert names == {"model": "net", "loader": "train_loader", "dataset": "train_ds"}
    fix = Fix(text="workers", code=LOADER, language="python")
    bind(fix, names, ns.keys())
    assert fix.code is not None and "DataLoader(train_ds, batch_size=8" in fix.code
    assert fix.code.splitlines()[1].startswith("train_loader = ")
    assert fix.unbound_names is None
    exec(fix.code, dict(ns))  # runs in that kernel: no NameError

    loop = Fix(text="bf16", code=LOOP, language="python")
    bind(loop, names, ns.keys())
    assert loop.unbound_names == ["loss_fn", "device"]  # Copy only, and said why


def test_a_shown_report_marks_what_the_kernel_lacks() -> None:
    data = {
        "findings": [
            {"fix": {"text": "w", "code": LOADER, "language": "python"}},
            {"fix": {"text": "s", "code": "pip install x\n", "language": "shell"}},
        ],
        "what_if": [{"fix": {"text": "t", "code": LOADER, "language": "python"}}],
    }
    data["what_if"][0]["fix"]["unbound_names"] = ["stale"]
    mark_unbound(data, {"torch"})
    assert data["findings"][0]["fix"]["unbound_names"] == ["dataset"]
    assert "unbound_names" not in data["findings"][1]["fix"]
    mark_unbound(data, {"torch", "dataset"})
    assert "unbound_names" not in data["findings"][0]["fix"]
    assert "unbound_names" not in data["what_if"][0]["fix"]
