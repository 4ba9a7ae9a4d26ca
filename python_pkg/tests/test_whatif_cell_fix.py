"""``diagnose`` in a notebook: its loader fix changes the cell that built the user's DataLoader,
as a watched cell's card does (issue #48 point 6), and never a later cell whose ``DataLoader(...)``
line raised before it bound anything. A real IPython shell, real CPU torch."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("IPython")

SETUP = """\
import time
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
import gpusight

class Sleepy(Dataset):
    def __len__(self):
        return 4096
    def __getitem__(self, i):
        time.sleep(0.01)
        return torch.randn(16), i % 4

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
sgd = torch.optim.SGD(net.parameters(), lr=0.1)
"""

BUILD = "train_ds = Sleepy()\ntrain_loader = DataLoader(train_ds, batch_size=8, shuffle=True)\n"
# A try that failed: the call raises NameError before train_loader is bound again.
FAILED = "train_loader = DataLoader(train_ds, batch_size=8, num_workers=2, collate_fn=undefined)\n"
DIAGNOSE = (
    "report = gpusight.diagnose(net, train_loader, loss_fn=nn.CrossEntropyLoss(), "
    "optimizer=sgd, steps=4, budget_s=20, experiments=['num_workers'])\n"
)


@pytest.mark.slow
def test_diagnoses_loader_fix_changes_the_cell_that_built_the_loader(ip: Any) -> None:
    # As a kernel runs cells: each one kept in the history, with its execution count.
    ip.run_cell(SETUP, store_history=True).raise_error()
    built = ip.run_cell(BUILD, store_history=True)
    built.raise_error()
    failed = ip.run_cell(FAILED, store_history=True)
    assert isinstance(failed.error_in_exec, NameError)
    ip.run_cell(DIAGNOSE, store_history=True).raise_error()
    report = ip.user_ns["report"]
    report.validate()
    f = report.finding("load.input_bound")
    assert f is not None and f.impact.basis == "measured", report.what_if
    cell = f.fix.cell
    assert cell is not None, f.fix
    # The cell that made the loader in use, not the later one that raised.
    assert cell.source == BUILD.rstrip("\n")
    assert cell.execution_count == built.execution_count
    assert "train_loader = DataLoader(train_ds, batch_size=8, shuffle=True, num_workers=" in (
        cell.patched
    )
    # The code to insert is that statement, changed, in the kernel's own names: it runs there.
    code = f.fix.code or ""
    assert f"from cell [{built.execution_count}]" in code
    assert "\ntrain_loader = DataLoader(train_ds, batch_size=8, shuffle=True, num_workers=" in code
    assert not f.fix.unbound_names
    ip.run_cell(code).raise_error()
