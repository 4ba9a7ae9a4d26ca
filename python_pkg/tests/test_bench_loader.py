"""gpusight.bench.loader with a real DataLoader and real worker processes: the sweep, a crashing
worker, Ctrl-C, and the user's loader and RNG left as they were."""

from __future__ import annotations

import multiprocessing
import random
import threading
import time
from typing import Any

import psutil
import pytest
import torch
from gpusight.bench import loader
from gpusight.bench.dataloader import (
    ConfigResult,
    LoaderConfig,
    crash_message,
    sweep,
    to_benchmarks,
    worker_counts,
)
from gpusight.report import Report
from gpusight.report_schema import validate
from torch.utils.data import DataLoader, Dataset, get_worker_info


class Squares(Dataset[tuple[torch.Tensor, int]]):
    """A small dataset with a little CPU work per item, like a light transform."""

    def __init__(self, n: int = 512) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        x = torch.full((16, 16), float(i))
        return (x @ x).sum(dim=0), i


class BreaksInWorkers(Squares):
    """Works in the main process, raises inside any worker process."""

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        if get_worker_info() is not None:
            raise ValueError(f"boom at item {i}")
        return super().__getitem__(i)


class AlwaysBreaks(Squares):
    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        raise KeyError(i)


def _machine() -> dict[str, Any]:
    return {"platform": "linux", "python": "3", "cpu_count": 2, "gpus": []}


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def _settle(before: set[int], timeout: float = 5.0) -> set[int]:
    """Worker processes that are still alive, after giving them `timeout` to be reaped."""
    deadline = time.monotonic() + timeout
    while True:
        multiprocessing.active_children()  # reaps finished children
        left = {pid for pid in _children() - before if psutil.pid_exists(pid) and _alive(pid)}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_worker_counts() -> None:
    assert worker_counts(1) == [0, 1]
    assert worker_counts(2) == [0, 1, 2]
    assert worker_counts(6) == [0, 1, 2, 4, 6]
    assert worker_counts(16) == [0, 1, 2, 4, 8, 16]


def test_sweep_with_real_workers() -> None:
    user = DataLoader(
        Squares(), batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(3)
    )
    stages: list[str] = []
    start = time.perf_counter()
    rows = loader(
        user,
        budget_s=6.0,
        config_budget_s=0.8,
        num_workers=[0, 1, 2],
        progress=lambda s, f: stages.append(s),
    )
    elapsed = time.perf_counter() - start
    assert elapsed < 6.0 + 2.0  # per-config bounds, plus worker shutdown
    by_id = {r.id: r for r in rows}
    assert list(by_id) == [
        "loader.num_workers",
        "loader.prefetch_factor",
        "loader.pin_memory",
        "loader.persistent_workers",
        "loader.best",
    ]
    workers = by_id["loader.num_workers"]
    assert workers.series is not None
    assert [p["x"] for p in workers.series] == [0, 1, 2]
    assert all(p["y"] is not None and p["y"] > 0 for p in workers.series)
    best = by_id["loader.best"]
    assert best.value is not None and best.value >= max(p["y"] for p in workers.series)
    assert best.params is not None
    assert best.params["batch_size"] == 16
    assert best.params["num_workers"] in (0, 1, 2)
    assert best.params["failed"] == 0
    assert any("num_workers=2" in s for s in stages)
    if not torch.cuda.is_available():
        assert by_id["loader.pin_memory"].skipped == "no CUDA device: pin_memory has no effect"
    validate(Report(kind="bench", machine=_machine(), benchmarks=rows).to_dict())


def test_results_per_configuration_are_bounded() -> None:
    results = sweep(Squares(4096), budget_s=3.0, config_budget_s=0.5, num_workers=[0, 2])
    assert [r.config.num_workers for r in results[:2]] == [0, 2]
    for r in results:
        assert r.error is None, r.error
        assert r.samples_per_s is not None and r.samples_per_s > 0
        assert r.first_batch_s is not None
        assert r.elapsed_s < r.budget_s + 1.0
        assert r.samples >= r.batches > 0


def test_users_loader_and_rng_are_untouched() -> None:
    gen = torch.Generator().manual_seed(11)
    user = DataLoader(Squares(64), batch_size=8, shuffle=True, generator=gen)
    twin = DataLoader(
        Squares(64), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(11)
    )
    gen_state = gen.get_state()
    torch_state = torch.random.get_rng_state()
    py_state = random.getstate()
    loader(user, budget_s=1.5, num_workers=[0, 1], config_budget_s=0.4, persistent_workers=False)
    assert torch.equal(gen.get_state(), gen_state)
    assert torch.equal(torch.random.get_rng_state(), torch_state)
    assert random.getstate() == py_state
    assert user.num_workers == 0 and user.batch_size == 8 and not user.pin_memory
    # The user's loader yields what an untouched twin yields.
    assert [b[1].tolist() for b in user] == [b[1].tolist() for b in twin]


def test_a_crashing_worker_ends_only_its_configuration() -> None:
    before = _children()
    results = sweep(BreaksInWorkers(), budget_s=4.0, config_budget_s=0.6, num_workers=[0, 1, 2])
    by_workers = {
        r.config.num_workers: r for r in results if r.config == LoaderConfig(r.config.num_workers)
    }
    assert by_workers[0].error is None and by_workers[0].samples_per_s is not None
    for n in (1, 2):
        err = by_workers[n].error
        assert err is not None
        assert err.startswith("worker crashed: ValueError: boom at item")
        assert "if /dev/shm is small, use --shm-size or num_workers=0" in err
    rows = to_benchmarks(results, 64)
    num = rows[0]
    assert num.value == pytest.approx(by_workers[0].samples_per_s, rel=1e-3)
    assert num.params is not None and "error: num_workers=1" in num.params
    assert num.series is not None and num.series[1]["y"] is None
    assert "worker crashed" in num.series[1]["label"]
    assert _settle(before) == set()


def test_a_dataset_that_always_raises() -> None:
    rows = loader(AlwaysBreaks(), budget_s=2.0, num_workers=[0, 1], config_budget_s=0.5)
    best = rows[-1]
    assert best.value is None
    assert best.skipped is not None and best.skipped.startswith("every configuration failed")
    assert "KeyError" in best.skipped
    validate(Report(kind="bench", machine=_machine(), benchmarks=rows).to_dict())


def test_ctrl_c_mid_configuration_leaves_no_workers_or_threads() -> None:
    before = _children()
    threads = set(threading.enumerate())
    torch_state = torch.random.get_rng_state()

    def progress(stage: str, fraction: float) -> None:
        if "num_workers=2" in stage and _children() - before:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        loader(
            Squares(100_000),
            budget_s=20.0,
            config_budget_s=5.0,
            num_workers=[2],
            progress=progress,
        )
    assert _settle(before) == set()
    assert multiprocessing.active_children() == []
    assert set(threading.enumerate()) == threads
    assert torch.equal(torch.random.get_rng_state(), torch_state)


def test_crash_messages() -> None:
    killed = RuntimeError(
        "DataLoader worker (pid 123) is killed by signal: Bus error. It is possible that "
        "dataloader's workers are out of shared memory. Please try to raise your shared memory "
        "limit."
    )
    text = crash_message(killed, 4)
    assert text.startswith("worker crashed: RuntimeError: DataLoader worker (pid 123) is killed")
    assert text.endswith("— if /dev/shm is small, use --shm-size or num_workers=0")
    assert crash_message(KeyError(5), 0) == "dataset raised: KeyError: 5"


def test_empty_results_make_valid_rows() -> None:
    failed = [ConfigResult(LoaderConfig(0), error="dataset raised: KeyError: 0")]
    rows = to_benchmarks(failed, None)
    validate(Report(kind="bench", machine=_machine(), benchmarks=rows).to_dict())


def test_persistent_workers_skip_the_restart() -> None:
    from gpusight.bench.dataloader import _source, measure

    source = _source(Squares(256), 16)
    kept = measure(source, LoaderConfig(1, persistent_workers=True), budget_s=1.0)
    assert kept.error is None and kept.epochs >= 2
    assert kept.first_batch_s is not None and kept.restart_s is not None
    # The first epoch waits for a worker to start; the second reuses it.
    assert kept.restart_s < kept.first_batch_s
    assert multiprocessing.active_children() == []
