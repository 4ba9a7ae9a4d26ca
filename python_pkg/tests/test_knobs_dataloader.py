"""The DataLoader as the loader and batch knobs change it on the kernel's copies
(``knobs/dataloader.py``): real DataLoaders, cloned with a change's arguments."""

from __future__ import annotations

import torch
from gpusight.knobs import dataloader
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler, TensorDataset


def _data(n: int = 64) -> TensorDataset:
    return TensorDataset(torch.arange(n, dtype=torch.float32).unsqueeze(1), torch.arange(n))


def test_a_clone_takes_the_changes_arguments_and_keeps_the_users_sampling() -> None:
    g = torch.Generator().manual_seed(0)
    user = DataLoader(_data(), batch_size=8, shuffle=True, drop_last=True, generator=g)
    cl = dataloader.clone(user, {"num_workers": 2, "prefetch_factor": 4, "batch_factor": 2})
    assert cl is not user and cl.dataset is user.dataset and cl.sampler is user.sampler
    assert (cl.num_workers, cl.prefetch_factor, cl.batch_size, cl.drop_last) == (2, 4, 16, True)
    # The user's loader is as it was, and was never iterated.
    assert (user.num_workers, user.batch_size, user._iterator) == (0, 8, None)


def test_a_clone_without_workers_drops_the_settings_that_need_them() -> None:
    user = DataLoader(_data(), batch_size=8, num_workers=2, prefetch_factor=4,
                      persistent_workers=True)  # fmt: skip
    cl = dataloader.clone(user, on_workers=0)
    assert (cl.num_workers, cl.prefetch_factor, cl.persistent_workers) == (0, None, False)
    assert [len(b[0]) for b in cl] == [8] * 8
    kept = dataloader.clone(user, {"pin_memory": True}, on_workers=3)
    assert (kept.num_workers, kept.pin_memory, kept.persistent_workers) == (3, True, True)
    assert dataloader.keeps_workers(kept) and dataloader.workers(kept) == 3


def test_a_loader_of_the_users_own_batch_sampler_keeps_its_batches() -> None:
    sampler = BatchSampler(SequentialSampler(range(64)), batch_size=5, drop_last=False)
    user = DataLoader(_data(), batch_sampler=sampler)
    assert dataloader.batch_of(user) is None and not dataloader.can_resize_batches(user)
    cl = dataloader.clone(user, {"batch_factor": 4})
    assert cl.batch_sampler is sampler and [len(b[1]) for b in cl][:2] == [5, 5]


def test_the_arguments_of_a_change_with_and_without_the_loaders_settings() -> None:
    change = {"pin_memory": True, "batch_factor": 4, "channels_last": True}
    assert dataloader.arguments(change, 32) == {"pin_memory": True, "batch_size": 128}
    assert dataloader.arguments(change, 32, settings=False) == {"batch_size": 128}
    assert dataloader.arguments(change) == {"pin_memory": True}  # no batch known: not resized
