"""``%%gpusight --compare-to N --finding ID`` through a real IPython shell (real CPU torch, a
real DataLoader): the cell watched again after a fix, compared with the earlier watched cell's
report, the measured gain beside the one that report predicted (jupyter/cell_compare.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("IPython")
from IPython.core.error import UsageError
from watch_support import SlowDataset

pytestmark = [
    pytest.mark.usefixtures("one_torch_thread"),
    pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning"),
]


SETUP = """import torch
from torch import nn
from torch.utils.data import DataLoader
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(ds, batch_size=8, num_workers={workers})
"""

TRAIN = """for x, y in loader:
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
"""


def test_a_fixed_loader_is_compared_with_the_earlier_watch_and_its_prediction(
    ip: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    ip.user_ns["ds"] = SlowDataset(n=8 * 60, sleep_s=0.003)
    ip.run_cell(SETUP.format(workers=0), store_history=True).raise_error()
    res = ip.run_cell(
        f"%%gpusight --steps 10 --profile-steps 0 --json {tmp_path / 'before.json'}\n" + TRAIN,
        store_history=True,
    )
    res.raise_error()
    count = ip.execution_count - 1
    before = res.result
    f = before.finding("load.input_bound")
    assert f is not None and f.impact.speedup
    capsys.readouterr()
    # The fix applied (the loader's cell run again with workers), then verified.
    ip.run_cell(SETUP.format(workers=2), store_history=True).raise_error()
    line = f"--steps 10 --profile-steps 0 --compare-to {count} --finding load.input_bound"
    after = ip.run_cell(f"%%gpusight {line}\n" + TRAIN, store_history=True)
    after.raise_error()
    out = capsys.readouterr().out
    assert f"gpusight verify: cell [{count}] -> this cell" in out
    gain = float(out.split("measured: ")[1].split("x")[0])
    assert gain > 1.3  # two workers load 8 items of 3 ms each in parallel with the step
    assert f"predicted: {f.impact.speedup:.2f}x (load.input_bound" in out
    assert "gpusight diff: cell" in out and "step-time breakdown" in out
    # A saved report names the other side as well.
    ip.run_cell(f"%%gpusight --steps 6 --compare-to {tmp_path / 'before.json'}\n" + TRAIN)
    assert "gpusight verify: before.json -> this cell" in capsys.readouterr().out


def test_an_unknown_cell_is_a_usage_error_that_lists_the_watched_ones(ip: Any) -> None:
    unknown = r"no %%gpusight cell \[9999\].*watched cells: (\[|none yet)"
    with pytest.raises(UsageError, match=unknown):
        ip.run_cell_magic("gpusight", "--compare-to 9999", "pass")
    with pytest.raises(UsageError, match="neither a watched cell's number nor a report file"):
        ip.run_cell_magic("gpusight", "--compare-to nowhere.json", "pass")
