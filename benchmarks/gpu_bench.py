#!/usr/bin/env python3
"""GPU check of gpusight.bench: every benchmark through gpusight's own code, each headline number
against an independent reference measured in the same run, and the %gpusight start-up time.

References: ``triton.testing.do_bench(..., return_mode="median")`` (CUDA events) for device work,
``torch.utils.benchmark.Timer`` (host clock, CUDA-synchronised) for host-bound loops, and a plain
loop for the DataLoader. Target: within 3 %. Sanity checks on an H200: bf16 >= 700 TFLOP/s, pinned
H2D >= 45 GB/s and >= 4x pageable; check + quick benchmarks in a fresh process <= 10 s.

Writes OUT/bench.json (a bench report made by gpusight), OUT/bench-reference.txt (everything
below) and OUT/bench-table.txt (the short table, also printed last).

    PYTHONPATH=python_pkg python3 benchmarks/gpu_bench.py --out "$OUT"
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from gpusight.bench import build_report, copies, cpu, launch, loader, matmul
from gpusight.bench.flags import snapshot
from gpusight.bench.table import format_findings, format_table
from gpusight.report import Benchmark
from gpusight.report_schema import ReportValidationError, validate
from torch.utils.data import DataLoader, Dataset

TARGET_PCT = 3.0
LOG: list[str] = []
FAILURES: list[str] = []


def log(text: str = "") -> None:
    print(text, flush=True)
    LOG.append(text)


@contextmanager
def section(name: str) -> Iterator[None]:
    """A failing section is logged and counted; the next one still runs."""
    log(f"\n=== {name}")
    t0 = time.perf_counter()
    try:
        yield
    except Exception as exc:
        FAILURES.append(f"{name}: {type(exc).__name__}: {exc}")
        log(f"!!! {name} failed: {type(exc).__name__}: {exc}")
        log(traceback.format_exc())
    log(f"--- {name}: {time.perf_counter() - t0:.1f} s")


@dataclass
class Compare:
    name: str
    unit: str
    ours: float | None
    ref: float | None
    method: str
    gated: bool = True  # counts towards the 3 % target

    @property
    def diff_pct(self) -> float | None:
        if self.ours is None or self.ref is None or self.ref == 0:
            return None
        return 100.0 * (self.ours - self.ref) / self.ref


COMPARES: list[Compare] = []
CHECKS: list[tuple[str, bool | None, str]] = []


def compare(c: Compare) -> None:
    COMPARES.append(c)
    d = c.diff_pct
    diff = f"{d:+.1f} %" if d is not None else "n/a"
    log(f"{c.name:<26} gpusight {_fmt(c.ours):>10} {c.unit:<8} reference {_fmt(c.ref):>10}  {diff}")


def check(name: str, ok: bool | None, detail: str) -> None:
    CHECKS.append((name, ok, detail))
    log(f"check {name}: {'PASS' if ok else ('n/a' if ok is None else 'FAIL')} ({detail})")


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:,.1f}" if abs(v) >= 10 else f"{v:.3f}"


def _do_bench() -> Callable[..., float]:
    from triton.testing import do_bench

    return do_bench  # type: ignore[no-any-return]


def safe(name: str, fn: Callable[[], Any]) -> Any:
    """A reference that fails is logged and counted; the section goes on without it."""
    try:
        return fn()
    except Exception as exc:
        FAILURES.append(f"reference {name}: {type(exc).__name__}: {exc}")
        log(f"!!! reference {name} failed: {type(exc).__name__}: {exc}")
        log(traceback.format_exc())
        return None


def ref_ms(fn: Callable[[], object], rep_ms: int = 300, warmup_ms: int = 100) -> float:
    """Median ms of fn by triton's do_bench (CUDA events; it flushes L2 between calls)."""
    return float(_do_bench()(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))


def ref_timer_s(stmt: str, env: dict[str, Any], min_run_time: float = 1.0) -> float:
    """Median seconds per statement by torch.utils.benchmark.Timer (synchronises CUDA)."""
    from torch.utils.benchmark import Timer

    m = Timer(stmt=stmt, globals=env).blocked_autorange(min_run_time=min_run_time)
    return float(m.median)


def nvidia_smi() -> None:
    fields = (
        "name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu,"
        "pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,memory.used"
    )
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        log(out.stdout.strip() or out.stderr.strip())
    except Exception as exc:
        log(f"nvidia-smi: {exc}")


# --- %gpusight in a fresh process -------------------------------------------------------------

MAGIC_CODE = r"""
import json, time
t0 = time.perf_counter()
import gpusight
t1 = time.perf_counter()
try:
    rep = gpusight.check()
    note = f"{len(rep.checks)} checks, {len(rep.findings)} findings"
    machine = rep.machine
except Exception as exc:
    note, machine = f"check failed: {type(exc).__name__}: {exc}", None
t2 = time.perf_counter()
from gpusight.bench import build_report
stages = []
report = build_report(quick=True, machine=machine, progress=lambda s, f: stages.append(s))
t3 = time.perf_counter()
print("GPUSIGHT_TIMING " + json.dumps({
    "import_s": t1 - t0, "check_s": t2 - t1, "bench_s": t3 - t2, "check": note,
    "measured": sum(b.value is not None for b in report.benchmarks),
    "rows": len(report.benchmarks), "progress_calls": len(stages),
    "skipped": {b.id: b.skipped for b in report.benchmarks if b.skipped},
}))
"""


def magic_in_fresh_process(label: str) -> float | None:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", MAGIC_CODE], capture_output=True, text=True, timeout=180
    )
    wall = time.perf_counter() - t0
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("GPUSIGHT_TIMING ")), None)
    if proc.returncode != 0 or line is None:
        log(f"%gpusight ({label}) failed, rc {proc.returncode}:\n{proc.stderr[-3000:]}")
        FAILURES.append(f"%gpusight {label}: rc {proc.returncode}")
        return None
    info = json.loads(line.split(" ", 1)[1])
    log(
        f"%gpusight ({label}): {wall:.2f} s end to end (python start, then import"
        f" {info['import_s']:.2f} s, check {info['check_s']:.2f} s incl. torch import,"
        f" quick bench {info['bench_s']:.2f} s); {info['check']};"
        f" {info['measured']}/{info['rows']} rows measured;"
        f" skipped: {info['skipped']}"
    )
    return wall


# --- the DataLoader workload ------------------------------------------------------------------


class SyntheticImages(Dataset[tuple[torch.Tensor, int]]):
    """Decode-free image pipeline: random uint8 image, to float, normalise, flip every other."""

    def __init__(self, n: int = 50_000, size: int = 64) -> None:
        self.n, self.size = n, size

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        g = torch.Generator().manual_seed(i)
        img = torch.randint(0, 256, (3, self.size, self.size), dtype=torch.uint8, generator=g)
        x = img.float().div_(255).sub_(0.5).div_(0.25)
        if i % 2:
            x = x.flip(-1)
        return x, i % 10


def loader_reference(params: dict[str, Any], seconds: float = 3.0) -> float:
    """Steady samples/s of the best configuration, timed by a plain loop (first batch left out)."""
    workers = int(params["num_workers"])
    kwargs: dict[str, Any] = {"batch_size": 64, "num_workers": workers}
    kwargs["pin_memory"] = bool(params.get("pin_memory"))
    if workers > 0:
        kwargs["prefetch_factor"] = int(params.get("prefetch_factor") or 2)
    dl = DataLoader(SyntheticImages(), **kwargs)
    it = iter(dl)
    try:
        next(it)
        t0 = time.perf_counter()
        samples = 0
        while time.perf_counter() - t0 < seconds:
            x, _ = next(it)
            samples += x.shape[0]
        return samples / (time.perf_counter() - t0)
    finally:
        getattr(it, "_shutdown_workers", lambda: None)()


# --- references per benchmark -----------------------------------------------------------------


@contextmanager
def fp32_precision(mode: str) -> Iterator[None]:
    m = torch.backends.cuda.matmul
    if hasattr(m, "fp32_precision"):
        old = m.fp32_precision
        m.fp32_precision = mode
        try:
            yield
        finally:
            m.fp32_precision = old
    else:
        old_flag = m.allow_tf32
        m.allow_tf32 = mode == "tf32"
        try:
            yield
        finally:
            m.allow_tf32 = old_flag


def matmul_reference(precision: str, n: int) -> float:
    dev = "cuda"
    if precision == "fp8":
        a = torch.randn(n, n, device=dev, dtype=torch.bfloat16).to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device=dev, dtype=torch.bfloat16).to(torch.float8_e4m3fn).t()
        s = torch.tensor(1.0, device=dev)

        def fn() -> object:
            return torch._scaled_mm(
                a, b, scale_a=s, scale_b=s, out_dtype=torch.bfloat16, use_fast_accum=True
            )

        ms = ref_ms(fn)
    else:
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
        a = torch.randn(n, n, device=dev, dtype=dtype)
        b = torch.randn(n, n, device=dev, dtype=dtype)
        mode = "tf32" if precision == "tf32" else "ieee"
        with fp32_precision(mode):
            ms = ref_ms(lambda: torch.mm(a, b), rep_ms=500 if precision == "fp32" else 300)
    return 2 * n**3 / (ms * 1e-3) / 1e12


def copies_reference(size: int) -> dict[str, float]:
    """GB/s of each copy kind at `size` bytes (and of the device copy) by do_bench."""
    gen = torch.Generator(device="cuda").manual_seed(5)
    dev = torch.randint(0, 256, (size,), dtype=torch.uint8, device="cuda", generator=gen)
    host = {"pageable": dev.cpu(), "pinned": torch.empty(size, dtype=torch.uint8, pin_memory=True)}
    host["pinned"].copy_(dev)
    torch.cuda.synchronize()
    out = {}
    fns: dict[str, Callable[[], object]] = {
        "copy.h2d.pinned": lambda: dev.copy_(host["pinned"], non_blocking=True),
        "copy.h2d.pageable": lambda: dev.copy_(host["pageable"]),
        "copy.d2h.pinned": lambda: host["pinned"].copy_(dev, non_blocking=True),
        "copy.d2h.pageable": lambda: host["pageable"].copy_(dev),
    }
    for key, fn in fns.items():
        out[key] = size / (ref_ms(fn, rep_ms=400, warmup_ms=50) * 1e-3) / 1e9
    host.clear()
    dst = torch.empty_like(dev)
    out["copy.d2d"] = 2 * size / (ref_ms(lambda: dst.copy_(dev)) * 1e-3) / 1e9
    return out


def launch_reference(kernels: int) -> dict[str, float]:
    x = torch.ones(1, device="cuda")
    y = torch.ones(1, device="cuda")
    out = {}
    per = ref_timer_s(f"for _ in range({kernels}): x.add_(1)", {"x": x})
    out["launch.eager"] = per / kernels * 1e6
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            x.add_(1)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(kernels):
            x.add_(1)
    out["launch.graph"] = ref_ms(g.replay) * 1e3 / kernels
    out["sync.synchronize"] = ref_timer_s("torch.cuda.synchronize()", {"torch": torch}, 0.5) * 1e6
    out["sync.item"] = ref_timer_s("y.item()", {"y": y}, 0.5) * 1e6
    return out


def value_of(rows: list[Benchmark], bench_id: str) -> float | None:
    return next((r.value for r in rows if r.id == bench_id), None)


def params_of(rows: list[Benchmark], bench_id: str) -> dict[str, Any]:
    return next((dict(r.params or {}) for r in rows if r.id == bench_id), {})


# --- main ---------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT") or "benchmarks/results/gpu-local")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()

    magic_cold: float | None = None
    with section("%gpusight-equivalent in a fresh process (cold: first CUDA use of this run)"):
        magic_cold = magic_in_fresh_process("cold")

    if not torch.cuda.is_available():
        log("no CUDA device: nothing to check")
        return 1
    props = torch.cuda.get_device_properties(0)
    l2_mib = getattr(props, "L2_cache_size", 0) / 2**20
    log(
        f"\ndevice: {props.name}, sm {props.major}.{props.minor},"
        f" {props.multi_processor_count} SMs, {props.total_memory / 2**30:.0f} GiB, L2"
        f" {l2_mib:.0f} MiB; torch {torch.__version__} (CUDA {torch.version.cuda});"
        f" python {sys.version.split()[0]}"
    )
    try:
        import triton

        log(f"triton {triton.__version__}")
    except ImportError:
        log("triton missing: do_bench references will fail")
    nvidia_smi()
    flags_before = snapshot()
    rows: list[Benchmark] = []

    with section("matmul: gpusight, then do_bench median, per precision"):
        mm_rows: list[Benchmark] = []
        for p in matmul.PRECISIONS:
            row = matmul.run(budget_s=1.5, precisions=(p,))[0]
            mm_rows.append(row)
            rows.append(row)
            if row.value is None:
                log(f"matmul.{p}: skipped: {row.skipped}")
                continue
            n = int((row.params or {})["n"])
            ref = safe(f"matmul.{p}", lambda p=p, n=n: matmul_reference(p, n))
            compare(Compare(f"matmul.{p} (n={n})", "TFLOP/s", row.value, ref, "do_bench"))
        matmul.compare_to_best(mm_rows)
        for r in mm_rows:
            if r.value is not None:
                log(f"  {r.id}: {r.value} TFLOP/s, datasheet {r.ceiling} ({r.ceiling_source})")
                log(f"      {r.params}")

    with section("copies: gpusight sweep, then do_bench median at the largest size"):
        cp_rows = copies.run(budget_s=10.0)
        rows += cp_rows
        for r in cp_rows:
            log(f"  {r.id}: {r.value} GB/s, ceiling {r.ceiling} ({r.ceiling_source})")
            if r.skipped:
                log(f"  {r.id}: skipped: {r.skipped}")
            for pt in r.series or []:
                log(f"      {pt['x']:>11} B  {pt['y']} GB/s")
        size = int(params_of(cp_rows, "copy.h2d.pinned").get("bytes") or 0)
        refs = safe("copies", lambda: copies_reference(size)) if size else None
        for key, ref in (refs or {}).items():
            if key != "copy.d2d":
                compare(
                    Compare(
                        f"{key} ({size >> 20} MiB)",
                        "GB/s",
                        value_of(cp_rows, key),
                        ref,
                        "do_bench",
                    )
                )
        d2d_size = int(params_of(cp_rows, "copy.d2d").get("bytes") or 0)
        if d2d_size:
            if d2d_size != size or refs is None:
                refs = safe("copy.d2d", lambda: copies_reference(d2d_size))
            d2d_ref = (refs or {}).get("copy.d2d")
            compare(
                Compare(
                    f"copy.d2d ({d2d_size >> 20} MiB)",
                    "GB/s",
                    value_of(cp_rows, "copy.d2d"),
                    d2d_ref,
                    "do_bench",
                )
            )
        small = safe("copies 4 MiB", lambda: copies_reference(4 << 20)) or {}
        h2d_small = next(
            (
                p["y"]
                for r in cp_rows
                if r.id == "copy.h2d.pinned"
                for p in r.series or []
                if p["x"] == 4 << 20
            ),
            None,
        )
        compare(
            Compare(
                "copy.h2d.pinned (4 MiB)",
                "GB/s",
                h2d_small,
                small.get("copy.h2d.pinned"),
                "do_bench",
                gated=False,
            )
        )

    with section("launch and sync: gpusight, then torch Timer / do_bench"):
        ln_rows = launch.run(budget_s=5.0)
        rows += ln_rows
        kernels = int(params_of(ln_rows, "launch.eager").get("kernels") or 1000)
        launch_refs = safe("launch", lambda: launch_reference(kernels)) or {}
        for key, ref in launch_refs.items():
            method = "do_bench" if key == "launch.graph" else "torch Timer"
            compare(Compare(key, "µs", value_of(ln_rows, key), ref, method))

    with section("CPU matmul: gpusight, then torch Timer"):
        cpu_rows = cpu.run(budget_s=2.0)
        rows += cpu_rows
        n = int(params_of(cpu_rows, "cpu.matmul.fp32").get("n") or 1024)
        a, b = torch.randn(n, n), torch.randn(n, n)
        per = safe("cpu", lambda: ref_timer_s("torch.mm(a, b)", {"torch": torch, "a": a, "b": b}))
        compare(
            Compare(
                f"cpu.matmul.fp32 (n={n})",
                "GFLOP/s",
                value_of(cpu_rows, "cpu.matmul.fp32"),
                2 * n**3 / per / 1e9 if per else None,
                "torch Timer",
            )
        )

    with section("DataLoader sweep: gpusight, then a plain loop on the best configuration"):
        stages: list[str] = []
        ld_rows = loader(
            SyntheticImages(), budget_s=16.0, batch_size=64, progress=lambda s, f: stages.append(s)
        )
        rows += ld_rows
        for r in ld_rows:
            log(f"  {r.id}: {r.value} {r.unit} {r.skipped or ''}")
            log(f"      params={r.params} series={r.series}")
        best = params_of(ld_rows, "loader.best")
        if best.get("num_workers") is not None:
            compare(
                Compare(
                    f"loader.best (w={best['num_workers']})",
                    "samples/s",
                    value_of(ld_rows, "loader.best"),
                    safe("loader", lambda: loader_reference(best)),
                    "plain loop",
                    gated=False,
                )
            )

    flags_after = snapshot()
    check("torch flags unchanged", flags_after == flags_before, "snapshot before == after")

    with section("report"):
        report = build_report(rows, title="gpusight bench on the device")
        path = out / "bench.json"
        data = report.to_dict()
        path.write_text(json.dumps(data, indent=2, allow_nan=False) + "\n", "utf-8")
        try:
            validate(data)
            log(f"wrote {path} (schema-valid)")
        except ModuleNotFoundError as exc:  # jsonschema may be missing on the device image
            log(f"wrote {path}, NOT validated here ({exc}): validate it with gpusight.load_report")
        except ReportValidationError as exc:
            FAILURES.append(f"bench.json does not match the schema: {exc}")
            log(f"wrote {path}, which does NOT match the schema: {exc}")
        log(format_table(report.benchmarks))
        if report.findings:
            log(format_findings(report.findings))
        log(report.verdict.summary)

    bf16 = value_of(rows, "matmul.bf16")
    h2d, h2d_pageable = value_of(rows, "copy.h2d.pinned"), value_of(rows, "copy.h2d.pageable")
    check("bf16 >= 700 TFLOP/s", bf16 is not None and bf16 >= 700, f"{bf16}")
    check("pinned H2D >= 45 GB/s", h2d is not None and h2d >= 45, f"{h2d}")
    ratio = h2d / h2d_pageable if h2d and h2d_pageable else None
    check(
        "pinned H2D >= 4x pageable",
        ratio is not None and ratio >= 4,
        f"{ratio and round(ratio, 2)}x",
    )
    gated = [c for c in COMPARES if c.gated and c.diff_pct is not None]
    worst = max(gated, key=lambda c: abs(c.diff_pct or 0), default=None)
    within = all(abs(c.diff_pct or 0) <= TARGET_PCT for c in gated) if gated else None
    check(f"gpusight within {TARGET_PCT:g} % of the references", within,
          f"worst {worst.name} {worst.diff_pct:+.1f} %" if worst else "no comparisons")  # fmt: skip

    magic_warm: float | None = None
    with section("%gpusight-equivalent in a fresh process (warm)"):
        magic_warm = magic_in_fresh_process("warm")
    for label, wall in (("cold", magic_cold), ("warm", magic_warm)):
        check(
            f"%gpusight {label} <= 10 s",
            wall is not None and wall <= 10,
            f"{wall and round(wall, 2)} s",
        )
    nvidia_smi()

    table = [
        "",
        "=== gpusight.bench vs references (same run)",
        f"{'benchmark':<30} {'gpusight':>10} {'reference':>10} {'diff':>8}  unit       method",
    ]
    for c in COMPARES:
        d = c.diff_pct
        diff = f"{d:+.1f}%" if d is not None else "n/a"
        mark = "" if c.gated else " (info)"
        nums = f"{_fmt(c.ours):>10} {_fmt(c.ref):>10} {diff:>8}"
        table.append(f"{c.name:<30} {nums}  {c.unit:<10} {c.method}{mark}")
    table.append("")
    for name, ok, detail in CHECKS:
        table.append(f"{'PASS' if ok else ('n/a ' if ok is None else 'FAIL')}  {name}: {detail}")
    for f in FAILURES:
        table.append(f"ERROR {f}")
    table.append(f"total {time.perf_counter() - t_start:.0f} s")
    LOG.extend(table)
    (out / "bench-reference.txt").write_text("\n".join(LOG) + "\n", "utf-8")
    (out / "bench-table.txt").write_text("\n".join(table[1:]) + "\n", "utf-8")
    print("\n".join(table), flush=True)
    return 1 if FAILURES or any(ok is False for _, ok, _ in CHECKS) else 0


if __name__ == "__main__":
    sys.exit(main())
