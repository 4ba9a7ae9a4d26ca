#!/usr/bin/env python3
"""GPU check of gpusight.bench: every benchmark through gpusight's own code, each headline number
against an independent reference that measures the same defined quantity in the same run, and
the %gpusight start-up time.

Interleaved (ABBA), paired: each row is measured ROUNDS times by gpusight and ROUNDS times by
its reference, in the order gpusight, reference | reference, gpusight | ..., and each round
gives one paired difference (gpusight vs the reference measured next to it); the row's
difference is the median of those. A power-capped GPU drifts over seconds (the tensor-core rate
falls as the chip warms; the pageable copy rate moves with the host), so values measured apart
in time differ by the drift: a pair is measured back to back, the alternating order cancels what
drift is left within pairs, and the median keeps one odd round (a first launch.graph round at a
different clock) from moving the result. Run 6 compared the sides' medians over 3 rounds: its
pageable H2D drifted 8.7 -> 6.9 GB/s through the rounds, and the two medians, taken at
different moments, differed by 5.7 % where the pairs differ by +0.6, -5.7 and +12.9 %. The
rounds, the pairs and the spread are printed with each row so that noise shows.

Definitions (gpusight.bench docstrings and each row's params["definition"]) and references:

- matmul.*: sustained rate, 2 n^3 / mean time of back-to-back products after 1 s of them (the
  timed window: matmul.SUSTAINED_TIMED_S, the row's ``repeats`` products). Reference: 1 s of
  products, then torch.utils.benchmark.Timer.timeit(number=repeats) on the same product: host
  clock, CUDA-synchronised at the ends, over the same window of the load. (The rate sinks for
  seconds as the chip warms under its power cap, so a reference that times a later window, as
  blocked_autorange's block-size search does, measures a cooler rate: run 6's +5.5 to +8.0 %.)
  Not triton's do_bench here: it writes 256 MB before every call
  to flush the L2, and the first of its products then starts by writing that back, which costs
  a sub-millisecond fp8/fp16 product several per cent (do_bench stays for the copies).
- copy.*.pinned, copy.d2d: do_bench median at the largest size (ms-scale copies).
- copy.*.pageable: steady state, one host buffer faulted in before timing and reused.
  Reference: torch.utils.benchmark.Timer around dst.copy_(src) on its own buffer made the same
  way (host clock; the copy blocks the host for its length anyway).
- launch.eager, sync.synchronize, sync.item: host time per call. Reference: Timer on the same
  statement (``torch.cuda.synchronize()`` without argument on both sides), with torch's thread
  count (Timer defaults to one thread).
- launch.graph: time per kernel, replays back to back (throughput). Reference: Timer (host
  clock) on ``g.replay()`` back to back, synchronised at block ends. Information rows: do_bench,
  which puts a 256 MB memset and an L2 flush before each replay (a cold replay).
- cpu.matmul.fp32: Timer on torch.mm over the same two rotated input sets, same thread count.
- loader.best: a plain loop over the best configuration, epochs repeated, the first batch of each
  epoch left out as gpusight does (information only: DataLoader rates are noisy).

A bf16 diagnostic comes first: 8192^3 bf16 the way others measured 769-798 TFLOP/s (3 warm-ups,
10 timed, mean), gpusight's quick and sustained ways, after a 2 s idle, and 3 s of products from
idle, with NVML sampled throughout (SM clock, power, clock-event reasons), so that the run says
why a sustained rate sits below a burst.

Targets: references within 3 %; bf16 burst >= 700 TFLOP/s; gpusight's sustained bf16 >= 700 or
below it with the GPU reporting its power/thermal limit; pinned H2D >= 45 GB/s and >= 4x
pageable; check + quick benchmarks in a fresh process <= 10 s.

Writes OUT/bench.json (a bench report made by gpusight), OUT/bench-reference.txt (the log, written
as it goes), OUT/bf16-diagnostic.json and OUT/bench-table.txt (the short table, printed last).

    PYTHONPATH=python_pkg python3 benchmarks/gpu_bench.py --out "$OUT"
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch
from gpusight.bench import build_report, copies, cpu, launch, loader, matmul
from gpusight.bench.device import release_pinned_memory
from gpusight.bench.flags import snapshot
from gpusight.bench.nvml import LIMIT_REASONS, ClockSummary, GpuNvml
from gpusight.bench.table import format_findings, format_table
from gpusight.report import Benchmark
from gpusight.report_schema import ReportValidationError, validate
from harness.cli import Parser
from harness.log import Log
from harness.order import round_order
from harness.proc import run
from harness.record import note
from harness.stats import spread_pct
from torch.utils.data import DataLoader, Dataset

TARGET_PCT = 3.0
BF16_BAR = 700.0
N = 8192
# Printed, kept, and appended to OUT/bench-reference.txt at once: a killed run keeps its log. A
# failing section is logged and counted; the next one still runs.
LOGGER = Log()
log = LOGGER
section = LOGGER.section
FAILURES = LOGGER.failures


@dataclass
class Compare:
    name: str
    unit: str
    ours: float | None
    ref: float | None
    method: str
    gated: bool = True  # counts towards the 3 % target
    ours_all: tuple[float, ...] = ()
    ref_all: tuple[float, ...] = ()
    pairs_pct: tuple[float, ...] = ()  # per ABBA round: gpusight vs the reference beside it

    def spreads(self) -> str:
        def one(vals: tuple[float, ...]) -> str:
            spread = spread_pct(vals) if len(vals) >= 2 else None
            return "-" if spread is None else f"{spread:.1f}%"

        return f"{one(self.ours_all)}/{one(self.ref_all)}"

    @property
    def diff_pct(self) -> float | None:
        if self.pairs_pct:
            return statistics.median(self.pairs_pct)
        if self.ours is None or self.ref is None or self.ref == 0:
            return None
        return 100.0 * (self.ours - self.ref) / self.ref


COMPARES: list[Compare] = []
CHECKS: list[tuple[str, bool | None, str]] = []


def compare(c: Compare) -> None:
    COMPARES.append(c)
    d = c.diff_pct
    diff = f"{d:+.1f} %" if d is not None else "n/a"
    log(f"{c.name:<30} gpusight {_fmt(c.ours):>10} {c.unit:<8} reference {_fmt(c.ref):>10}  {diff}")
    if c.ours_all or c.ref_all:
        ours = ", ".join(_fmt(v) for v in c.ours_all)
        refs = ", ".join(_fmt(v) for v in c.ref_all)
        log(f"    rounds (ABBA): gpusight [{ours}]  reference [{refs}]  spread {c.spreads()}")
    if c.pairs_pct:
        pairs = ", ".join(f"{p:+.1f}" for p in c.pairs_pct)
        log(f"    paired by round: [{pairs}] %, median {c.diff_pct:+.1f} %")


# Even: as many rounds with gpusight first as with the reference first.
ROUNDS = 4
# Host-bound rows (pageable copies, launch and sync, CPU matmul) move with the host from one
# buffer or second to the next; they are cheap, so they get more rounds.
HOST_ROUNDS = 6


def abba(
    name: Callable[[Benchmark], str],
    unit: str,
    method: str,
    ours: Callable[[], Benchmark],
    ref: Callable[[Benchmark], float | None],
    gated: bool = True,
    rounds: int = 0,
) -> Benchmark:
    """Measure a row ``rounds`` (default ROUNDS, even) times by gpusight and by its reference, in
    ABBA order; the difference is the median over rounds of each round's paired difference
    (gpusight vs the reference next to it in time). Returns gpusight's row nearest its median."""
    rows: list[Benchmark] = []
    refs: list[float] = []
    pairs: list[float] = []
    label = "?"
    rounds = rounds or ROUNDS
    for r in range(rounds):
        got: dict[str, float] = {}
        for side in round_order(r, "ours", ("ref",)):
            if side == "ours":
                row = ours()
                rows.append(row)
                _log_row(row)
                if row.value is not None:
                    got["ours"] = float(row.value)
                continue
            first = next((x for x in rows if x.value is not None), None)
            if first is None:
                continue
            label = name(first)
            v = safe(label, partial(ref, first))
            if v is not None:
                refs.append(float(v))
                got["ref"] = float(v)
        if "ours" in got and got.get("ref"):
            pairs.append(100.0 * (got["ours"] / got["ref"] - 1))
    values = [x.value for x in rows if x.value is not None]
    mid = statistics.median(values) if values else None
    pick = min(rows, key=lambda x: abs((x.value or 0) - (mid or 0))) if values else rows[0]
    compare(
        Compare(
            label if values else name(rows[0]),
            unit,
            mid,
            statistics.median(refs) if refs else None,
            f"{method}, ABBA x{rounds}",
            gated,
            tuple(values),
            tuple(refs),
            tuple(pairs),
        )
    )
    return pick


def check(name: str, ok: bool | None, detail: str) -> None:
    CHECKS.append((name, ok, detail))
    log(f"check {name}: {_verdict(name, ok).strip()} ({detail})")


def _verdict(name: str, ok: bool | None) -> str:
    if ok is None:
        return "INFO" if name.startswith("info:") else "n/a "
    return "PASS" if ok else "FAIL"


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:,.1f}" if abs(v) >= 10 else f"{v:.3f}"


def safe(name: str, fn: Callable[[], Any]) -> Any:
    """A reference that fails is logged and counted; the section goes on without it."""
    return LOGGER.safe(f"reference {name}", fn)


def ref_ms(fn: Callable[[], object], rep_ms: int = 300, warmup_ms: int = 100) -> float:
    """Median ms of fn by triton's do_bench (CUDA events; it zeroes 256 MB before each call)."""
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))


def ref_timer_s(stmt: str, env: dict[str, Any], min_run_time: float = 1.0) -> float:
    """Median seconds per statement by torch.utils.benchmark.Timer (CUDA-synchronised at the ends
    of each block), with the thread count gpusight runs with: Timer's default is one thread."""
    from torch.utils.benchmark import Timer

    timer = Timer(stmt=stmt, globals=env, num_threads=torch.get_num_threads())
    return float(timer.blocked_autorange(min_run_time=min_run_time).median)


def nvidia_smi() -> None:
    fields = (
        "name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu,"
        "pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,memory.used"
    )
    out = run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv"], 20)
    text = out.stdout.strip() or out.stderr.strip()
    log(text if out.rc != 127 else f"nvidia-smi: {text}")


# --- NVML sampled in the background -----------------------------------------------------------


class Sampler:
    """NVML read every ``interval`` s on a thread while the block runs; summaries per phase."""

    def __init__(self, index: int = 0, interval: float = 0.02) -> None:
        self.nv = GpuNvml(index)
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def ok(self) -> bool:
        return self.nv.handle is not None

    def __enter__(self) -> Sampler:
        if self.ok:
            self._thread = threading.Thread(target=self._run, name="nvml-sampler", daemon=True)
            self._thread.start()
        else:
            log(f"NVML not sampled: {self.nv.why}")
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.nv.sample()

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.nv.close()

    def summary(self, t0: float, t1: float) -> ClockSummary | None:
        return self.nv.summary(since=t0, until=t1) if self.ok else None


def _state(s: ClockSummary | None) -> str:
    if s is None or not s.samples:
        return "no NVML samples"
    lo = f", min {s.sm_clock_min_mhz:,.0f}" if s.sm_clock_min_mhz is not None else ""
    peak = f", peak {s.power_max_w:,.0f} W" if s.power_max_w is not None else ""
    return f"{s.describe()}{lo}{peak}; reasons seen: {', '.join(s.reasons) or 'none'}"


def _state_dict(s: ClockSummary | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {
        "samples": s.samples,
        "sm_clock_mhz": s.sm_clock_mhz,
        "sm_clock_min_mhz": s.sm_clock_min_mhz,
        "power_w": s.power_w,
        "power_max_w": s.power_max_w,
        "power_limit_w": s.power_limit_w,
        "power_source": s.power_source,
        "temperature_c": s.temperature_c,
        "reasons": s.reasons,
    }


# --- bf16 diagnostic ----------------------------------------------------------------------------


def _bf16_inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(N, N, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(N, N, device="cuda", dtype=torch.bfloat16, generator=g)
    return a, b


def _tflops(seconds: float, products: int = 1) -> float:
    return 2 * N**3 * products / seconds / 1e12


def others_way() -> dict[str, float]:
    """8192^3 bf16 on random data, one input pair: 3 warm-ups, then the mean of 10 timed products
    (CUDA events around each; the host-clock mean over the 10 alongside)."""
    a, b = _bf16_inputs(11)
    for _ in range(3):
        torch.mm(a, b)
    torch.cuda.synchronize()
    events = [(_event(), _event()) for _ in range(10)]
    t0 = time.perf_counter()
    for start, end in events:
        start.record()
        torch.mm(a, b)
        end.record()
    torch.cuda.synchronize()
    host = (time.perf_counter() - t0) / 10
    ms = [s.elapsed_time(e) for s, e in events]
    return {
        "tflops": _tflops(statistics.fmean(ms) / 1e3),
        "tflops_host_clock": _tflops(host),
        "first_product_tflops": _tflops(ms[0] / 1e3),
        "last_product_tflops": _tflops(ms[-1] / 1e3),
    }


def _event() -> Any:
    return torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]


def bf16_trace(seconds: float = 3.0, chunk: int = 10) -> tuple[list[tuple[float, float]], float]:
    """Back-to-back products for ``seconds`` from an idle GPU: (end of chunk in s of device
    time since the start, TFLOP/s of the chunk), and the host time of the start."""
    a, b = _bf16_inputs(12)
    c = torch.empty_like(a)
    torch.mm(a, b, out=c)  # cuBLAS picks its kernel before the clock starts
    torch.cuda.synchronize()
    time.sleep(0.05)
    first = _event()
    t_host = time.perf_counter()
    first.record()
    pending: deque[tuple[Any, Any]] = deque()
    done: list[tuple[Any, Any]] = []
    while time.perf_counter() - t_host < seconds:
        start, end = _event(), _event()
        start.record()
        for _ in range(chunk):
            torch.mm(a, b, out=c)
        end.record()
        pending.append((start, end))
        while len(pending) > 3:  # a bounded queue: the host stays close to the device
            s, e = pending.popleft()
            e.synchronize()
            done.append((s, e))
    torch.cuda.synchronize()
    done.extend(pending)
    points = [
        (first.elapsed_time(e) / 1e3, _tflops(s.elapsed_time(e) / 1e3, chunk)) for s, e in done
    ]
    return points, t_host


def bf16_diagnostic(out: Path) -> dict[str, Any]:
    """Why gpusight's bf16 rate is what it is: burst vs sustained, with NVML alongside."""
    result: dict[str, Any] = {"n": N, "phases": {}}
    with Sampler(interval=0.02) as smp:

        def phase(name: str, fn: Callable[[], Any]) -> Any:
            t0 = time.perf_counter()
            value = fn()
            t1 = time.perf_counter()
            state = smp.summary(t0, t1)
            result["phases"][name] = {
                "seconds": round(t1 - t0, 3),
                "value": _jsonable(value),
                "gpu": _state_dict(state),
            }
            log(f"  {name} ({t1 - t0:.1f} s): {_describe(value)}")
            log(f"      GPU: {_state(state)}")
            return value

        phase("idle 2 s (baseline)", lambda: time.sleep(2.0))
        burst = phase("a) others' way: 3 warm-ups, 10 timed, mean", others_way)
        quick = phase(
            "b) gpusight quick (as %gpusight)",
            lambda: matmul.run(quick=True, budget_s=0.4, precisions=("bf16",))[0],
        )
        sustained = phase(
            "c) gpusight full (sustained)",
            lambda: matmul.run(budget_s=2.5, precisions=("bf16",))[0],
        )
        phase("idle 2 s", lambda: time.sleep(2.0))
        after_idle = phase(
            "d) gpusight full after 2 s idle",
            lambda: matmul.run(budget_s=2.5, precisions=("bf16",))[0],
        )
        phase("idle 2 s", lambda: time.sleep(2.0))
        points, t_host = phase("e) 3 s of back-to-back products from idle", bf16_trace)
        result["trace"] = _trace_table(points, t_host, smp)

    settled = [y for x, y in points if x >= max(points[-1][0] - 1.0, 0.0)] if points else []
    early = [y for x, y in points if x <= 0.1] if points else []
    result["trace_settled_tflops"] = statistics.fmean(settled) if settled else None
    result["trace_first_100ms_tflops"] = statistics.fmean(early) if early else None
    result["burst_tflops"] = burst["tflops"]
    result["quick_tflops"] = quick.value
    result["sustained_tflops"] = sustained.value
    result["sustained_after_idle_tflops"] = after_idle.value
    result["sustained_params"] = sustained.params
    (out / "bf16-diagnostic.json").write_text(json.dumps(result, indent=2) + "\n", "utf-8")
    return result


def _trace_table(
    points: list[tuple[float, float]], t_host: float, smp: Sampler, bucket: float = 0.25
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if not points:
        return rows
    log("      t (s)   TFLOP/s   SM MHz   power W   temp C   reasons")
    end = points[-1][0]
    k = 0
    while k * bucket < end:
        lo, hi = k * bucket, (k + 1) * bucket
        rates = [y for x, y in points if lo < x <= hi]
        state = smp.summary(t_host + lo, t_host + hi)
        row: dict[str, Any] = {
            "t_s": round(hi, 2),
            "tflops": round(statistics.fmean(rates), 1) if rates else None,
            "sm_clock_mhz": state.sm_clock_mhz if state else None,
            "power_w": state.power_w if state else None,
            "temperature_c": state.temperature_c if state else None,
            "reasons": state.reasons if state else None,
        }
        rows.append(row)

        def f(v: Any, spec: str) -> str:
            return format(v, spec) if isinstance(v, (int, float)) else "-"

        log(
            f"      {hi:5.2f}   {f(row['tflops'], '7.1f')}   {f(row['sm_clock_mhz'], '6.0f')}"
            f"   {f(row['power_w'], '7.0f')}   {f(row['temperature_c'], '6.0f')}"
            f"   {', '.join(row['reasons'] or []) or '-'}"
        )
        k += 1
    return rows


def _describe(value: Any) -> str:
    if isinstance(value, Benchmark):
        p = value.params or {}
        return (
            f"{value.value} {value.unit} ({p.get('regime')}, warm-up {p.get('warmup_s')} s,"
            f" {value.repeats} timed, noise {p.get('noise_pct')} %); in params: "
            f"{p.get('gpu_state')}"
        )
    if isinstance(value, dict):
        return ", ".join(f"{k} {v:.1f}" for k, v in value.items() if isinstance(v, float))
    if isinstance(value, tuple) and value and isinstance(value[0], list):
        return f"{len(value[0])} chunks of 10 products"
    return "done"


def _jsonable(value: Any) -> Any:
    if isinstance(value, Benchmark):
        return {"value": value.value, "repeats": value.repeats, "params": value.params}
    if isinstance(value, tuple):
        return None
    return value


# --- %gpusight in a fresh process -------------------------------------------------------------

MAGIC_CODE = r"""
import json, time
t0 = time.perf_counter()
import gpusight
from gpusight.jupyter import line_magic
t1 = time.perf_counter()
marks = {}
def progress(stage, fraction):
    marks.setdefault(stage, time.perf_counter())
try:
    from IPython.core.interactiveshell import InteractiveShell
except ImportError:
    InteractiveShell = None
if InteractiveShell is not None:
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "gpusight")
    how = "%gpusight's code in an IPython shell"
    report = line_magic.run_line("", shell, progress=progress)
else:
    how = "check_and_bench (no IPython here)"
    report = line_magic.check_and_bench(progress=progress)
t3 = time.perf_counter()
bench_start = min((t for s, t in marks.items() if s != "checking the environment"), default=t3)
report.validate()
print("GPUSIGHT_TIMING " + json.dumps({
    "how": how, "import_s": t1 - t0, "check_s": bench_start - t1, "bench_s": t3 - bench_start,
    "findings": report.finding_ids, "checks": len(report.checks),
    "measured": sum(b.value is not None for b in report.benchmarks),
    "rows": len(report.benchmarks), "progress_calls": len(marks),
    "skipped": {b.id: b.skipped for b in report.benchmarks if b.skipped},
    "summary": report.verdict.summary,
}))
"""


def magic_in_fresh_process(label: str) -> float | None:
    proc = run([sys.executable, "-c", MAGIC_CODE], 180)
    wall = proc.wall_s
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("GPUSIGHT_TIMING ")), None)
    if proc.rc != 0 or line is None:
        log(f"%gpusight ({label}) failed, rc {proc.rc}:\n{proc.stderr[-3000:]}")
        FAILURES.append(f"%gpusight {label}: rc {proc.rc}")
        return None
    info = json.loads(line.split(" ", 1)[1])
    log(
        f"%gpusight ({label}, {info['how']}): {wall:.2f} s end to end (python start, then"
        f" import {info['import_s']:.2f} s, check {info['check_s']:.2f} s incl. torch import,"
        f" quick bench {info['bench_s']:.2f} s); {info['checks']} checks, findings"
        f" {info['findings']}; {info['measured']}/{info['rows']} rows measured;"
        f" skipped: {info['skipped']}"
    )
    log(f"    verdict: {info['summary']}")
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
    """Steady samples/s of the best configuration by a plain loop: as many epochs as the time
    takes (one epoch of 50,000 samples lasts about a second at the best rate), the first batch
    of each epoch left out as gpusight leaves it out."""
    workers = int(params["num_workers"])
    kwargs: dict[str, Any] = {"batch_size": 64, "num_workers": workers}
    kwargs["pin_memory"] = bool(params.get("pin_memory"))
    if workers > 0:
        kwargs["prefetch_factor"] = int(params.get("prefetch_factor") or 2)
        kwargs["persistent_workers"] = bool(params.get("persistent_workers"))
    dl = DataLoader(SyntheticImages(), **kwargs)
    samples, busy = 0, 0.0
    start = time.perf_counter()
    it: Any = None
    try:
        while time.perf_counter() - start < seconds:
            it = iter(dl)
            prev: float | None = None
            for x, _ in it:
                now = time.perf_counter()
                if prev is not None:
                    samples += int(x.shape[0])
                    busy += now - prev
                prev = now
                if now - start >= seconds:
                    break
            if prev is None:
                break
        return samples / busy
    finally:
        for obj in (it, getattr(dl, "_iterator", None)):
            getattr(obj, "_shutdown_workers", lambda: None)()


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


def matmul_reference(precision: str, n: int, count: int) -> float:
    """Sustained TFLOP/s by torch's Timer: 1 s of back-to-back products first (as gpusight's
    sustained rows), then ``count`` products (gpusight's timed window) by Timer.timeit, host
    clock synchronised at the ends."""
    dev = "cuda"
    gen = torch.Generator(device=dev).manual_seed(7)
    if precision == "fp8":
        a = torch.randn(n, n, device=dev, dtype=torch.bfloat16, generator=gen).to(
            torch.float8_e4m3fn
        )
        b = (
            torch.randn(n, n, device=dev, dtype=torch.bfloat16, generator=gen)
            .to(torch.float8_e4m3fn)
            .t()
        )
        s = torch.tensor(1.0, device=dev)

        def fn() -> object:
            return torch._scaled_mm(
                a, b, scale_a=s, scale_b=s, out_dtype=torch.bfloat16, use_fast_accum=True
            )

    else:
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
        a = torch.randn(n, n, device=dev, dtype=dtype, generator=gen)
        b = torch.randn(n, n, device=dev, dtype=dtype, generator=gen)

        def fn() -> object:
            return torch.mm(a, b)

    mode = "tf32" if precision == "tf32" else "ieee"
    with fp32_precision(mode):
        end = time.perf_counter() + 1.0
        while time.perf_counter() < end:
            for _ in range(4):
                fn()
            torch.cuda.synchronize()
        from torch.utils.benchmark import Timer

        per = Timer(stmt="fn()", globals={"fn": fn}).timeit(number=count).mean
    return 2 * n**3 / per / 1e12


def copy_reference(direction: str, memory: str, size: int) -> float:
    """GB/s of one copy kind at ``size`` bytes, on buffers of its own made as gpusight defines
    them: host memory written (pages faulted in) before timing, reused across repetitions."""
    gen = torch.Generator(device="cuda").manual_seed(5)
    box: dict[str, Any] = {}
    try:
        box["dev"] = torch.randint(0, 256, (size,), dtype=torch.uint8, device="cuda", generator=gen)
        box["host"] = torch.empty(size, dtype=torch.uint8, pin_memory=memory == "pinned")
        box["host"].copy_(box["dev"])
        torch.cuda.synchronize()
        src, dst = (box["host"], box["dev"]) if direction == "h2d" else (box["dev"], box["host"])
        if memory == "pinned":
            ms = ref_ms(lambda: dst.copy_(src, non_blocking=True), rep_ms=400, warmup_ms=50)
            return size / (ms * 1e-3) / 1e9
        per = ref_timer_s("dst.copy_(src)", {"dst": dst, "src": src}, min_run_time=0.8)
        return size / per / 1e9
    finally:
        box.clear()
        torch.cuda.synchronize()
        release_pinned_memory()
        torch.cuda.empty_cache()


def d2d_reference(size: int) -> float:
    gen = torch.Generator(device="cuda").manual_seed(6)
    box = {"src": torch.randint(0, 256, (size,), dtype=torch.uint8, device="cuda", generator=gen)}
    box["dst"] = torch.empty_like(box["src"])
    try:
        return 2 * size / (ref_ms(lambda: box["dst"].copy_(box["src"])) * 1e-3) / 1e9
    finally:
        box.clear()
        torch.cuda.empty_cache()


def _graph(n: int) -> tuple[Any, torch.Tensor]:
    x = torch.ones(1, device="cuda")
    side = torch.cuda.Stream()  # type: ignore[no-untyped-call]
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            x.add_(1)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(n):
            x.add_(1)
    torch.cuda.synchronize()
    return g, x


def launch_reference(key: str, n: int) -> float:
    """µs per call (per kernel for the launch rows), measured the way the row defines it."""
    if key == "launch.eager":
        x = torch.ones(1, device="cuda")
        return ref_timer_s(f"for _ in range({n}): x.add_(1)", {"x": x}) / n * 1e6
    if key == "launch.graph":
        g, _x = _graph(n)
        for _ in range(3):
            g.replay()
        torch.cuda.synchronize()
        return ref_timer_s("g.replay()", {"g": g}, 0.5) / n * 1e6
    if key == "sync.synchronize":
        return ref_timer_s("torch.cuda.synchronize()", {"torch": torch}, 0.5) * 1e6
    if key == "sync.item":
        y = torch.ones(1, device="cuda")
        return ref_timer_s("y.item()", {"y": y}, 0.5) * 1e6
    raise ValueError(key)


# Row makers and references for abba(): named, so that each binds its own arguments.
def _matmul_ref(precision: str, r: Benchmark) -> float:
    n = (r.params or {}).get("n")
    if not isinstance(n, int):
        raise ValueError(f"matmul row without its size: {r.params}")
    return matmul_reference(precision, n, int(r.repeats or 50))


def _copy_row(one: tuple[tuple[str, str], ...], budget: float) -> Benchmark:
    return copies.run(budget_s=budget, directions=one, device_copy=False)[0]


def _copy_ref(direction: str, memory: str, r: Benchmark) -> float:
    return copy_reference(direction, memory, int((r.params or {}).get("bytes") or 0))


def _same(text: str, _r: Benchmark) -> str:
    return text


def _launch_row(key: str) -> Benchmark:
    return launch.run(budget_s=1.2, only=(key,))[0]


def _launch_ref(key: str, r: Benchmark) -> float:
    p = r.params or {}
    return launch_reference(key, int(p.get("kernels") or p.get("calls") or 1000))


def value_of(rows: list[Benchmark], bench_id: str) -> float | None:
    return next((r.value for r in rows if r.id == bench_id), None)


def params_of(rows: list[Benchmark], bench_id: str) -> dict[str, Any]:
    return next((dict(r.params or {}) for r in rows if r.id == bench_id), {})


def _log_row(r: Benchmark) -> None:
    if r.skipped:
        log(f"  {r.id}: skipped: {r.skipped}")
        return
    log(f"  {r.id}: {r.value} {r.unit} [{r.label}], ceiling {r.ceiling} ({r.ceiling_source})")
    log(f"      {r.params}")
    for pt in r.series or []:
        log(f"      {pt['x']:>11} B  {pt['y']} {r.unit}")


# --- main ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = Parser(__doc__).out(os.environ.get("OUT") or "benchmarks/results/gpu-local")
    args = parser.parse_args(argv)
    out = Path(args.out)
    note(out)
    LOGGER.path = out / "bench-reference.txt"
    LOGGER.path.write_text("", "utf-8")
    t_start = time.perf_counter()

    magic_cold: float | None = None
    with section("%gpusight in a fresh process (cold: first CUDA use of this run)"):
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
        f" python {sys.version.split()[0]}; {torch.get_num_threads()} torch threads,"
        f" {os.cpu_count()} CPUs; transparent hugepages: {copies.transparent_hugepages()}"
    )
    try:
        import triton

        log(f"triton {triton.__version__}")
    except ImportError:
        log("triton missing: do_bench references will fail")
    nvidia_smi()
    flags_before = snapshot()
    rows: list[Benchmark] = []
    diag: dict[str, Any] = {}

    with section("bf16 8192^3 diagnostic: burst vs sustained, NVML sampled every 20 ms"):
        diag = bf16_diagnostic(out)
        burst, sus = diag["burst_tflops"], diag["sustained_tflops"]
        after_idle, settled = diag["sustained_after_idle_tflops"], diag["trace_settled_tflops"]
        if burst and sus:
            log(f"  sustained (gpusight) is {100 * (1 - sus / burst):.1f} % below the burst")
        if after_idle and settled:
            log(
                f"  gpusight after idle {after_idle:.1f} vs the trace's last second"
                f" {settled:.1f} TFLOP/s: {100 * (after_idle / settled - 1):+.1f} %"
            )

    with section("matmul: gpusight (sustained) and Timer (1 s of products first), ABBA"):
        mm: dict[str, Benchmark] = {}
        for p in matmul.RUN_ORDER:
            first = matmul.run(budget_s=2.5, precisions=(p,))[0]
            if first.value is None:
                log(f"matmul.{p}: skipped: {first.skipped}")
                mm[p] = first
                continue
            box = {"first": first}

            def ours(p: str = p, box: dict[str, Benchmark] = box) -> Benchmark:
                # The first round's gpusight row was measured above (it says whether p runs).
                got = box.pop("first", None)
                return got if got is not None else matmul.run(budget_s=2.5, precisions=(p,))[0]

            mm[p] = abba(
                lambda r: f"matmul.{r.id.split('.')[1]} (n={(r.params or {}).get('n')})",
                "TFLOP/s",
                "Timer",
                ours,
                partial(_matmul_ref, p),
            )
        mm_rows = [mm[p] for p in matmul.PRECISIONS if p in mm]
        matmul.compare_to_best(mm_rows)
        rows += mm_rows
        for r in mm_rows:
            _log_row(r)

    with section("copies: gpusight's sweep and the reference at its largest size, ABBA"):
        cp_rows: list[Benchmark] = []
        for direction, memory in copies.DIRECTIONS:
            budget = 2.0 if memory == "pageable" else 1.2
            one = ((direction, memory),)
            cp_rows.append(
                abba(
                    lambda r: f"{r.id} ({int((r.params or {}).get('bytes') or 0) >> 20} MiB)",
                    "GB/s",
                    "do_bench" if memory == "pinned" else "torch Timer",
                    partial(_copy_row, one, budget),
                    partial(_copy_ref, direction, memory),
                    rounds=HOST_ROUNDS if memory == "pageable" else ROUNDS,
                )
            )
        cp_rows.append(
            abba(
                lambda r: f"copy.d2d ({int((r.params or {}).get('bytes') or 0) >> 20} MiB)",
                "GB/s",
                "do_bench",
                lambda: copies.run(budget_s=1.5, directions=(), device_copy=True)[0],
                lambda r: d2d_reference(int((r.params or {}).get("bytes") or 0)),
            )
        )
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
        small = safe("copy 4 MiB", lambda: copy_reference("h2d", "pinned", 4 << 20))
        compare(
            Compare(
                "copy.h2d.pinned (4 MiB)", "GB/s", h2d_small, small, "do_bench (µs-scale)", False
            )
        )
        rows += cp_rows

    with section("launch and sync: gpusight and its reference, ABBA"):
        ln_rows: list[Benchmark] = []
        for key in launch.LABELS:
            ln_rows.append(
                abba(
                    partial(_same, key),
                    "µs",
                    "torch Timer",
                    partial(_launch_row, key),
                    partial(_launch_ref, key),
                    rounds=HOST_ROUNDS,
                )
            )
        kernels = int(params_of(ln_rows, "launch.graph").get("kernels") or 1000)

        def cold_replay() -> float:
            g, _x = _graph(kernels)
            return ref_ms(g.replay) * 1e3 / kernels

        compare(
            Compare(
                "launch.graph cold replay",
                "µs",
                value_of(ln_rows, "launch.graph"),
                safe("launch.graph cold", cold_replay),
                "do_bench: memset + L2 flush first",
                gated=False,
            )
        )
        rows += ln_rows

    with section("CPU matmul: gpusight and torch Timer (same threads, same two input sets), ABBA"):
        cpu_pairs: dict[int, Any] = {}

        def cpu_ref(r: Benchmark) -> float:
            n = int((r.params or {}).get("n") or 1024)
            if n not in cpu_pairs:
                g = torch.Generator().manual_seed(3)
                cpu_pairs[n] = itertools.cycle(
                    [(torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)) for _ in "ab"]
                )
            env = {"torch": torch, "pairs": cpu_pairs[n]}
            return 2 * n**3 / ref_timer_s("torch.mm(*next(pairs))", env) / 1e9

        cpu_row = abba(
            lambda r: f"cpu.matmul.fp32 (n={(r.params or {}).get('n')})",
            "GFLOP/s",
            "torch Timer",
            lambda: cpu.run(budget_s=2.0)[0],
            cpu_ref,
            rounds=HOST_ROUNDS,
        )
        log(f"  torch threads: gpusight {(cpu_row.params or {}).get('threads')}, reference"
            f" {torch.get_num_threads()}")  # fmt: skip
        rows.append(cpu_row)

    with section("DataLoader sweep: gpusight, then a plain loop on the best configuration"):
        stages: list[str] = []
        ld_rows = loader(
            SyntheticImages(), budget_s=10.0, batch_size=64, progress=lambda s, f: stages.append(s)
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

    burst = diag.get("burst_tflops")
    check(
        f"bf16 burst >= {BF16_BAR:g} TFLOP/s (others' method: 3 warm-ups, 10 timed, mean)",
        burst is not None and burst >= BF16_BAR,
        f"{burst and round(burst, 1)}",
    )
    bf16 = value_of(rows, "matmul.bf16")
    bp = params_of(rows, "matmul.bf16")
    limited = any(r in str(bp.get("clock_events") or "") for r in LIMIT_REASONS)
    check(
        f"bf16 sustained (gpusight) >= {BF16_BAR:g} TFLOP/s, or below it with the GPU reporting"
        " a power/thermal limit while timed",
        bf16 is not None and (bf16 >= BF16_BAR or limited),
        f"{bf16} TFLOP/s, {bp.get('regime')}; {bp.get('gpu_state')}",
    )
    after_idle, settled = diag.get("sustained_after_idle_tflops"), diag.get("trace_settled_tflops")
    gap = 100 * (after_idle / settled - 1) if after_idle and settled else None
    # Information, not a target: the rate keeps sinking for seconds as the chip warms under
    # its power cap; gpusight's "sustained" is defined as after 1 s of load, and this says how
    # far the 2-3 s mark is below it.
    check(
        "info: gpusight's sustained bf16 (1 s warm-up, after idle) vs the 3 s trace's last second",
        None,
        f"{after_idle} vs {settled and round(settled, 1)} TFLOP/s"
        + (f", {gap:+.1f} %" if gap is not None else ""),
    )
    h2d, h2d_pageable = value_of(rows, "copy.h2d.pinned"), value_of(rows, "copy.h2d.pageable")
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
    with section("%gpusight in a fresh process (warm)"):
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
        "=== gpusight.bench vs references (same run, ABBA rounds; columns: each side's median;"
        " diff: median of the rounds' paired differences;"
        " spread: (max-min)/median of each side's rounds)",
        f"{'benchmark':<30} {'gpusight':>10} {'reference':>10} {'diff':>8}  {'spread':>11}"
        "  unit       method",
    ]
    for c in COMPARES:
        d = c.diff_pct
        diff = f"{d:+.1f}%" if d is not None else "n/a"
        mark = "" if c.gated else " (info)"
        nums = f"{_fmt(c.ours):>10} {_fmt(c.ref):>10} {diff:>8}  {c.spreads():>11}"
        table.append(f"{c.name:<30} {nums}  {c.unit:<10} {c.method}{mark}")
    if diag:
        table.append("")
        table.append(
            "bf16 8192^3: burst (others' method) {b}, gpusight quick {q}, sustained {s}, "
            "sustained after 2 s idle {i}, trace first 100 ms {f}, last 1 s {t} TFLOP/s".format(
                b=_fmt(diag.get("burst_tflops")),
                q=_fmt(diag.get("quick_tflops")),
                s=_fmt(diag.get("sustained_tflops")),
                i=_fmt(diag.get("sustained_after_idle_tflops")),
                f=_fmt(diag.get("trace_first_100ms_tflops")),
                t=_fmt(diag.get("trace_settled_tflops")),
            )
        )
        table.append(f"  GPU while sustained: {bp.get('gpu_state')}")
    table.append("")
    for name, ok, detail in CHECKS:
        table.append(f"{_verdict(name, ok)}  {name}: {detail}")
    for f in FAILURES:
        table.append(f"ERROR {f}")
    table.append(f"total {time.perf_counter() - t_start:.0f} s")
    for line in table:
        log(line)
    (out / "bench-table.txt").write_text("\n".join(table[1:]) + "\n", "utf-8")
    return 1 if FAILURES or any(ok is False for _, ok, _ in CHECKS) else 0


if __name__ == "__main__":
    sys.exit(main())
