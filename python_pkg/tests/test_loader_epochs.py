"""Items a step takes where its batches come from several epochs' iterators of one loader: each
``iter(loader)`` is an iterator of its own, and a step of two micro-batches (gradient
accumulation over a short epoch, Accelerate's prepared loader) takes them from both. Real CPU
torch through ``gpusight run``."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpusight.watch.collected import LoaderSeen, busiest_loader
from test_host_lines import _run


def test_one_loaders_epochs_are_counted_together_and_other_loaders_apart() -> None:
    a1 = LoaderSeen(batch_size=16, calls=5, dataset_id=1)
    a2 = LoaderSeen(batch_size=16, calls=5, dataset_id=1)
    ev = LoaderSeen(batch_size=64, calls=8, dataset_id=2)
    got = busiest_loader([a1, a2, ev])
    assert got is not None and (got.calls, got.batch_size) == (10, 16)
    assert (a1.calls, a2.calls) == (5, 5)  # the iterators' own records stay as they were
    # Loaders whose dataset is not known are not merged.
    unknown = [LoaderSeen(batch_size=16, calls=5), LoaderSeen(batch_size=16, calls=6)]
    got = busiest_loader(unknown)
    assert got is not None and got.calls == 6
    assert busiest_loader([]) is None


ACCUMULATE_OVER_EPOCHS = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(80, 8), torch.randint(0, 2, (80,))), batch_size=16)
micro = 0
for epoch in range(40):
    for x, y in loader:  # 5 batches an epoch: every other step spans two epochs
        nn.functional.cross_entropy(model(x), y).backward()
        micro += 1
        if micro % 2 == 0:
            opt.step()
            opt.zero_grad()
"""


def test_a_step_of_two_micro_batches_over_epoch_ends_takes_two_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rep = _run(tmp_path, ACCUMULATE_OVER_EPOCHS, monkeypatch)
    assert rep["run"]["items_per_step"] == 32


EIGHT_MICRO_BATCHES = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = nn.Sequential(*[nn.Linear(8, 8) for _ in range(4)])
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(TensorDataset(torch.randn(16 * 8 * 100, 8)), batch_size=16)
for i, (x,) in enumerate(loader):
    (model(x).square().mean() / 8).backward()
    if (i + 1) % 8 == 0:
        opt.step()
        opt.zero_grad()
"""


def test_the_batches_of_the_steps_after_the_measured_ones_are_not_a_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """timm_accum on an H100 read 144 items a step (16 x 9) for 16 x 8: the FLOP count's step
    and the line clock's two, after the measured ones, took 24 batches no record counted."""
    rep = _run(tmp_path, EIGHT_MICRO_BATCHES, monkeypatch)
    assert rep["run"]["items_per_step"] == 128


def test_the_what_ifs_facts_count_a_loaders_epochs_together() -> None:
    """A run over short epochs (a Lightning script's were 64 batches against 128 steps): the
    facts read one epoch's iterator, said no loader fed the steps, and the batch knob fell back
    to repeating the model's inputs (compute only) instead of the DataLoader's batch_size (end
    to end)."""
    import torch
    from gpusight.knobs import Situation
    from gpusight.knobs.batch import Batch
    from gpusight.rerun.facts import from_watch
    from gpusight.watch import Watch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    model = nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
    loader = DataLoader(data, batch_size=8)
    with Watch(steps=30, warmup=3, profile_steps=0) as w:
        for _epoch in range(8):
            for x, y in loader:  # 8 batches an epoch: the watch spans several
                nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
                opt.zero_grad()
    facts = from_watch(w)
    assert facts["loader"]["batches_per_step"] == 1
    assert facts["loader"]["batch_size"] == 8
    arms = [a for g in Batch().groups(Situation.of(facts)) for a in g.arms if not a.skipped]
    assert arms and all("batch_size" in a.changes for a in arms), [a.changes for a in arms]
    assert not any(a.changes.get("replicate") for a in arms)
