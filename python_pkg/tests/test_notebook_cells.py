"""The DataLoader fix as a change to the notebook cell that built the loader (watch/
notebook_cells.py, fixes/cell_patch.py), through a real IPython shell running cells as a kernel
does (history stored), with real CPU torch: the cell is named by its execution count and text,
its patched text changes only the call, and the fix's code runs as it is in that shell."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("IPython")
from gpusight.fixes.cell_patch import CellSource, cell_fix, statement_at
from gpusight.report import Fix, Report
from gpusight.report_parse import report_from_dict
from watch_support import SlowDataset

pytestmark = pytest.mark.usefixtures("one_torch_thread")


SETUP = """import torch
from torch import nn
from torch.utils.data import DataLoader
%precision 3
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = nn.CrossEntropyLoss()
train_loader = DataLoader(
    ds,
    batch_size=2,  # small batches
)
"""

LOOP = """for x, y in train_loader:
    optimizer.zero_grad()
    loss_fn(model(x), y).backward()
    optimizer.step()
"""

WATCH = "%%gpusight --steps 4 --warmup 1 --profile-steps 0\n"


def run(ip: Any, cell: str) -> Any:
    """A cell run as the kernel runs it: counted, in the history."""
    result = ip.run_cell(cell, store_history=True)
    result.raise_error()
    return result


def loader_fix(report: Report) -> Fix:
    f = report.finding("load.input_bound")
    assert f is not None, report.finding_ids
    return f.fix


def test_a_loader_from_an_earlier_cell_is_changed_in_that_cell(ip: Any) -> None:
    ip.user_ns["ds"] = SlowDataset(n=64)
    count = run(ip, SETUP).execution_count
    report = run(ip, WATCH + LOOP).result
    report.validate()
    fix = loader_fix(report)
    cell = fix.cell
    assert cell is not None
    # Found by its text as it ran (the history cuts trailing newlines) and its In[n].
    assert cell.execution_count == count and cell.label == f"cell [{count}]"
    assert cell.source == SETUP.rstrip("\n")
    # The call spans lines 8-11 of the cell; the line magic stays, only line 10 changes.
    assert (cell.line, cell.end_line) == (8, 11)
    before, after = cell.source.split("\n"), cell.patched.split("\n")
    assert len(before) == len(after)
    changed = [i + 1 for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert changed == [10]
    assert after[9].startswith("    batch_size=2, num_workers=") and "# small batches" in after[9]
    assert after[3] == "%precision 3"
    assert fix.patch is not None and f"--- a/cell [{count}]" in fix.patch
    # The fix's code rebuilds the user's loader with the user's own names, and runs as it is.
    assert fix.code is not None and fix.language == "python"
    assert "train_loader = DataLoader(\n    ds," in fix.code and "dataset" not in fix.code
    old = ip.user_ns["train_loader"]
    run(ip, fix.code)
    new = ip.user_ns["train_loader"]
    assert new is not old and new.dataset is old.dataset and new.num_workers >= 1
    # Through JSON and back: the cell is part of the report's contract.
    again = report_from_dict(report.to_dict())
    assert loader_fix(again).cell == cell


def test_a_loader_built_in_the_watched_cell_counts_its_magic_line(ip: Any) -> None:
    ip.user_ns["ds"] = SlowDataset(n=64)
    run(ip, SETUP)
    build = "loader2 = DataLoader(ds, batch_size=2)\n"
    watched = WATCH + build + LOOP.replace("train_loader", "loader2")
    result = run(ip, watched)
    cell = loader_fix(result.result).cell
    assert cell is not None
    assert cell.execution_count == result.execution_count
    assert cell.source == watched.rstrip("\n") and (cell.line, cell.end_line) == (2, 2)
    assert cell.patched.split("\n")[0] == WATCH.rstrip("\n")
    assert cell.patched.split("\n")[1].startswith("loader2 = DataLoader(ds, batch_size=2, num_")


def test_no_cell_when_the_name_was_since_bound_to_something_else(ip: Any) -> None:
    ip.user_ns["ds"] = SlowDataset(n=64)
    run(ip, SETUP)
    # The loader now comes from a function: its DataLoader(...) call is not this name's.
    run(ip, "def make():\n    return DataLoader(ds, batch_size=2)\ntrain_loader = make()\n")
    fix = loader_fix(run(ip, WATCH + LOOP).result)
    assert fix.cell is None


def test_the_cell_text_must_match_what_ran() -> None:
    compiled = "a = 1\nloader = DataLoader(ds)\n"
    ok = cell_fix(CellSource("a = 1\nloader = DataLoader(ds)", compiled, 2), {"num_workers": 2})
    assert ok is not None and ok.patch.patched == "a = 1\nloader = DataLoader(ds, num_workers=2)"
    # The last line of a cell has no newline: none is added.
    assert not ok.patch.patched.endswith("\n")
    stale = cell_fix(
        CellSource("a = 1\nloader = DataLoader(data)", compiled, 2), {"num_workers": 2}
    )
    assert stale is None
    assert cell_fix(CellSource(compiled, compiled, 2), {}) is None  # nothing to change


def test_only_a_statement_that_can_run_alone_is_offered_as_code() -> None:
    compiled = "for epoch in range(3):\n    loader = DataLoader(ds)\n    train(loader)\n"
    fixed = cell_fix(CellSource(compiled.rstrip("\n"), compiled, 2), {"num_workers": 2})
    assert fixed is not None and fixed.patch.line == 2
    assert fixed.code is None  # re-running the loop would train three epochs
    code = "@wrap\ndef make():\n    return DataLoader(ds)\n\nx = 1\n"
    assert statement_at(code, 3) == "@wrap\ndef make():\n    return DataLoader(ds)\n"
    assert statement_at(code, 5) == "x = 1\n"


FORWARD_LOOP = """losses = []
for step in range(3):
    opt.zero_grad()
    out = model(torch.randn(4, 8))
    loss = out.float().pow(2).mean()
    loss.backward()
    opt.step()
    losses.append(loss.item())"""


def test_autocast_goes_around_the_forward_line_of_the_cell_that_ran_it(ip: Any) -> None:
    from gpusight.fixes.workload_patches import autocast_fix as _autocast_fix
    from gpusight.rules.workload import CodeSource
    from gpusight.watch.notebook_cells import cell_at, torch_alias

    ip.run_cell(
        "import torch\nmodel = torch.nn.Linear(8, 2)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)",
        store_history=True,
    ).raise_error()
    ip.run_cell(FORWARD_LOOP, store_history=True).raise_error()
    count = ip.execution_count - 1
    names = [n for n, c in ip.compile._filename_map.items() if c == count]
    assert names, "IPython keeps the compiled name of each cell"
    cell = cell_at(names[0], 4)  # out = model(...)
    assert cell is not None and cell.execution_count == count
    cell.torch_alias = torch_alias(ip)
    assert cell.torch_alias == "torch"  # the kernel's name: the cell imports nothing
    f = _autocast_fix(Fix(text="autocast"), CodeSource(cell.label, cell.compiled, 4, cell))
    assert f.cell is not None and f.cell.source == FORWARD_LOOP
    assert f.cell.line == 4
    patched = f.cell.patched.splitlines()
    assert patched[3] == '    with torch.autocast("cuda", dtype=torch.bfloat16):'
    assert patched[4] == "        out = model(torch.randn(4, 8))"
    before = FORWARD_LOOP.splitlines()
    assert patched[:3] == before[:3] and patched[5:] == before[4:]
    assert "+        out = model(torch.randn(4, 8))" in (f.patch or "")
    compile(f.cell.patched, "<patched cell>", "exec")
    for name in ("model", "opt", "losses", "step", "out", "loss"):  # the shell is shared
        ip.user_ns.pop(name, None)


def test_a_watched_cells_magic_line_stays_when_autocast_goes_in() -> None:
    from gpusight.fixes.workload_patches import autocast_fix as _autocast_fix
    from gpusight.rules.workload import CodeSource

    # The shape cell_at gives a %%gpusight cell: the code that ran is the body below the magic.
    source = "%%gpusight --steps 3\n" + FORWARD_LOOP
    cell = CellSource(source, FORWARD_LOOP + "\n", 4, offset=1, execution_count=7)
    cell.torch_alias = "th"  # the kernel imported torch as th
    f = _autocast_fix(Fix(text="autocast"), CodeSource("cell [7]", FORWARD_LOOP, 4, cell))
    assert f.cell is not None and f.cell.line == 5
    lines = f.cell.patched.splitlines()
    assert lines[0] == "%%gpusight --steps 3"
    assert lines[4] == '    with th.autocast("cuda", dtype=th.bfloat16):'
    # Edited since it ran: no cell change; the plain patch of the code that ran stays.
    stale = CellSource(source.replace("out = model", "y = model"), FORWARD_LOOP + "\n", 4, 1, 7)
    g = _autocast_fix(Fix(text="autocast"), CodeSource("cell [7]", FORWARD_LOOP, 4, stale))
    assert g.cell is None


LOGGING_LOOP = """for step in range(3):
    opt.zero_grad()
    loss = model(torch.randn(4, 8)).float().pow(2).mean()
    loss.backward()
    opt.step()
    print(f"step {step}: {loss.item():.3f}")"""


def test_a_logging_line_that_syncs_is_changed_in_the_cell_that_ran_it(ip: Any) -> None:
    from gpusight.fixes.workload_patches import sync_fix as _sync_fix
    from gpusight.rules.workload import SyncSite
    from gpusight.watch.report_builder import _sync_source
    from gpusight.watch.source_lines import Site

    ip.run_cell(
        "import torch\nfrom torch import nn\nmodel = nn.Linear(8, 3)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n",
        store_history=True,
    ).raise_error()
    ip.run_cell(LOGGING_LOOP, store_history=True).raise_error()
    count = ip.execution_count - 1
    name = next(n for n, c in ip.compile._filename_map.items() if c == count)
    # The sync's site as the watch records it: shown line and the compiled name and line.
    src = _sync_source(Site("cell", 6, "print(...)", (name, 6)), {})
    assert src is not None and src.cell is not None and src.cell.execution_count == count
    f = _sync_fix(Fix(text="log less often", code="# generic"), SyncSite("item", 3, source=src), 50)
    assert f.cell is not None and f.cell.source == LOGGING_LOOP
    lines = f.cell.patched.splitlines()
    assert lines[5] == "    if step % 50 == 0:"
    assert lines[6] == '        print(f"step {step}: {loss.item():.3f}")'
    assert lines[:5] == LOGGING_LOOP.splitlines()[:5]
    compile(f.cell.patched, "<patched cell>", "exec")
    for n in ("model", "opt", "step", "loss"):
        ip.user_ns.pop(n, None)


def test_tf32_from_the_cell_what_if_goes_into_the_training_cell_below_its_magic() -> None:
    import dataclasses

    from gpusight.knobs import by_name
    from gpusight.rerun.plan import Arm

    tf32 = by_name("tf32")
    assert tf32 is not None

    source = "%%gpusight --what-if\n" + FORWARD_LOOP
    cell = CellSource(source, FORWARD_LOOP + "\n", 4, offset=1, execution_count=9)
    cell.torch_alias = "th"
    arm = Arm("tf32", "TF32", {"tf32": True}, "cfg.tf32_disabled")
    f = tf32.fix(arm, None, {"forward_cell": dataclasses.asdict(cell)})
    assert f.cell is not None and f.cell.label == "cell [9]"
    lines = f.cell.patched.splitlines()
    assert lines[0] == "%%gpusight --what-if"
    assert lines[1].startswith("th.backends.cuda.matmul.allow_tf32 = True")
    assert lines[2] == "th.backends.cudnn.allow_tf32 = True"
    assert lines[3:] == FORWARD_LOOP.splitlines()
    # A cell that sets the precision itself: no change offered.
    sets = "th.set_float32_matmul_precision('high')\n" + FORWARD_LOOP
    own = CellSource(sets, sets + "\n", 5)
    g = tf32.fix(arm, None, {"forward_cell": dataclasses.asdict(own)})
    assert g.cell is None
