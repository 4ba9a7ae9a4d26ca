"""A dataset with ``set_epoch`` (Hugging Face's ``IterableDataset``, webdataset's) changes per
epoch in the main process: workers kept across epochs hold it as they forked it and never see
the change. Its loader is swept, and fixed, with workers started anew at each epoch."""

from __future__ import annotations

from typing import Any

import gpusight
from gpusight.knobs import Situation, by_name
from torch.utils.data import DataLoader
from watch_support import SlowDataset, small_model, train

FACTS: dict[str, Any] = {
    "cuda": True,
    "step_mode": "optimizer",
    "items_per_step": 16,
    "cpu_count": 8,
    "epochs_seen": 3,
    "finding_ids": ["load.input_bound"],
    "breakdown_ms": {"data_wait": 60.0, "compute": 10.0},
    "loader": {"batch_size": 16, "batches_per_step": 1, "num_workers": 0, "pin_memory": True},
}


class EpochDataset(SlowDataset):
    """A dataset whose items depend on the epoch the loop sets."""

    epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch


def _sweep(loader: dict[str, Any]) -> list[dict[str, Any]]:
    workers = by_name("workers")
    assert workers is not None
    facts = {**FACTS, "loader": {**FACTS["loader"], **loader}}
    return [a.changes for a in workers.groups(Situation.of(facts))[0].arms]


def test_the_sweep_keeps_workers_unless_the_dataset_sets_its_epoch() -> None:
    assert all(c.get("persistent_workers") is True for c in _sweep({}))
    assert all("persistent_workers" not in c for c in _sweep({"dataset_set_epoch": True}))
    # Nor is keeping them tried on top of the workers the script has.
    loader = by_name("loader")
    assert loader is not None
    on_two = {**FACTS, "loader": {**FACTS["loader"], "num_workers": 2}}
    kept = [a.changes for g in loader.groups(Situation.of(on_two)) for a in g.arms]
    assert {"persistent_workers": True} in kept
    epochs = {**on_two, "loader": {**on_two["loader"], "dataset_set_epoch": True}}
    assert not any(
        "persistent_workers" in a.changes
        for g in loader.groups(Situation.of(epochs))
        for a in g.arms
    )


def test_a_watched_loader_over_such_a_dataset_is_fixed_without_kept_workers() -> None:
    found = {}
    for cls in (SlowDataset, EpochDataset):
        loader = DataLoader(cls(n=256, sleep_s=0.002), batch_size=16)
        with gpusight.watch(steps=6, warmup=1, profile_steps=0) as w:
            for _ in train(loader, small_model()):
                pass
        f = w.report.finding("load.input_bound")
        assert f is not None and f.fix is not None
        found[cls.__name__] = f.fix.text
    assert "kept alive across epochs" in found["SlowDataset"]
    assert "started anew at each epoch" in found["EpochDataset"], found
    assert "kept alive across epochs" not in found["EpochDataset"]
