"""NCCL all-reduce bus bandwidth across this machine's GPUs, against the link's ceiling.

One process per GPU (``python -m gpusight.bench.allreduce --worker``, rendezvous through
``MASTER_ADDR``/``MASTER_PORT`` on localhost, as torchrun would set them), message sizes from
1 MiB to 1 GiB. Each all-reduce is timed with CUDA events by :func:`~gpusight.bench.timer.time_fn`
with a fixed number of calls (every rank must issue the same collectives, so no rank may stop
on its own clock), and the slowest rank's time of each call counts. Bandwidth as nccl-tests
defines it: ``algbw = bytes / time`` and ``busbw = algbw * 2(n-1)/n``, the rate each GPU's link
carries in a ring, comparable to the link's own bandwidth whatever the GPU count.

The ceiling is the GPUs' NVLink bandwidth per direction (active links x per-link rate, read
through NVML: ``rules/topology.py``), or the PCIe link's when no NVLink joins them.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..report import Benchmark, Report, Verdict
from .device import band, cuda_unavailable_reason, finite, skipped
from .progress import Progress
from .sizing import GiB, MiB

BENCH_ID = "allreduce.busbw"
LABEL = "NCCL all-reduce bus bandwidth"
UNIT = "GB/s"
SIZES = tuple(MiB * 4**k for k in range(6))  # 1, 4, 16, 64, 256 MiB, 1 GiB
QUICK_SIZES = (MiB, 64 * MiB)
DEFAULT_BUDGET_S = 20.0
START_UP_S = 120.0  # process start, CUDA and NCCL initialisation, on top of the budget
MAX_REPEATS = 200
MIN_REPEATS = 5


def alg_bandwidth(size_bytes: int, seconds: float) -> float:
    """Algorithm bandwidth (GB/s): bytes all-reduced per second."""
    if seconds <= 0:
        raise ValueError("time must be positive")
    return size_bytes / seconds / 1e9


def bus_bandwidth(size_bytes: int, seconds: float, world_size: int) -> float:
    """nccl-tests' bus bandwidth for all-reduce (GB/s): ``algbw * 2(n-1)/n``."""
    if world_size < 1:
        raise ValueError("world_size must be at least 1")
    return alg_bandwidth(size_bytes, seconds) * 2 * (world_size - 1) / world_size


def skip_reason(world_size: int | None = None) -> str | None:
    """Why the benchmark cannot run here (None: it can)."""
    reason = cuda_unavailable_reason()
    if reason is not None:
        return reason
    import torch

    dist = torch.distributed
    if not dist.is_available() or not dist.is_nccl_available():
        return f"this torch {torch.__version__} has no NCCL backend"
    count = int(torch.cuda.device_count())
    n = world_size if world_size is not None else count
    if n < 2:
        return f"needs two or more GPUs; this process sees {count}"
    if n > count:
        return f"asked for {n} GPUs; this process sees {count}"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ceiling(n: int) -> tuple[float | None, str]:
    """The link ceiling for an all-reduce over torch's first ``n`` GPUs, and its source."""
    from ..probes import topology
    from ..rules.topology import collective_ceiling
    from ..watch.machine import visible_gpus

    ids = visible_gpus()[:n]
    indices = [i for i in ids if isinstance(i, int)] if len(ids) == n else []
    topo = topology.probe()
    ceiling, source = collective_ceiling(topo, indices if len(indices) == n else None)
    if ceiling is not None or not topo.available:
        return ceiling, source
    from ..probes import nvml_info
    from ..rules.environment import pcie_gbps

    nv = nvml_info.probe()
    rates = [
        pcie_gbps(g.pcie_max_gen, g.pcie_max_width)
        for g in nv.gpus
        if not indices or g.index in indices
    ]
    known = [r for r in rates if r is not None]
    if not known or len(known) < len(rates):
        return None, source
    return min(known), f"{source}; PCIe per direction at the links' maximum generation and width"


def _tail(path: Path, n: int = 600) -> str:
    try:
        text = path.read_text("utf-8", "replace").strip()
    except OSError:
        return ""
    return text[-n:]


def run(
    budget_s: float = DEFAULT_BUDGET_S,
    *,
    world_size: int | None = None,
    sizes: Sequence[int] = SIZES,
    quick: bool = False,
    dtype: str = "float32",
    progress: Progress | None = None,
    timeout_s: float | None = None,
    backend: str = "nccl",
) -> list[Benchmark]:
    """Measure the all-reduce sweep on ``world_size`` GPUs (default: all this process sees).

    Returns one row, ``allreduce.busbw``: the bus bandwidth at the largest size, its series over
    the sizes, and the link ceiling; or the row with ``skipped`` saying why it could not run.
    ``backend="gloo"`` all-reduces host memory instead (no ceiling): the same processes,
    rendezvous and timing, on any machine."""
    if backend == "gloo":
        import torch

        reason = None if torch.distributed.is_available() else "torch.distributed is missing"
        n = world_size or 2
    else:
        reason = skip_reason(world_size)
    if reason is not None:
        return [skipped(BENCH_ID, LABEL, UNIT, reason)]
    if backend != "gloo":
        import torch

        n = world_size if world_size is not None else int(torch.cuda.device_count())
    sizes = list(QUICK_SIZES if quick else sizes)
    if progress is not None:
        progress("all-reduce: starting one process per GPU", 0.0)
    limit = timeout_s if timeout_s is not None else budget_s + START_UP_S
    with tempfile.TemporaryDirectory(prefix="gpusight-allreduce-") as tmp:
        out = Path(tmp) / "result.json"
        # The workers import gpusight from where this process did, whatever PYTHONPATH says.
        root = str(Path(__file__).resolve().parents[2])
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
        env = {
            **os.environ,
            "PYTHONPATH": path,
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(_free_port()),
            "WORLD_SIZE": str(n),
            "LOCAL_WORLD_SIZE": str(n),
        }
        cmd = [
            sys.executable,
            "-m",
            "gpusight.bench.allreduce",
            "--worker",
            "--out",
            str(out),
            "--budget",
            str(budget_s),
            "--dtype",
            dtype,
            "--backend",
            backend,
            "--sizes",
            ",".join(map(str, sizes)),
        ]
        logs = [Path(tmp) / f"rank{r}.log" for r in range(n)]
        procs = []
        for r in range(n):
            with open(logs[r], "w") as log:
                procs.append(
                    subprocess.Popen(
                        cmd,
                        env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
        deadline = time.monotonic() + limit
        failed: str | None = None
        try:
            for r, p in enumerate(procs):
                try:
                    code = p.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    failed = f"timed out after {limit:.0f} s (an NCCL hang?): {_tail(logs[r])}"
                    break
                if code != 0:
                    failed = f"rank {r} exited with {code}: {_tail(logs[r])}"
                    break
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        if failed is None and not out.exists():
            failed = f"rank 0 wrote no result: {_tail(logs[0])}"
        if failed is not None:
            return [skipped(BENCH_ID, LABEL, UNIT, f"failed: {failed}")]
        result = json.loads(out.read_text("utf-8"))
    if progress is not None:
        progress("all-reduce: done", 1.0)
    if backend == "gloo":
        ceiling, source = None, "gloo on the CPU: no link ceiling"
    else:
        ceiling, source = _ceiling(n)
    return [row_from_result(result, ceiling, source)]


def row_from_result(result: dict[str, Any], ceiling: float | None, source: str) -> Benchmark:
    """The worker's measurements -> the benchmark row (pure)."""
    n = int(result["world_size"])
    points = result["sizes"]
    series = []
    for p in points:
        series.append(
            {
                "x": p["bytes"],
                "y": finite(bus_bandwidth(p["bytes"], p["median_s"], n)),
                "label": _fmt_bytes(int(p["bytes"])),
            }
        )
    last = points[-1]
    gloo = result.get("backend") == "gloo"
    what = f"gloo all-reduce bandwidth ({n} CPU processes" if gloo else f"{LABEL} ({n} GPUs"
    busbw = bus_bandwidth(last["bytes"], last["median_s"], n)
    lo = bus_bandwidth(last["bytes"], last["p90_s"], n)
    hi = bus_bandwidth(last["bytes"], last["p10_s"], n)
    first = points[0]
    return Benchmark(
        id=BENCH_ID,
        label=f"{what}, {_fmt_bytes(int(last['bytes']))})",
        value=finite(busbw),
        unit=UNIT,
        ceiling=finite(ceiling),
        ceiling_source=source,
        spread=band(lo, hi),
        repeats=int(last["repeats"]),
        params={
            "world_size": n,
            "bytes": int(last["bytes"]),
            "dtype": str(result.get("dtype")),
            "algbw_gbps": finite(alg_bandwidth(last["bytes"], last["median_s"])),
            "time_us": finite(last["median_s"] * 1e6),
            "small_bytes": int(first["bytes"]),
            "small_time_us": finite(first["median_s"] * 1e6),
            "nccl_version": result.get("nccl_version"),
            "sum_correct": bool(result.get("correct")),
            "backend": "gloo" if gloo else "nccl",
            "timed": ("host clock" if gloo else "CUDA events")
            + " around each call; the slowest rank's time per call",
        },
        series=series,
    )


def build_report(rows: list[Benchmark] | None = None, **kwargs: Any) -> Report:
    """A bench report of the all-reduce row, with ``dist.nccl_slow`` when it is far below."""
    from ..rules.distributed import nccl_slow
    from .machine import machine_info

    rows = rows if rows is not None else run(**kwargs)
    found = nccl_slow(rows)
    row = rows[0] if rows else None
    if row is not None and row.value is not None:
        pct = f", {100 * row.value / row.ceiling:.0f}% of {row.ceiling:g}" if row.ceiling else ""
        summary = f"all-reduce bus bandwidth {row.value:.3g} GB/s{pct}"
    else:
        summary = f"all-reduce not measured: {row.skipped if row is not None else 'no row'}"
    return Report(
        kind="bench",
        machine=machine_info(),
        benchmarks=list(rows),
        findings=[found] if found is not None else [],
        verdict=Verdict(
            bottleneck="communication" if found is not None else "none",
            gpu_busy_pct=None,
            summary=summary,
        ),
        notes=[f"{row.id} skipped: {row.skipped}"] if row is not None and row.skipped else [],
        title="NCCL all-reduce",
    )


def add_to_report(report: Report, **kwargs: Any) -> Report:
    """Append the all-reduce row (and ``dist.nccl_slow``) to a bench report."""
    from ..rules.distributed import nccl_slow

    rows = run(**kwargs)
    report.benchmarks.extend(rows)
    found = nccl_slow(rows)
    if found is not None:
        report.findings.append(found)
    report.notes += [f"{r.id} skipped: {r.skipped}" for r in rows if r.skipped]
    return report


def _fmt_bytes(n: int) -> str:
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} B"


# --- the worker: one per GPU ---------------------------------------------------------------------


def _time_fixed(
    torch: Any, call: Callable[[], object], repeats: int, gpu: bool, dev: Any, warmup: int = 3
) -> list[float]:
    """Seconds per call for exactly ``warmup`` + ``repeats`` calls: CUDA events on the GPU,
    the host clock on the CPU (gloo's collectives return when done)."""
    for _ in range(warmup):
        call()
    if gpu:
        torch.cuda.synchronize(dev)
        marks = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(repeats)
        ]
        for start, end in marks:
            start.record()
            call()
            end.record()
        torch.cuda.synchronize(dev)
        return [start.elapsed_time(end) / 1000.0 for start, end in marks]
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        out.append(time.perf_counter() - t0)
    return out


def _worker(out: str, sizes: list[int], budget_s: float, dtype_name: str, backend: str) -> None:
    import torch
    import torch.distributed as dist

    from .timer import summarize

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    gpu = backend == "nccl"
    if gpu:
        torch.cuda.set_device(local)
    dev = torch.device("cuda", local) if gpu else torch.device("cpu")

    def sync() -> None:
        if gpu:
            torch.cuda.synchronize(dev)

    dist.init_process_group(backend, rank=rank, world_size=world)
    try:
        dtype = getattr(torch, dtype_name)
        elem = torch.empty((), dtype=dtype).element_size()
        check = torch.ones(1024, dtype=dtype, device=dev)
        dist.all_reduce(check)  # also starts the communicator, outside any timing
        correct = bool((check == world).all().item())
        buf = torch.zeros(max(sizes) // elem, dtype=dtype, device=dev)  # zeros stay zeros
        per_size = budget_s / len(sizes)
        points = []
        for size in sizes:
            view = buf[: size // elem]
            sync()
            t0 = time.perf_counter()
            for _ in range(2):
                dist.all_reduce(view)
            sync()
            est = torch.tensor([(time.perf_counter() - t0) / 2], dtype=torch.float64, device=dev)
            dist.all_reduce(est, op=dist.ReduceOp.MAX)  # one count for every rank
            repeats = int(min(MAX_REPEATS, max(MIN_REPEATS, 0.8 * per_size / est.item())))

            # Every rank must issue exactly the same collectives: the shared timer's adaptive
            # warm-up (chunks sized from each rank's own clock) made ranks disagree on the count
            # and hung NCCL on the H200 (run 4). Fixed counts, one sample per call.
            def call(v: Any = view) -> object:
                return dist.all_reduce(v)

            samples = _time_fixed(torch, call, repeats, gpu, dev)
            times = torch.tensor(samples, dtype=torch.float64, device=dev)
            dist.all_reduce(times, op=dist.ReduceOp.MAX)  # the slowest rank's time of each call
            stats = summarize(times.tolist())
            points.append(
                {
                    "bytes": view.numel() * elem,
                    "median_s": stats.median,
                    "p10_s": stats.p10,
                    "p90_s": stats.p90,
                    "repeats": stats.n,
                }
            )
        version = None
        try:
            import importlib

            nccl: Any = importlib.import_module("torch.cuda.nccl")
            v = nccl.version()
            version = ".".join(map(str, v)) if isinstance(v, tuple) else v
        except Exception:
            pass
        if rank == 0:
            result = {
                "world_size": world,
                "dtype": dtype_name,
                "correct": correct,
                "backend": backend,
                "nccl_version": None if version is None else str(version),
                "sizes": points,
            }
            tmp = out + ".tmp"
            Path(tmp).write_text(json.dumps(result), "utf-8")
            os.replace(tmp, out)
        del buf
    finally:
        dist.destroy_process_group()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="gpusight all-reduce worker (one per GPU)")
    p.add_argument("--worker", action="store_true", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--sizes", default=",".join(map(str, SIZES)))
    p.add_argument("--backend", default="nccl", choices=("nccl", "gloo"))
    a = p.parse_args(argv)
    _worker(a.out, [int(s) for s in a.sizes.split(",")], a.budget, a.dtype, a.backend)
    return 0


if __name__ == "__main__":
    sys.exit(main())
