"""The in-process driver's DataLoader changes are the knobs' own (issue #51): the workers' points,
the other settings' arms and gates, the dataset kept on the GPU, each said once in
``knobs/loader.py`` and ``knobs/dataset_on_device.py``; ``whatif/procedures.py`` only times them.
Real DataLoaders on the CPU; where a gate needs a GPU, a stand-in says what a CUDA machine
would (``knobs.base.Local``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch
from gpusight.knobs import REGISTRY, Situation, by_name
from gpusight.knobs.base import Arm, Knob
from gpusight.knobs.loader import prefetch_point, worker_counts
from gpusight.whatif.arms import Workload
from gpusight.whatif.context import Budget, Context
from gpusight.whatif.plan import ALL
from gpusight.whatif.procedures import EpochStart, LoaderSweep, OnLoader
from torch import nn
from torch.utils.data import DataLoader, Dataset, IterableDataset, TensorDataset


def _knob(name: str) -> Knob:
    knob = by_name(name)
    assert knob is not None
    return knob


def _ctx(loader: Any, cores: int = 16) -> Context:
    work = Workload(nn.Linear(4, 2), loader, nn.CrossEntropyLoss(), None, None, torch.device("cpu"))
    return Context(work, Budget(30.0, None), steps=3, reps=2, cpu_count=cores)


def _data(n: int = 64) -> TensorDataset:
    return TensorDataset(torch.randn(n, 4), torch.randint(0, 2, (n,)))


class Noisy(Dataset[torch.Tensor]):
    """Random augmentation: the same index gives another item each time."""

    def __len__(self) -> int:
        return 16

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.randn(4)


class Stream(IterableDataset[torch.Tensor]):
    def __iter__(self) -> Any:
        return iter(torch.randn(8, 4))


class OnAGpu:
    """What a CUDA machine with ``free`` bytes of device memory would tell the knobs."""

    def __init__(self, loader: Any, free: int = 80 << 30, winner: int | None = None) -> None:
        cuda = SimpleNamespace(mem_get_info=lambda _d=None: (free, free))
        self.torch = SimpleNamespace(cuda=cuda, utils=torch.utils)
        self.cuda, self.device = True, "cuda:0"
        self.loader, self.cpu_count = loader, 16
        self.batches = [next(iter(loader))]
        self.winner = winner

    @property
    def dataloader(self) -> bool:
        return isinstance(self.loader, DataLoader)

    def loader_workers(self) -> int:
        return self.winner if self.winner is not None else self.loader.num_workers


def test_every_dataloader_row_of_diagnose_is_a_knobs_own_with_its_procedure() -> None:
    rows = {r.key: (k.name, r) for k in REGISTRY for r in k.local_rows()}
    loader_rows = {e.key: e for e in ALL if isinstance(e, (OnLoader, EpochStart, LoaderSweep))}
    assert set(loader_rows) == {
        "num_workers",
        "pin_memory",
        "persistent_workers",
        "prefetch_factor",
        "dataset_on_gpu",
    }
    for key, exp in loader_rows.items():
        owner, row = rows[key]
        assert (exp.label, exp.finding_id) == (row.label, row.finding_id), key
        assert exp.knob is by_name(owner)  # type: ignore[attr-defined]
    assert isinstance(loader_rows["num_workers"], LoaderSweep)
    assert isinstance(loader_rows["persistent_workers"], EpochStart)
    # The winners together come after every loader row, before the compute ones.
    order = [e.key for e in ALL]
    assert order.index("loader_combined") == len(loader_rows)
    assert order.index("loader_combined") < order.index("autocast")


def test_both_drivers_sweep_the_same_worker_counts_and_prefetch_point() -> None:
    loader = DataLoader(_data(), batch_size=8, num_workers=1, prefetch_factor=3)
    workers, settings = _knob("workers"), _knob("loader")
    in_process = [a.changes["num_workers"] for a in workers.local_points(_ctx(loader, cores=16))]
    facts = {
        "cuda": True,
        "cpu_count": 16,
        "loader": {"num_workers": 1, "prefetch_factor": 3, "batch_size": 8},
        "breakdown_ms": {"data_wait": 50.0, "compute": 50.0},
        "epochs_seen": 1,
    }
    (group,) = workers.groups(Situation.of(facts))
    assert in_process == [a.changes["num_workers"] for a in group.arms] == worker_counts(1, 16)
    (loader_group,) = settings.groups(Situation.of(facts))
    rerun_pf = next(
        a.changes["prefetch_factor"] for a in loader_group.arms if "prefetch_factor" in a.changes
    )
    arm = settings.local_arm_of(settings.local_rows()[2], OnAGpu(loader))  # type: ignore[arg-type]
    assert isinstance(arm, Arm)
    assert arm.changes["prefetch_factor"] == rerun_pf == prefetch_point(3) == 6


def test_the_workers_sweep_says_why_it_does_not_run() -> None:
    workers = _knob("workers")
    (row,) = workers.local_rows()
    lists = [(torch.randn(2, 4), torch.zeros(2))]
    assert "not a torch.utils.data.DataLoader" in str(workers.local_arm_of(row, _ctx(lists)))
    stream = DataLoader(Stream(), batch_size=4)
    assert "IterableDataset" in str(workers.local_arm_of(row, _ctx(stream)))
    full = DataLoader(_data(), batch_size=8, num_workers=4)
    assert workers.local_arm_of(row, _ctx(full, cores=4)) == (
        "the loader already uses 4 workers for 4 CPU cores"
    )
    # Workers that keep scaling in proportion at the last point: one more, past the cores.
    plain = _ctx(DataLoader(_data()), 8)
    ran = [(a, 2.0 * a.changes["num_workers"]) for a in workers.local_points(plain)]
    assert [a.changes["num_workers"] for a, _ in ran] == worker_counts(0, 8) == [2, 4, 6]
    assert workers.local_next(plain, []) is None
    nxt = workers.local_next(plain, ran)
    assert nxt is not None and nxt.changes == {"num_workers": 12}
    # Gains that flatten out end the sweep at the cores.
    assert workers.local_next(plain, [(a, 1.5) for a, _ in ran]) is None


def test_pinning_runs_on_the_sweeps_winner_and_says_when_it_cannot_help() -> None:
    pin = _knob("loader")
    row = pin.local_rows()[0]
    assert row.key == "pin_memory" and row.finding_id == "code.pageable_copy"
    loader = DataLoader(_data(), batch_size=8)
    assert str(pin.local_arm_of(row, _ctx(loader))).startswith("no CUDA device")
    stacked = pin.local_arm_of(row, OnAGpu(loader, winner=4))  # type: ignore[arg-type]
    assert isinstance(stacked, Arm)
    assert stacked.changes == {"pin_memory": True, "num_workers": 4, "non_blocking": True}
    assert stacked.label.endswith("with num_workers=4")
    own = pin.local_arm_of(row, OnAGpu(loader))  # type: ignore[arg-type]
    assert isinstance(own, Arm) and "num_workers" not in own.changes
    pinned = DataLoader(_data(), batch_size=8, pin_memory=True)
    assert pin.local_arm_of(row, OnAGpu(pinned)) == (  # type: ignore[arg-type]
        "the DataLoader already pins memory (pin_memory=True)"
    )


def test_persistent_workers_needs_workers_and_an_epoch_length() -> None:
    settings = _knob("loader")
    row = settings.local_rows()[1]
    assert row.key == "persistent_workers" and row.procedure == "epoch_start"
    none = DataLoader(_data(), batch_size=8)
    assert "no worker processes" in str(settings.local_arm_of(row, _ctx(none)))
    kept = DataLoader(_data(), batch_size=8, num_workers=2, persistent_workers=True)
    assert "already keeps its workers" in str(settings.local_arm_of(row, _ctx(kept)))
    arm = settings.local_arm_of(row, _ctx(DataLoader(_data(), batch_size=8, num_workers=2)))
    assert isinstance(arm, Arm) and arm.changes == {"num_workers": 2, "persistent_workers": True}

    class ByEpoch(TensorDataset):
        def set_epoch(self, epoch: int) -> None:
            self.epoch = epoch

    epochs = DataLoader(ByEpoch(torch.randn(16, 4)), batch_size=8, num_workers=2)
    assert "set_epoch" in str(settings.local_arm_of(row, _ctx(epochs)))


def test_the_dataset_goes_to_the_gpu_only_where_it_fits_and_its_items_are_fixed() -> None:
    knob = _knob("dataset_on_device")
    (row,) = knob.local_rows()
    fixed = DataLoader(_data(1024), batch_size=8)
    assert knob.local_arm_of(row, _ctx(fixed)) == "no CUDA device"
    arm = knob.local_arm_of(row, OnAGpu(fixed))  # type: ignore[arg-type]
    assert isinstance(arm, Arm) and arm.changes == {"source": "device"}
    # 1,024 items of 4 floats and a label: 24 KiB; with 32 KiB free it does not fit in half.
    tight = knob.local_arm_of(row, OnAGpu(fixed, free=32 << 10))  # type: ignore[arg-type]
    assert isinstance(tight, str) and tight.startswith("the dataset (0.0 GB) does not fit")
    noisy = knob.local_arm_of(row, OnAGpu(DataLoader(Noisy(), batch_size=4)))  # type: ignore[arg-type]
    assert isinstance(noisy, str) and "freeze the augmentation" in noisy
    # A re-run cannot move the script's dataset: asked for by name, it says so.
    assert "only in the kernel" in knob.not_planned(Situation.of({}))
    assert knob.groups(Situation.of({"cuda": True})) == []


def test_the_batch_sweep_in_the_kernel_takes_its_points_and_note_from_the_batch_knob() -> None:
    from gpusight.knobs.batch import MAX_FACTOR, next_factor
    from gpusight.whatif.batch_sweep import BatchSweep

    batch = _knob("batch")
    (row,) = batch.local_rows()
    sweep = next(e for e in ALL if e.key == "batch_size")
    assert isinstance(sweep, BatchSweep) and sweep.knob is batch and ALL[-1] is sweep
    assert batch.local_arm_of(row, _ctx([])) == (
        "cannot tell the batch dimension of the loader's batches"
    )
    ctx = _ctx(DataLoader(_data(), batch_size=8))
    ctx.work.cached = [next(iter(ctx.loader))]
    first = batch.local_arm_of(row, ctx)
    assert isinstance(first, Arm) and first.changes == {"batch_factor": 2}
    assert first.label == "batch_size=16"
    # Doubling, x4 while a doubling gains a lot, never past the largest factor.
    assert next_factor(2, 1.2) == 4 and next_factor(2, 1.8) == 8
    assert next_factor(MAX_FACTOR // 2, 1.8) == MAX_FACTOR
    assert next_factor(MAX_FACTOR, 3.0) == MAX_FACTOR
    _, notes = batch.local_outcome({"factor": 8})
    assert "lr x 8" in notes[0]
