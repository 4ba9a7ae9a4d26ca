"""Distributed code paths for real, on the CPU: two gloo processes under torchrun, each watched by
``gpusight run``, rank 0 merging; ``gpusight merge`` on the rank files; the all-reduce benchmark's
processes, rendezvous and timing with gloo."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from gpusight.bench.allreduce import bus_bandwidth
from gpusight.bench.allreduce import run as allreduce_run
from gpusight.cli import main
from gpusight.report import load_report

TRAIN = """\
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
for step in range(10_000):  # only --steps ends it
    if rank == 1:
        time.sleep(0.002)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

PKG = str(Path(__file__).resolve().parents[1])


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE"))}
    env["PYTHONPATH"] = PKG + os.pathsep + os.environ.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    env.pop("GPUSIGHT_RANK_DIR", None)
    return env


@pytest.fixture(scope="module")
def ddp_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """torchrun --nproc-per-node=2 -m gpusight run ... started once, in the background, so that
    the other tests of this module run while its four processes start up."""
    tmp = tmp_path_factory.mktemp("ddp")
    (tmp / "train.py").write_text(TRAIN, encoding="utf-8")
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=2",
        "-m",
        "gpusight",
        "run",
        "--steps",
        "5",
        "--warmup",
        "2",
        "--profile-steps",
        "2",
        "--merge-timeout",
        "60",
        "--json",
        str(tmp / "out.json"),
        "train.py",
    ]
    proc = subprocess.Popen(
        cmd, cwd=tmp, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    yield tmp, proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def _finished(ddp_run: tuple[Path, subprocess.Popen[str]]) -> tuple[Path, str]:
    tmp, proc = ddp_run
    out, _ = proc.communicate(timeout=240) if proc.poll() is None else ("", None)
    assert proc.returncode == 0, out
    return tmp, out or ""


def test_allreduce_processes_rendezvous_and_time_with_gloo(
    ddp_run: tuple[Path, subprocess.Popen[str]],
) -> None:
    # Runs while torchrun starts: the same worker processes and timing as on GPUs, gloo here.
    rows = allreduce_run(budget_s=1.0, backend="gloo", sizes=(1 << 16, 1 << 20), world_size=2)
    (row,) = rows
    assert row.skipped is None, row.skipped
    assert row.params is not None and row.params["sum_correct"] is True
    assert row.params["world_size"] == 2 and row.params["backend"] == "gloo"
    assert row.series is not None and [p["x"] for p in row.series] == [1 << 16, 1 << 20]
    t = float(row.params["time_us"]) / 1e6  # type: ignore[arg-type]
    assert row.value == pytest.approx(bus_bandwidth(1 << 20, t, 2), rel=0.01)
    assert row.ceiling is None and row.repeats is not None and row.repeats >= 5


def test_torchrun_ranks_write_and_rank0_merges(
    ddp_run: tuple[Path, subprocess.Popen[str]],
) -> None:
    tmp, out = _finished(ddp_run)
    merged = load_report(tmp / "out.json")  # validates against the schema
    assert merged["kind"] == "distributed"
    k = merged["run"]["kernels"]
    assert k["dist_world_size"] == 2 and k["dist_ranks_reported"] == 2
    assert k["dist_backend"] == "gloo"
    assert {"rank0_step_ms", "rank1_step_ms"} <= set(k)
    step = next(b for b in merged["benchmarks"] if b["id"] == "dist.step_time")
    assert [p["x"] for p in step["series"]] == [0, 1]
    assert merged["run"]["steps"] == 5
    assert "2 ranks" in merged["verdict"]["summary"]
    for r in (0, 1):
        own = load_report(tmp / f"out.rank{r}.json")
        assert own["kind"] == "watch" and own["run"]["kernels"]["dist_rank"] == r
        assert own["title"] == f"train.py (rank {r} of 2)"
        assert own["run"]["kernels"]["dist_host"]
    assert "gpusight: " in out and "rank reports:" in out  # rank 0's summary only
    assert out.count("gpusight: ") == 1


def test_gpusight_merge_on_the_rank_files(
    ddp_run: tuple[Path, subprocess.Popen[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    tmp, _ = _finished(ddp_run)
    assert main(["merge", str(tmp), "--json", str(tmp / "again.json")]) == 0
    again = load_report(tmp / "again.json")
    assert again["kind"] == "distributed" and again["run"]["kernels"]["dist_ranks_reported"] == 2
    assert "2 ranks" in capsys.readouterr().out
    # A report of no rank (the merged one) is refused with a message that says why.
    assert main(["merge", str(tmp / "out.json")]) == 2
    assert "not a rank's report" in capsys.readouterr().err
