"""What does watching cost? Each scenario bare and watched, interleaved, in one process.

    PYTHONPATH=python_pkg python3 benchmarks/watch_cost.py --method overhead --out "$OUT/ov"
    PYTHONPATH=python_pkg python3 benchmarks/watch_cost.py --method overhead --micro  # us per step

Issue #4 asks for instrumentation overhead <= 3 % of step time outside the profiler window.
``accuracy.py`` compares a bare and a watched run in separate processes, and two processes of
the same script differ by more than that (clocks, allocator, GPU state). Here every run is a
call of the scenario's ``main()`` in this one process, with
``sys.argv = [script, --iters I, --warmup W]`` (``--device cpu`` without CUDA); the scenario's
own timer gives the median step after its ``W`` warm-up steps (its ``SCENARIO_RESULT`` line).

For each scenario (shortest steps first, while the ``--budget`` lasts):

1. a short bare run sizes it: ``I`` so that the timed steps take about ``--target-s``;
2. one warm-up round (bare, watched), discarded;
3. ``--rounds`` rounds in ABBA order (bare, watched, watched, bare, ...), so that a slow drift
   of the machine weighs on both sides alike.

Then, while the budget lasts, two more rounds at a time for each scenario (shortest steps
first: cheap runs, noisy medians), up to ``--max-rounds``.

Watched is ``with gpusight.watch(warmup=Wg, profile_steps=0, stop_after_steps=False)``: no
profiler window (the criterion is about the steps outside it), and ``W > Wg + 1`` so that every
step the scenario times is one of gpusight's measured steps, with the cheap hooks only. After
each watched run the things the watch patches are compared with how they were before it.

Per scenario: the median of the bare medians, the median of the watched medians, overhead
``watched / bare - 1``; the same from each round's two runs side by side (the median of the
rounds' ratios: a drift between rounds cancels); the noise floor, the spread of the bare
medians (max - min over their median: a smaller overhead than that is not resolved);
gpusight's self-measured ``run.overhead_pct`` (its time in its own hooks) from the watched
rounds. Writes ``OUT/overhead.json`` and ``OUT/overhead-table.txt``; the table is printed last.
Exit code 1 when a scenario failed to run or the watch left something changed.

``--micro``: a tiny model (one host-to-device copy, one forward and one device-to-host copy a
step; on a CPU-only machine a copy to the ``meta`` device and two sync warnings stand in for
the GPU's) run bare and watched many times: the watch's added cost in microseconds per step,
and the part of it that the watch measures itself.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import io
import math
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from harness.cli import Parser
from harness.order import abba, rotated
from harness.paths import BENCHMARKS, PKG, SCENARIOS, on_path
from harness.record import command_line, write_results
from harness.scripts import read_meta, scenario_result
from harness.stats import paired_pct, paired_ratio, pct, spread_pct
from harness.table import aligned, fmt

GPUSIGHT_WARMUP = 3
SCENARIO_WARMUP = GPUSIGHT_WARMUP + 2  # > Wg + 1: the hook switch happens before the timed steps
SIZING_STEPS = 10
MIN_TIMED = 8
MAX_TIMED = 5000


# -- pure parts (tested in python_pkg/tests/test_overhead_benchmark.py; scenario_result, abba,
# paired_pct and paired_ratio are the harness's) ---------------------------------------------
def timed_steps(step_ms: float, target_s: float, lo: int = MIN_TIMED, hi: int = MAX_TIMED) -> int:
    """Steps whose total takes about ``target_s``, within ``[lo, hi]``."""
    if step_ms <= 0 or not math.isfinite(step_ms):
        return hi
    return max(lo, min(hi, math.ceil(target_s * 1000.0 / step_ms)))


def scenario_argv(script: str, iters: int, warmup: int, cuda: bool) -> list[str]:
    argv = [script, "--iters", str(iters), "--warmup", str(warmup)]
    return argv if cuda else [*argv, "--device", "cpu"]


def summarize(
    bare: list[float], watched: list[float], self_pct: list[float | None]
) -> dict[str, Any]:
    """Overhead from the rounds' step medians (ms), the bare-vs-bare noise floor, gpusight's own."""
    out: dict[str, Any] = {"bare_ms": None, "watched_ms": None, "overhead_pct": None}
    if bare:
        out["bare_ms"] = round(statistics.median(bare), 4)
        noise = spread_pct(bare)  # max - min over the median
        out["noise_pct"] = round(noise, 2) if noise is not None else None
    if watched:
        out["watched_ms"] = round(statistics.median(watched), 4)
    if bare and watched and out["bare_ms"]:
        out["overhead_pct"] = pct(out["watched_ms"] / out["bare_ms"])
    own = [p for p in self_pct if p is not None]
    out["self_pct"] = round(statistics.median(own), 3) if own else None
    return out


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "scenario", "bare ms", "watched ms", "ovh %", "paired %", "noise %", "self %", "steps",
        "rounds", "note",
    )  # fmt: skip
    lines: list[tuple[str, ...]] = [head]
    for r in rows:
        lines.append(
            (
                r["scenario"],
                fmt(r.get("bare_ms"), 4),
                fmt(r.get("watched_ms"), 4),
                fmt(r.get("overhead_pct")),
                fmt(r.get("paired_pct")),
                fmt(r.get("noise_pct")),
                fmt(r.get("self_pct")),
                fmt(r.get("timed_steps")),
                fmt(r.get("rounds")),
                r.get("status") or "; ".join(r.get("restore_problems") or []) or "",
            )
        )
    return aligned(lines, rule=True)


# -- running scenarios in this process ---------------------------------------------------------
def restorable(torch: Any) -> dict[str, Any]:
    """Identity of what the watch patches, and the torch settings it must leave as found."""
    from torch.nn.modules import module as m
    from torch.optim import optimizer as o
    from torch.utils.data import dataloader

    state: dict[str, Any] = {
        "Tensor.to/cuda/backward": tuple(
            vars(torch.Tensor).get(k) for k in ("to", "cuda", "backward")
        ),
        "autograd.backward": torch.autograd.backward,
        "cuda.synchronize": torch.cuda.synchronize,
        "DataLoader iter __next__": vars(dataloader._BaseDataLoaderIter).get("__next__"),
        "optimizer hooks": (
            len(o._global_optimizer_pre_hooks),
            len(o._global_optimizer_post_hooks),
        ),
        "module hooks": (
            len(m._global_forward_pre_hooks),
            len(m._global_forward_hooks),
            len(m._global_forward_hooks_always_called),
        ),
        "warnings.showwarning": warnings.showwarning,
        "sync warning filters": sum(
            1 for f in warnings.filters if f[1] is not None and "synchroniz" in f[1].pattern
        ),
        "profiler": bool(torch._C._autograd._profiler_enabled()),
        "gpusight threads": sum(t.name.startswith("gpusight") for t in _threads()),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["sync-debug mode"] = int(torch.cuda.get_sync_debug_mode())
    return state


def _threads() -> list[Any]:
    import threading

    return threading.enumerate()


def changed(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    return [k for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)]


class Flags:
    """torch settings the scenarios set for themselves, put back before every run."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.saved = (
            torch.backends.cudnn.benchmark,
            torch.get_float32_matmul_precision(),
            torch.backends.cuda.matmul.allow_tf32,
            torch.backends.cudnn.allow_tf32,
        )

    def reset(self) -> None:
        t = self.torch
        bench, precision, mm_tf32, cudnn_tf32 = self.saved
        t.backends.cudnn.benchmark = bench
        t.set_float32_matmul_precision(precision)
        t.backends.cuda.matmul.allow_tf32 = mm_tf32
        t.backends.cudnn.allow_tf32 = cudnn_tf32


@contextlib.contextmanager
def scenario_call(argv: list[str]) -> Iterator[io.StringIO]:
    """``sys.argv`` set for the scenario's parser and its stdout captured; both put back."""
    saved = sys.argv
    buf = io.StringIO()
    sys.argv = list(argv)
    try:
        with contextlib.redirect_stdout(buf):
            yield buf
    finally:
        sys.argv = saved


class Runner:
    def __init__(self, torch: Any, cuda: bool, gpusight_warmup: int, scenario_warmup: int) -> None:
        import gpusight

        self.torch = torch
        self.cuda = cuda
        self.gpusight = gpusight
        self.wg = gpusight_warmup
        self.w = scenario_warmup
        self.flags = Flags(torch)

    def _prepare(self) -> None:
        self.flags.reset()
        gc.collect()
        if self.cuda:
            self.torch.cuda.synchronize()

    def bare(self, mod: ModuleType, path: Path, iters: int) -> dict[str, Any]:
        self._prepare()
        t0 = time.perf_counter()
        with scenario_call(scenario_argv(str(path), iters, self.w, self.cuda)) as out:
            mod.main()
        return {
            "mode": "bare",
            "seconds": round(time.perf_counter() - t0, 3),
            "result": scenario_result(out.getvalue()),
        }

    def watched(self, mod: ModuleType, path: Path, iters: int) -> dict[str, Any]:
        self._prepare()
        before = restorable(self.torch)
        t0 = time.perf_counter()
        with scenario_call(scenario_argv(str(path), iters, self.w, self.cuda)) as out:
            with self.gpusight.watch(warmup=self.wg, profile_steps=0, stop_after_steps=False) as w:
                mod.main()
        seconds = time.perf_counter() - t0
        run = (w.report.run or {}) if w.report is not None else {}
        problems = changed(before, restorable(self.torch))
        return {
            "mode": "watched",
            "seconds": round(seconds, 3),
            "result": scenario_result(out.getvalue()),
            "self_pct": run.get("overhead_pct"),
            "measured_steps": run.get("steps"),
            "outcome": w.outcome,
            "restore_problems": problems,
        }


def step_ms(run: dict[str, Any], key: str = "median_step_ms") -> float | None:
    v = (run.get("result") or {}).get(key)
    return float(v) if isinstance(v, (int, float)) else None


def run_rounds(
    runner: Runner, mod: ModuleType, path: Path, iters: int, order: list[tuple[int, str]]
) -> list[dict[str, Any]]:
    """One full ``main()`` call per ``(round, mode)``, in that order."""
    runs: list[dict[str, Any]] = []
    for r, mode in order:
        run = (runner.bare if mode == "bare" else runner.watched)(mod, path, iters)
        run["round"] = r
        runs.append(run)
        print(
            f"  round {r:>2} {mode:<7} {fmt(step_ms(run), 4)} ms/step"
            + (f", self {fmt(run.get('self_pct'), 3)} %" if mode == "watched" else "")
            + f", {run['seconds']:.1f} s",
            file=sys.stderr,
            flush=True,
        )
    return runs


def summarize_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The row's figures from its runs; the warm-up round (round -1) left out."""
    kept = [x for x in runs if x["round"] >= 0]
    bare = [v for x in kept if x["mode"] == "bare" and (v := step_ms(x)) is not None]
    watched = [v for x in kept if x["mode"] == "watched" and (v := step_ms(x)) is not None]
    row = summarize(bare, watched, [x.get("self_pct") for x in kept if x["mode"] == "watched"])
    row["rounds"] = len({x["round"] for x in kept})
    row["paired_pct"] = paired_pct(
        [(x["round"], x["mode"], v) for x in kept if (v := step_ms(x)) is not None]
    )
    bare_mean = [v for x in kept if x["mode"] == "bare" and (v := step_ms(x, "mean_step_ms"))]
    watched_mean = [v for x in kept if x["mode"] == "watched" and (v := step_ms(x, "mean_step_ms"))]
    if bare_mean and watched_mean:
        mb, mw = statistics.median(bare_mean), statistics.median(watched_mean)
        row["overhead_mean_pct"] = pct(mw / mb)
    problems = sorted({p for x in runs for p in x.get("restore_problems") or []})
    if problems:
        row["restore_problems"] = ["not restored: " + ", ".join(problems)]
    row["runs"] = runs
    return row


def measure_scenario(
    runner: Runner, mod: ModuleType, path: Path, iters: int, rounds: int
) -> dict[str, Any]:
    """A warm-up round (bare, watched), then ``rounds`` ABBA rounds."""
    order = [(-1, "bare"), (-1, "watched"), *abba(rounds)]
    return summarize_runs(run_rounds(runner, mod, path, iters, order))


def more_rounds(
    runner: Runner, mod: ModuleType, path: Path, row: dict[str, Any], rounds: int = 2
) -> None:
    """``rounds`` more ABBA rounds for a measured scenario, continuing its pattern."""
    runs = row["runs"] + run_rounds(runner, mod, path, row["iters"], abba(rounds, row["rounds"]))
    row.update(summarize_runs(runs))


def run_scenarios(args: argparse.Namespace) -> int:
    import torch

    cuda = bool(torch.cuda.is_available())
    if args.threads:
        torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    on_path(SCENARIOS, BENCHMARKS)  # the scenarios import _common
    paths = sorted(p for p in SCENARIOS.glob("*.py") if not p.name.startswith("_"))
    if args.only:
        unknown = sorted(set(args.only) - {p.stem for p in paths})
        if unknown:
            print(f"unknown scenarios: {', '.join(unknown)}", file=sys.stderr)
            return 2
        paths = [p for p in paths if p.stem in args.only]
    runner = Runner(torch, cuda, args.gpusight_warmup, args.scenario_warmup)
    t_all = time.perf_counter()
    print(
        f"{len(paths)} scenarios, CUDA {'available' if cuda else 'NOT available (--device cpu)'}, "
        f"{args.rounds} ABBA rounds after a warm-up round; out: {out}",
        file=sys.stderr,
        flush=True,
    )
    rows: list[dict[str, Any]] = []
    sized: list[tuple[float, dict[str, Any], ModuleType, Path]] = []
    failed = False
    for path in paths:
        row: dict[str, Any] = {"scenario": path.stem}
        meta = read_meta(path)
        # Named with --only, a CUDA scenario still runs on the CPU (at its toy size).
        if meta["REQUIRES_CUDA"] and not cuda and not args.only:
            row["status"] = "skipped (needs CUDA)"
            rows.append(row)
            continue
        try:
            mod = importlib.import_module(path.stem)
            sizing = runner.bare(mod, path, args.scenario_warmup + SIZING_STEPS)
        except Exception as exc:  # one broken scenario must not stop the others
            row["status"] = f"failed: {type(exc).__name__}: {exc}"
            rows.append(row)
            failed = True
            continue
        ms = step_ms(sizing)
        if ms is None:
            row["status"] = "failed: no SCENARIO_RESULT"
            rows.append(row)
            failed = True
            continue
        row["sizing"] = sizing
        sized.append((ms, row, mod, path))
        print(f"- {path.stem}: {ms:.3f} ms/step, sizing run {sizing['seconds']} s", file=sys.stderr)

    def estimate_s(ms: float, row: dict[str, Any]) -> tuple[int, float]:
        """Timed steps a run, and seconds for the warm-up round and ``--rounds`` rounds."""
        n = timed_steps(ms, args.target_s)
        sizing_steps = args.scenario_warmup + SIZING_STEPS
        setup_s = max(0.0, row["sizing"]["seconds"] - sizing_steps * ms / 1e3)
        return n, 2 * (args.rounds + 1) * (setup_s + (args.scenario_warmup + n) * ms / 1e3)

    queue = sorted(sized, key=lambda s: s[0])
    extend: list[tuple[dict[str, Any], ModuleType, Path]] = []
    for ms, row, mod, path in queue:
        n, estimate = estimate_s(ms, row)
        iters = args.scenario_warmup + n
        row.update({"timed_steps": n, "iters": iters, "estimate_s": round(estimate, 1)})
        elapsed = time.perf_counter() - t_all
        if elapsed + estimate > args.budget:
            row["status"] = f"skipped (time budget: {elapsed:.0f} s spent, needs ~{estimate:.0f} s)"
            rows.append(row)
            print(f"- {path.stem}: {row['status']}", file=sys.stderr, flush=True)
            continue
        print(f"- {path.stem}: {n} timed steps a run, ~{estimate:.0f} s", file=sys.stderr)
        t0 = time.perf_counter()
        try:
            row.update(measure_scenario(runner, mod, path, iters, args.rounds))
            extend.append((row, mod, path))
        except Exception as exc:
            row["status"] = f"failed: {type(exc).__name__}: {exc}"
            failed = True
        row["seconds"] = round(time.perf_counter() - t0, 1)
        if row.get("restore_problems"):
            failed = True
        rows.append(row)
        print(
            f"- {path.stem}: overhead {fmt(row.get('overhead_pct'))} % "
            f"(noise {fmt(row.get('noise_pct'))} %, self {fmt(row.get('self_pct'), 3)} %), "
            f"{row['seconds']} s",
            file=sys.stderr,
            flush=True,
        )

    # What the budget has left buys more rounds, two at a time, shortest steps first: those
    # runs are cheap and their step medians the noisiest.
    grew = True
    while grew:
        grew = False
        for row, mod, path in extend:
            if row["rounds"] + 2 > args.max_rounds or row.get("status"):
                continue
            cost = 4 * statistics.median(x["seconds"] for x in row["runs"])
            if time.perf_counter() - t_all + cost > args.budget:
                continue
            t0 = time.perf_counter()
            try:
                more_rounds(runner, mod, path, row)
            except Exception as exc:
                row["status"] = f"failed: {type(exc).__name__}: {exc}"
                failed = True
            row["seconds"] = round(row["seconds"] + time.perf_counter() - t0, 1)
            if row.get("restore_problems"):
                failed = True
            grew = True
    for row, _, _ in extend:
        print(
            f"- {row['scenario']}: {row['rounds']} rounds, overhead {fmt(row.get('overhead_pct'))} "
            f"% (paired {fmt(row.get('paired_pct'))} %, noise {fmt(row.get('noise_pct'))} %)",
            file=sys.stderr,
        )

    order = {p.stem: i for i, p in enumerate(paths)}
    rows.sort(key=lambda r: order[r["scenario"]])
    summary: dict[str, Any] = {
        "seconds": round(time.perf_counter() - t_all, 1),
        "cuda": cuda,
        "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        if cuda
        else [],
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "command": command_line(),
        "settings": {
            "rounds": args.rounds,
            "max_rounds": args.max_rounds,
            "target_s": args.target_s,
            "gpusight_warmup": args.gpusight_warmup,
            "scenario_warmup": args.scenario_warmup,
            "budget_s": args.budget,
            "torch_threads": torch.get_num_threads(),
        },
        "max_overhead_pct": max(
            (r["overhead_pct"] for r in rows if r.get("overhead_pct") is not None), default=None
        ),
    }
    text = table(rows)
    text += (
        "\n\nbare ms / watched ms: median over the rounds of the scenario's own median step "
        "(after its warm-up); ovh %: watched / bare - 1, same process, ABBA rounds; paired %: "
        "median over rounds of each round's own watched / bare - 1; noise %: "
        "spread of the bare rounds (max - min over median), the smallest difference this run "
        "resolves; self %: gpusight's run.overhead_pct (time in its own hooks), median of the "
        "watched rounds; no profiler window in the watched runs"
    )
    text += f"\n\n{summary['seconds']} s, CUDA {cuda}, torch {summary['torch']}"
    print("\n" + text, flush=True)
    write_results(out, "overhead", {"summary": summary, "rows": rows}, text, "overhead-table.txt")
    return 1 if failed else 0


# -- ablation: which part of the watch costs the time ------------------------------------------
ABLATIONS = (
    "bare",
    "watched",
    "no_sampler",
    "thread_sampler",
    "no_sync_mode",
    "no_copy_hook",
    "minimal",
    "all_detail",
    "all_hooks",
)


@contextlib.contextmanager
def ablated(part: str) -> Iterator[None]:
    """The watch with one part switched off or changed, for this benchmark only: ``no_sampler``
    (no NVML sampler at all), ``thread_sampler`` (the sampler as a thread of the watched process,
    as before the sampler process: ``GPUSIGHT_SAMPLER=thread``), ``no_sync_mode`` (torch's
    sync-debug mode left off), ``no_copy_hook`` (``Tensor.to`` and ``Tensor.cuda`` left
    unwrapped), or ``minimal`` (sampler, sync mode and copy hook off: the step and module hooks
    alone), or ``all_detail`` (copies and syncs recorded on every step, however short: no
    sampling, see ``gpusight/watch/detail.py``), or ``all_hooks`` (the module hooks and framework
    clocks on every step: no light steps, as before they were sampled)."""
    from gpusight.watch import detail, sampler_process, session
    from gpusight.watch.nvml_sampler import NvmlSampler

    # The names session.py looks up when a watch starts.
    saved_sampler, saved_gpu_sampler = session.NvmlSampler, session.gpu_sampler
    saved_sync = session.Watch._maybe_enable_sync_mode
    saved_copy = session.Watch._wrap_copy
    saved_budget, saved_hook_budget = detail.BUDGET, detail.HOOK_BUDGET
    saved_env = os.environ.get(sampler_process.ENV)

    class Idle(NvmlSampler):
        def start(self) -> Idle:
            return self

    def idle(gpus: Any, interval_s: float, t0: float, labels: Any) -> Idle:
        return Idle(gpus, interval_s=interval_s, t0=t0, labels=labels)

    try:
        if part in ("no_sampler", "minimal"):
            session.NvmlSampler = Idle  # type: ignore[misc]
            session.gpu_sampler = idle  # type: ignore[assignment]
        if part == "thread_sampler":
            os.environ[sampler_process.ENV] = "thread"
        if part in ("no_sync_mode", "minimal"):
            session.Watch._maybe_enable_sync_mode = lambda self: None  # type: ignore[method-assign]
        if part in ("no_copy_hook", "minimal"):
            session.Watch._wrap_copy = lambda self, orig: orig  # type: ignore[method-assign]
        if part == "all_detail":
            detail.BUDGET = 1.0
        if part == "all_hooks":
            detail.HOOK_BUDGET = 1.0
        yield
    finally:
        detail.BUDGET, detail.HOOK_BUDGET = saved_budget, saved_hook_budget
        session.NvmlSampler, session.gpu_sampler = saved_sampler, saved_gpu_sampler  # type: ignore[misc]
        session.Watch._maybe_enable_sync_mode = saved_sync  # type: ignore[method-assign]
        session.Watch._wrap_copy = saved_copy  # type: ignore[method-assign]
        if saved_env is None:
            os.environ.pop(sampler_process.ENV, None)
        else:
            os.environ[sampler_process.ENV] = saved_env


def ablate(args: argparse.Namespace) -> int:
    """Each of ``ABLATIONS`` per round, the order rotated from round to round; the median step
    of each, and its difference from bare."""
    import torch

    cuda = bool(torch.cuda.is_available())
    on_path(SCENARIOS, BENCHMARKS)
    names = args.only or ["pageable_copy", "unbatched_inference"]
    parts = tuple(args.parts or ABLATIONS)
    runner = Runner(torch, cuda, args.gpusight_warmup, args.scenario_warmup)
    lines = [
        f"ablation: {args.rounds} rounds, order rotated; median over rounds of the scenario's "
        "median step (ms), and vs bare",
        f"{'scenario':<20} " + " ".join(f"{a:>14}" for a in parts),
    ]
    result: dict[str, Any] = {}
    for name in names:
        path = SCENARIOS / f"{name}.py"
        mod = importlib.import_module(name)
        sizing = runner.bare(mod, path, args.scenario_warmup + SIZING_STEPS)
        ms = step_ms(sizing) or 1.0
        iters = args.scenario_warmup + timed_steps(ms, args.target_s)
        per: dict[str, list[float]] = {a: [] for a in parts}
        for r in range(-1, args.rounds):  # round -1: warm-up, discarded
            for part in rotated(parts, max(r, 0)):
                if part == "bare":
                    run = runner.bare(mod, path, iters)
                else:
                    with ablated(part):  # "watched": nothing switched off
                        run = runner.watched(mod, path, iters)
                v = step_ms(run)
                print(f"  {name} round {r:>2} {part:<12} {fmt(v, 4)} ms", file=sys.stderr)
                if r >= 0 and v is not None:
                    per[part].append(v)
        med = {a: statistics.median(v) for a, v in per.items() if v}
        base = med.get("bare")
        cells = []
        for a in parts:
            m = med.get(a)
            d = f"{100 * (m / base - 1):+.1f}%" if m and base and a != "bare" else ""
            cells.append(f"{fmt(m, 3)} {d}".strip().rjust(14))
        lines.append(f"{name:<20} " + " ".join(cells))
        # Each round's runs side by side (a drift between rounds cancels): median of the ratios.
        base_runs = per.get("bare") or []
        paired = {
            a: pct(paired_ratio(v, base_runs))
            for a, v in per.items()
            if a != "bare" and v and len(v) == len(base_runs)
        }
        lines.append(
            f"{'  paired':<20} "
            + " ".join(f"{f'{paired[a]:+.1f}%' if a in paired else '':>14}" for a in parts)
        )
        result[name] = {"iters": iters, "runs_ms": per, "median_ms": med, "paired_pct": paired}
    text = "\n".join(lines)
    print("\n" + text, flush=True)
    write_results(args.out, "overhead-ablation", result, text, "overhead-ablation-table.txt")
    return 0


# -- the micro-benchmark: hook cost per step ---------------------------------------------------
def micro(args: argparse.Namespace) -> int:
    import torch
    from gpusight.watch.session import SYNC_MESSAGE, Watch
    from torch import nn

    cuda = bool(torch.cuda.is_available()) and not args.cpu
    torch.set_num_threads(1)
    dev = torch.device("cuda" if cuda else "cpu")
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)).to(dev).eval()
    x = torch.randn(1, 8)  # pageable host memory: on CUDA its copy is a sync

    if cuda:

        def step_bare() -> Any:
            return model(x.to(dev)).cpu()

        step_watched = step_bare
        device_types: tuple[str, ...] = ("cuda",)
    else:

        def step_bare() -> Any:
            x.to("meta")  # a host-to-device copy; "meta" stands in for the GPU
            return model(x)

        def step_watched() -> Any:
            x.to("meta")
            out = model(x)
            # What sync-debug mode raises at the GPU's .to(dev) and .cpu(), from the same line.
            warnings.warn(SYNC_MESSAGE, stacklevel=1)
            warnings.warn(SYNC_MESSAGE, stacklevel=1)
            return out

        device_types = ("meta",)

    def loop(fn: Callable[[], Any], n: int) -> float:
        t = time.perf_counter_ns()
        for _ in range(n):
            fn()
        return (time.perf_counter_ns() - t) / n / 1e3

    n = args.micro_steps
    bare: list[float] = []
    watched: list[float] = []
    own: list[float] = []
    per_step: dict[str, float] = {}
    with torch.inference_mode():
        loop(step_bare, max(100, n // 10))
        for _ in range(args.micro_repeats):
            gc.collect()
            bare.append(loop(step_bare, n))
            gc.collect()
            w = Watch(warmup=2, profile_steps=0, stop_after_steps=False, device_types=device_types)
            with w:
                loop(step_watched, 5)  # warm-up steps, then the hook switch
                watched.append(loop(step_watched, n))
            rec = w.recorder
            assert rec is not None
            steps = [r for r in rec.records if r.phase == "measure"]
            own.append(sum(r.overhead_ns for r in steps) / max(1, len(steps)) / 1e3)
            per_step = {
                "steps": len(steps),
                "syncs_per_step": sum(a.measured for a in w.collected.syncs.values())
                / max(1, len(steps)),
                "copies_per_step": sum(a.measured for a in w.collected.copies.values())
                / max(1, len(steps)),
            }
    b, wt = min(bare), min(watched)
    result = {
        "device": str(dev),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "steps_per_loop": n,
        "repeats": args.micro_repeats,
        "bare_us": round(b, 2),
        "watched_us": round(wt, 2),
        "added_us": round(wt - b, 2),
        "self_measured_us": round(statistics.median(own), 2),
        **{k: round(v, 3) if isinstance(v, float) else v for k, v in per_step.items()},
    }
    print(
        f"micro ({dev}, {n} steps x {args.micro_repeats}, fastest loop): bare {b:.2f} us/step, "
        f"watched {wt:.2f} us/step, added {wt - b:.2f} us/step, of which gpusight measures "
        f"{result['self_measured_us']:.2f} us in its hooks; per step "
        f"{per_step['syncs_per_step']:.0f} syncs and {per_step['copies_per_step']:.0f} copies "
        "recorded"
    )
    write_results(args.out, "overhead-micro", result)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = (
        Parser(__doc__)
        .out(help="folder for overhead.json (default: results/overhead-local)")
        .only(help="scenario names (CUDA-only ones then run anyway)")
        .rounds(4, help="ABBA rounds after the warm-up round")
    )
    ap.add_argument(
        "--max-rounds",
        type=int,
        default=12,
        help="more rounds, two at a time, while the budget lasts after every scenario ran",
    )
    ap.add_argument(
        "--target-s", type=float, default=0.5, help="seconds of timed steps per run (about)"
    )
    ap.add_argument("--gpusight-warmup", type=int, default=GPUSIGHT_WARMUP)
    ap.add_argument("--scenario-warmup", type=int, default=None, help="default: Wg + 2")
    ap.add_argument(
        "--budget", type=float, default=180.0, help="seconds for everything (shortest first)"
    )
    ap.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch CPU threads for every run (on a small shared CPU machine: 1)",
    )
    ap.add_argument("--micro", action="store_true", help="only the hook micro-benchmark")
    ap.add_argument(
        "--ablate",
        action="store_true",
        help="which part of the watch costs the time: each part switched off in turn "
        "(--only scenarios; default pageable_copy unbatched_inference)",
    )
    ap.add_argument("--parts", nargs="*", choices=ABLATIONS, help="--ablate: these variants only")
    ap.add_argument("--micro-steps", type=int, default=20000)
    ap.add_argument("--micro-repeats", type=int, default=5)
    ap.add_argument("--cpu", action="store_true", help="micro: the CPU variant even with CUDA")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    if args.scenario_warmup is None:
        args.scenario_warmup = args.gpusight_warmup + 2
    if args.scenario_warmup <= args.gpusight_warmup + 1:
        ap.error("--scenario-warmup must exceed --gpusight-warmup + 1 (timed steps all measured)")
    if not any((Path(p) / "gpusight").is_dir() for p in sys.path if p):
        sys.path.append(str(PKG))
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    if args.micro:
        return micro(args)
    if args.ablate:
        return ablate(args)
    if args.out is None:
        args.out = str(BENCHMARKS / "results" / "overhead-local")
    return run_scenarios(args)
