#!/usr/bin/env python3
"""GPU check of gpusight beyond one GPU, and of inference, in one call of at most ~4 minutes.

On a machine with two or more GPUs (made for 2x H200; on one GPU the multi-GPU parts say they
were skipped):

1. ``gpusight check``'s GPU-link rows (NVLink/PCIe from NVML).
2. NCCL all-reduce bus bandwidth, 1 MiB..1 GiB (``gpusight.bench.allreduce``), against the
   NVLink ceiling; ``dist.nccl_slow`` when far below.
3. DDP under ``torchrun --nproc-per-node=N -m gpusight run``: every rank watched, rank 0's
   merged report (per-rank step times, communication share and overlap, stragglers).
4. The same training as ``nn.DataParallel`` in one process, watched (``code.dataparallel``);
   DataParallel vs DDP step time, each from the script's own CUDA-event timer.
5. Inference served one request at a time: ``gpusight.diagnose_inference`` (latency p50/p99,
   throughput per batch, inference_mode/autocast/CUDA-graph what-ifs), its batching speedup
   checked against a plain loop written here; the model, RNG and device memory as found after.
6. DDP with a planted straggler (rank 1 sleeps 8 ms per step): the merged report must name it.

Writes OUT/multi.json (everything), OUT/multi-table.txt (the table, also printed last) and the
reports OUT/multi-ddp.json, multi-dp.json, multi-inference.json, multi-straggler.json.

    PYTHONPATH=python_pkg python3 benchmarks/gpu_multi.py --out "$OUT"
"""

from __future__ import annotations

import os
import time

T0 = time.perf_counter()  # the whole call, imports included, must stay under 4 minutes

# NVLink multicast stays off on shared hosts (see the device notes); children inherit these.
for _k, _v in (
    ("NCCL_NVLS_ENABLE", "0"),
    ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
    ("NVSHMEM_DISABLE_NVLS", "1"),
):
    os.environ.setdefault(_k, _v)

import hashlib  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from harness.cli import Parser  # noqa: E402
from harness.log import Log  # noqa: E402
from harness.paths import BENCHMARKS, PKG, on_path  # noqa: E402
from harness.paths import child_env as pkg_env  # noqa: E402
from harness.proc import run  # noqa: E402
from harness.record import note  # noqa: E402
from harness.scripts import scenario_results  # noqa: E402

on_path(PKG)
sys.path.insert(0, str(BENCHMARKS / "multi"))

import torch  # noqa: E402
from gpusight.report import Report  # noqa: E402

TOTAL_S = 220.0  # no section starts that would end past this
LOGGER = Log()
log = LOGGER
LOG = LOGGER.lines
FAILURES = LOGGER.failures
RESULTS: dict[str, Any] = {}
TABLE: list[tuple[str, str]] = []
STRAGGLE_MS = 8.0
# --cpu-dry-run: every section on the CPU (gloo, toy sizes), to check the plumbing anywhere.
DRY: list[bool] = [False]
DRY_TRAIN = ["--device", "cpu", "--width", "128", "--layers", "2", "--batch", "64"]


def elapsed() -> float:
    return time.perf_counter() - T0


@contextmanager
def section(name: str, needs_s: float) -> Iterator[bool]:
    """Run a section if ``needs_s`` fits in what is left; record its failure, never raise."""
    at = f" (at {elapsed():.0f} s)"
    why = None
    if elapsed() + needs_s > TOTAL_S:
        why = f"skipped: needs ~{needs_s:.0f} s, {max(0.0, TOTAL_S - elapsed()):.0f} s left"
        TABLE.append((name, why))

    def failed(exc: Exception) -> None:
        TABLE.append((name, f"FAILED: {type(exc).__name__}: {str(exc)[:120]}"))

    with LOGGER.section(name, at=at, skip=why, on_fail=failed) as go:
        yield go


def save(report: Report | dict[str, Any], path: Path) -> str:
    """Write a report; validated where jsonschema is installed ('valid'), else 'not validated'."""
    data = report.to_dict() if isinstance(report, Report) else report
    status = "not validated (no jsonschema)"
    try:
        from gpusight.report_schema import validate

        validate(data)
        status = "valid"
    except ModuleNotFoundError:
        pass
    path.write_text(json.dumps(data, indent=2, allow_nan=False) + "\n", "utf-8")
    return status


def child_env() -> dict[str, str]:
    env = pkg_env()
    env["PYTHONUNBUFFERED"] = "1"
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "GPUSIGHT_RANK_DIR"):
        env.pop(k, None)
    return env


def finding_ids(data: dict[str, Any]) -> list[str]:
    return [f["id"] for f in data.get("findings", [])]


# --- 1. topology ------------------------------------------------------------------------------


def topology() -> None:
    from gpusight.doctor import check

    report = check()
    rows = [c for c in report.checks if c.id.startswith("topo.")]
    RESULTS["topology"] = [
        {"id": c.id, "label": c.label, "status": c.status, "value": c.value, "detail": c.detail}
        for c in rows
    ]
    facts_gpus = [g.get("name") for g in report.machine.get("gpus", [])]
    RESULTS["check_gpus"] = facts_gpus
    for c in rows:
        log(f"  {c.label}: {c.value} [{c.status}]")
    TABLE.append(("gpu links", "; ".join(f"{c.label}: {c.value}" for c in rows) or "no rows"))


# --- 2. all-reduce ---------------------------------------------------------------------------


def allreduce(n: int) -> None:
    from gpusight.bench.allreduce import build_report, run

    t = time.perf_counter()
    limit = max(30.0, min(110.0, TOTAL_S - elapsed()))
    if DRY[0]:
        rows = run(budget_s=1.0, world_size=n, timeout_s=limit, backend="gloo", sizes=(1 << 16,))
    else:
        rows = run(budget_s=12.0, world_size=n, timeout_s=limit)
    report = build_report(rows)
    data = report.to_dict()
    RESULTS["allreduce"] = {"report": data, "wall_s": round(time.perf_counter() - t, 1)}
    row = rows[0]
    if row.value is None:
        raise RuntimeError(f"all-reduce did not run: {row.skipped}")
    for p in row.series or []:
        log(f"  {p['label']:>8}: busbw {p['y']} GB/s")
    params = row.params or {}
    pct = f" = {100 * row.value / row.ceiling:.0f}% of {row.ceiling:g}" if row.ceiling else ""
    log(f"  ceiling: {row.ceiling} ({row.ceiling_source})")
    log(f"  findings: {finding_ids(data)}; nccl {params.get('nccl_version')}")
    TABLE.append(
        (
            "all-reduce",
            f"busbw {row.value:g} GB/s at {params.get('bytes')} B{pct}; "
            f"{params.get('small_time_us')} us at {params.get('small_bytes')} B; "
            f"sum {'ok' if params.get('sum_correct') else 'WRONG'}; "
            f"nccl_slow {'yes' if 'dist.nccl_slow' in finding_ids(data) else 'no'}",
        )
    )


# --- 3./6. DDP under torchrun + gpusight run ----------------------------------------------------


def torchrun_ddp(n: int, tmp: Path, name: str, straggle_ms: float) -> dict[str, Any]:
    out_json = tmp / f"{name}.json"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={n}",
        "-m",
        "gpusight",
        "run",
        "--warmup",
        "5",
        "--profile-steps",
        "3",
        "--merge-timeout",
        "60",
        "--label",
        f"train_mlp.py DDP ({name})",
        "--json",
        str(out_json),
        str(BENCHMARKS / "multi" / "train_mlp.py"),
        "--mode",
        "ddp",
        "--iters",
        "40",
        "--skip",
        "12",
        "--straggle-ms",
        str(straggle_ms),
        "--all-ranks",
        *(DRY_TRAIN if DRY[0] else []),
    ]
    limit = max(30.0, min(110.0, TOTAL_S + 5 - elapsed()))
    # Its own session, so that a timeout ends torchrun's workers too, not only torchrun.
    proc = run(cmd, limit, cwd=tmp, env=child_env(), session=True)
    log("\n".join("  | " + ln for ln in proc.out.strip().splitlines()[-25:]))
    if proc.timed_out:
        raise RuntimeError(f"torchrun did not finish in {limit:.0f} s")
    if proc.rc != 0:
        raise RuntimeError(f"torchrun exited {proc.rc}")
    merged = json.loads(out_json.read_text("utf-8"))
    ranks = scenario_results(proc.stdout)
    return {"merged": merged, "scenario": ranks, "wall_s": round(proc.wall_s, 1), "cmd": cmd}


def summarize_ddp(name: str, got: dict[str, Any], out: Path) -> None:
    merged = got["merged"]
    status = save(merged, out)
    k = merged["run"]["kernels"]
    rank0 = next((r for r in got["scenario"] if r.get("rank") == 0), {})
    log(f"  merged report ({status}): {merged['verdict']['summary']}")
    log(f"  findings: {finding_ids(merged)}")
    log(f"  script's own step time (rank 0): {rank0.get('median_step_ms')} ms")
    TABLE.append(
        (
            name,
            f"{k.get('dist_ranks_reported')}/{k.get('dist_world_size')} ranks; step "
            f"{merged['run']['step_time_ms']} ms (script {rank0.get('median_step_ms')} ms); "
            f"exposed comm {k.get('dist_comm_share_pct')}%, overlap {k.get('dist_overlap_pct')}%; "
            f"slowest rank {k.get('dist_slowest_rank')}; {', '.join(finding_ids(merged)[:4])}",
        )
    )


# --- 4. DataParallel, watched in this process -------------------------------------------------


def dataparallel(out: Path) -> dict[str, Any]:
    import train_mlp
    from gpusight.watch import Watch
    from gpusight.watch.ranks import add_idle_gpus

    w = Watch(warmup=5, profile_steps=3, label="train_mlp.py DataParallel")
    with w:
        argv = ["--mode", "dp", "--iters", "40", "--skip", "12"]
        result = train_mlp.main(argv + (DRY_TRAIN if DRY[0] else []))
    report = w.report
    assert report is not None
    add_idle_gpus(report, torch)
    status = save(report, out)
    data = report.to_dict()
    log(f"  report ({status}): {data['verdict']['summary']}")
    log(f"  findings: {finding_ids(data)}")
    log(f"  script's own step time: {result.get('median_step_ms')} ms")
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return {"report": data, "scenario": result}


# --- 5. inference one request at a time ------------------------------------------------------


def _state_hash(model: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for k, v in model.state_dict().items():
        h.update(k.encode())
        h.update(v.detach().cpu().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _plain_throughput(fn: Callable[[], object], batch: int, calls: int = 100) -> float:
    """Samples/s of ``fn`` called back to back, each answer waited for (a request's view)."""

    def sync() -> None:
        if torch.cuda.is_available():
            torch.cuda.synchronize()

    for _ in range(5):
        fn()
    sync()
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t)
    return batch / statistics.median(times)


def inference(out: Path, budget_s: float) -> dict[str, Any]:
    import gpusight
    from torch import nn

    torch.manual_seed(0)
    gpu = not DRY[0]
    dev = torch.device("cuda", 0) if gpu else torch.device("cpu")
    d, layers, seq = (512, 4, 64) if gpu else (64, 2, 8)
    enc = nn.TransformerEncoderLayer(d, 8, 4 * d, dropout=0.0, batch_first=True)
    model = nn.Sequential(nn.TransformerEncoder(enc, layers), nn.Linear(d, 2)).to(dev).eval()
    request = torch.randn(1, seq, d, device=dev)

    def memory() -> int:
        return int(torch.cuda.memory_allocated(dev)) if gpu else 0

    def cuda_rng() -> torch.Tensor:
        return torch.cuda.get_rng_state(dev) if gpu else torch.zeros(1)

    if gpu:
        torch.cuda.synchronize()
    before_hash, before_mem = _state_hash(model), memory()
    rng, before_cuda_rng = torch.get_rng_state(), cuda_rng()
    t = time.perf_counter()
    report = gpusight.diagnose_inference(model, request, budget_s=budget_s)
    wall = time.perf_counter() - t
    if gpu:
        torch.cuda.synchronize()
    restored = {
        "weights": _state_hash(model) == before_hash,
        "rng": bool(torch.equal(torch.get_rng_state(), rng))
        and bool(torch.equal(cuda_rng(), before_cuda_rng)),
        "memory_delta_bytes": memory() - before_mem,
        "training_mode": model.training,
        "grad_enabled": torch.is_grad_enabled(),
    }
    status = save(report, out)
    data = report.to_dict()
    log(f"  report ({status}) in {wall:.1f} s (budget {budget_s} s): {data['verdict']['summary']}")
    for wi in data["what_if"]:
        log(
            f"  what-if {wi['change']}: {wi.get('before_ms')} -> {wi.get('after_ms')} ms, "
            f"{wi.get('speedup')}x {wi.get('skipped') or ''}"
        )
    thr = next((b for b in data["benchmarks"] if b["id"] == "infer.throughput"), None)
    series = {p["x"]: p["y"] for p in (thr or {}).get("series", [])}
    log(f"  throughput by batch: {series}")
    log(f"  restored: {restored}")
    # The batching speedup, measured again with a plain loop written here (same setting).
    setting = (thr or {}).get("label", "")
    amp = "autocast" in setting
    check: dict[str, Any] = {"setting": setting}
    big = 64 if 64 in series else (max(series) if series else None)
    if big and 1 in series:
        batch_big = request.expand(big, -1, -1).contiguous()

        def call(x: torch.Tensor) -> Callable[[], object]:
            def run() -> object:
                with torch.inference_mode(), torch.autocast(dev.type, torch.bfloat16, enabled=amp):
                    return model(x)

            return run

        one = _plain_throughput(call(request), 1)
        many = _plain_throughput(call(batch_big), big)
        plain = many / one
        measured = series[big] / series[1]
        check.update(
            {
                "batch": big,
                "plain_speedup": round(plain, 2),
                "diagnose_speedup": round(measured, 2),
                "error_pct": round(100 * abs(measured - plain) / plain, 1),
            }
        )
        log(f"  batching check: {check}")
    return {"report": data, "wall_s": round(wall, 1), "restored": restored, "check": check}


# --- main -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = Parser(__doc__).out(os.environ.get("OUT", "benchmarks/results/gpu-multi-local"))
    ap.add_argument("--inference-budget", type=float, default=30.0)
    ap.add_argument(
        "--cpu-dry-run", action="store_true", help="every section on the CPU, toy sizes"
    )
    args = ap.parse_args(argv)
    out = Path(args.out)
    note(out)
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if args.cpu_dry_run:
        DRY[0] = True
        n = 2  # two gloo processes stand in for two GPUs
    log(
        f"torch {torch.__version__}, CUDA {torch.version.cuda}, {n} GPU(s): "
        + ", ".join(torch.cuda.get_device_name(i) for i in range(n) if not DRY[0])
    )
    log(
        "NCCL_NVLS_ENABLE="
        + os.environ.get("NCCL_NVLS_ENABLE", "")
        + f"; torchrun children get PYTHONPATH {child_env()['PYTHONPATH']}"
    )
    RESULTS["machine"] = {"torch": torch.__version__, "cuda": torch.version.cuda, "gpus": n}
    tmp = Path(tempfile.mkdtemp(prefix="gpusight-multi-"))

    with section("gpu links (gpusight check)", 10) as go:
        if go:
            topology()
    multi = n >= 2
    with section("all-reduce sweep", 60) as go:
        if go and not multi:
            TABLE.append(("all-reduce", f"skipped: {n} GPU(s)"))
        elif go:
            allreduce(n)
    ddp_ms = None
    with section("DDP under torchrun + gpusight run", 75) as go:
        if go and not multi:
            TABLE.append(("ddp", f"skipped: {n} GPU(s)"))
        elif go:
            got = torchrun_ddp(n, tmp, "ddp", 0.0)
            RESULTS["ddp"] = got
            summarize_ddp("ddp (balanced)", got, out / "multi-ddp.json")
            ddp_ms = next(
                (r["median_step_ms"] for r in got["scenario"] if r.get("rank") == 0), None
            )
    with section("DataParallel, watched", 40) as go:
        if go and (n >= 1 or DRY[0]):
            got = dataparallel(out / "multi-dp.json")
            RESULTS["dp"] = got
            dp_ms = got["scenario"].get("median_step_ms")
            ids = finding_ids(got["report"])
            TABLE.append(
                (
                    "dp report",
                    f"code.dataparallel {'found' if 'code.dataparallel' in ids else 'MISSING'}; "
                    f"verdict {got['report']['verdict']['bottleneck']}; {', '.join(ids[:4])}",
                )
            )
            if ddp_ms and dp_ms:
                # The fix, measured: the DataParallel report gets DDP's step as its what-if.
                data = got["report"]
                speedup = round(dp_ms / ddp_ms, 3)
                data["what_if"].append(
                    {
                        "change": f"DistributedDataParallel, one process per GPU ({n} GPUs)",
                        "finding_id": "code.dataparallel",
                        "before_ms": dp_ms,
                        "after_ms": ddp_ms,
                        "speedup": speedup,
                        "params": {"measured_by": "each script's CUDA-event step timer"},
                    }
                )
                for f in data["findings"]:
                    if f["id"] == "code.dataparallel":
                        f["impact"] = {
                            "basis": "measured",
                            "text": f"DDP ran the same global batch {speedup}x faster.",
                            "speedup": speedup,
                        }
                save(data, out / "multi-dp.json")
                RESULTS["dp_vs_ddp"] = {
                    "dp_ms": dp_ms,
                    "ddp_ms": ddp_ms,
                    "ddp_speedup": round(dp_ms / ddp_ms, 2),
                }
                TABLE.append(
                    (
                        "dp vs ddp",
                        f"DataParallel {dp_ms} ms vs DDP {ddp_ms} ms per step of the same "
                        f"global batch: DDP {dp_ms / ddp_ms:.2f}x faster",
                    )
                )
    with section("inference one request at a time", args.inference_budget + 25) as go:
        if go and (n >= 1 or DRY[0]):
            got = inference(out / "multi-inference.json", args.inference_budget)
            RESULTS["inference"] = got
            ids = finding_ids(got["report"])
            c = got["check"]
            r = got["restored"]
            TABLE.append(
                (
                    "inference",
                    f"{got['report']['verdict']['summary'][:150]} | findings {', '.join(ids)} | "
                    f"batch {c.get('batch')}: diagnose {c.get('diagnose_speedup')}x vs plain "
                    f"{c.get('plain_speedup')}x ({c.get('error_pct')}% apart) | restored "
                    f"weights {r['weights']}, rng {r['rng']}, "
                    f"memory {r['memory_delta_bytes']} B",
                )
            )
    with section("DDP with a planted straggler (rank 1)", 70) as go:
        if go and multi:
            got = torchrun_ddp(n, tmp, "straggler", STRAGGLE_MS)
            RESULTS["straggler"] = got
            summarize_ddp(f"ddp straggler {STRAGGLE_MS:g} ms", got, out / "multi-straggler.json")
            k = got["merged"]["run"]["kernels"]
            ok = k.get("dist_slowest_rank") == 1 and "dist.imbalance" in finding_ids(got["merged"])
            TABLE.append(("straggler found", "yes (rank 1, dist.imbalance)" if ok else "NO"))

    RESULTS["failures"] = FAILURES
    RESULTS["elapsed_s"] = round(elapsed(), 1)
    RESULTS["log"] = LOG
    (out / "multi.json").write_text(json.dumps(RESULTS, indent=1, default=str) + "\n", "utf-8")
    width = max(len(a) for a, _ in TABLE) if TABLE else 10
    table = "\n".join(f"{a:<{width}}  {b}" for a, b in TABLE)
    table += f"\n{'total':<{width}}  {elapsed():.0f} s, {len(FAILURES)} failure(s)"
    (out / "multi-table.txt").write_text(table + "\n", "utf-8")
    log("\n=== gpu_multi summary")
    log(table)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
