"""What does ``gpusight run`` cost the user's script? Bare and watched, end to end, alternating.

    PYTHONPATH=python_pkg python3 benchmarks/watch_cost.py --out "$OUT/cost"   # --method process
    PYTHONPATH=python_pkg python3 benchmarks/watch_cost.py --only mlp_adam tiny_batch \\
        --variants bare watched no_profile teardown --rounds 3 --out "$OUT/cost"

Issue #20: a launch-bound step ran 35-40 % slower under ``gpusight run`` while the report said
0.6 %. Nothing here runs in gpusight's process or reads its clocks: each run is a fresh process,
``python scenario.py`` (bare) or ``python -m gpusight run scenario.py`` (watched, as a user runs
it: no ``--steps``, the default window), and the scenario's own clock (``--step-log``: the host
time between its step ends) gives every step's time. Rounds alternate the order (ABBA) so a
drift of the machine weighs on both sides.

Per scenario, from the paired runs of each round (median over rounds):

* **steady overhead**: the watched run's mean step over the steady steps (from
  ``steady_from`` on: past the warm-up and the profiler window) over the bare run's mean over
  the same steps, minus 1 (the throughput the user loses); the same with medians beside it;
* **window extra wall**: what the first ``steady_from`` steps cost beyond their steady pace,
  watched minus bare, in seconds (the warm-up, the profiler window and the hook switch; a
  bare run's own start-up cost cancels);
* **exit cost**: the process's wall time outside the step loop, watched minus bare (gpusight's
  import, reading the trace back and writing the report, after the user's last step);
* the report's own ``overhead_pct`` beside the measured overhead, and the report's step time
  against the bare run's mean step over the same steady steps.

Variants beside ``bare`` and ``watched`` take one thing away, to find what costs the time:
``no_profile`` (``--profile-steps 0``: no profiler window), ``teardown`` (``TEARDOWN_CUPTI=1``
in the environment: torch's profiler then tears CUPTI down when it stops).

``--cpus 2-5`` pins every process (bare and watched alike) to those cores: a launch-bound step's
pace depends on which core runs it, and unpinned processes of the same script differed by up
to 25 % on the H200's host. Pinned, they still differ by 10-30 %: ``--method spread`` found
the host's pace changing within a process over seconds (a run's two halves 6.6 % apart, a
control loop before and after its steps 14 %), so a few percent of the watch's steady cost is
resolved by blocks alternated within one process (``--method parts``), not by these rounds;
what this benchmark alone shows is the window's extra wall, the exit cost and the report's
figures beside the script's own clock.

Writes ``OUT/watch-cost.json`` and ``OUT/watch-cost-table.txt`` (printed last). Exit code 1 when
a run failed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import proc
from harness.cli import Parser
from harness.order import round_order
from harness.paths import SCENARIOS, child_env
from harness.record import note
from harness.scripts import step_log
from harness.stats import median_range
from harness.table import aligned, signed

# Every public scenario, the shortest and most launch-bound first: the ones whose overhead the
# hooks could show (--method scenario runs the same list).
DEFAULT_ONLY = (
    "mlp_adam",
    "tiny_batch",
    "unbatched_inference",
    "item_per_step",
    "pageable_copy",
    "small_batch_rnn",
    "cpu_model",
    "dataparallel",
    "conv_nchw_amp",
    "fp32_transformer",
    "healthy",
    "cpu_augment",
    "slow_loader",
    "bursty_loader",
)
# Extra arguments to ``gpusight run`` and extra environment, per variant.
VARIANTS: dict[str, tuple[list[str] | None, dict[str, str]]] = {
    "bare": (None, {}),
    "watched": ([], {}),
    "no_profile": (["--profile-steps", "0"], {}),
    "teardown": ([], {"TEARDOWN_CUPTI": "1"}),
}
MIN_STEADY_FROM = 12  # past gpusight's warm-up (3 + up to 3 more), window (3) and switch
STEADY_MARGIN = 3


def run_once(
    variant: str,
    script: Path,
    iters: int,
    cuda: bool,
    work: Path,
    tag: str,
    timeout: float,
    cpus: str | None = None,
) -> dict[str, Any]:
    """One process; its steps (ms), wall time (s), and the report when watched."""
    gs_args, extra_env = VARIANTS[variant]
    log = work / f"{tag}.steps.json"
    report = work / f"{tag}.report.json"
    argv = [str(script), "--iters", str(iters), "--warmup", "0", "--step-log", str(log)]
    if not cuda:
        argv += ["--device", "cpu"]
    if gs_args is None:
        cmd = [sys.executable, *argv]
    else:
        cmd = [sys.executable, "-m", "gpusight", "run", "--quiet", "--json", str(report)]
        cmd += [*gs_args, *argv]
    if cpus:
        cmd = ["taskset", "-c", cpus, *cmd]
    env = child_env()
    env.update(extra_env)
    p = proc.run(cmd, timeout, env=env, cwd=SCENARIOS)
    rc, err = p.rc, p.stderr
    out: dict[str, Any] = {"variant": variant, "rc": rc, "wall_s": round(p.wall_s, 3)}
    if rc != 0 or not log.exists():
        out["error"] = err[-2000:]
        return out
    out["step_ms"] = step_log(log)
    if gs_args is not None and report.exists():
        rep = json.loads(report.read_text("utf-8"))
        run = rep.get("run") or {}
        kern = run.get("kernels") or {}
        out["report"] = {
            "bottleneck": (rep.get("verdict") or {}).get("bottleneck"),
            "overhead_pct": run.get("overhead_pct"),
            "step_time_ms": run.get("step_time_ms"),
            "step_time_median_ms": run.get("step_time_median_ms"),
            "warmup_steps": run.get("warmup_steps"),
            "steps": run.get("steps"),
            "window_steps": kern.get("window_steps"),
            "window_cost_ms": kern.get("window_cost_ms"),
            # The steps timed by line (after the measured ones): their mean step, against the
            # measured steps' (what the line clock adds, twice a run).
            "line_clock_step_ms": (run.get("host_lines") or {}).get("step_ms"),
            "detail_every": kern.get("detail_every"),
            "sampler_busy_pct": kern.get("sampler_busy_pct"),
        }
    return out


def steady_from(runs: list[dict[str, Any]]) -> int:
    """The first step past every watched run's warm-up and profiler window (and a margin)."""
    start = MIN_STEADY_FROM
    for r in runs:
        rep = r.get("report") or {}
        head = (rep.get("warmup_steps") or 0) + (rep.get("window_steps") or 0) + 1
        start = max(start, head + STEADY_MARGIN)
    return start


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def compare(bare: dict[str, Any], other: dict[str, Any], start: int) -> dict[str, Any]:
    """One round's pair: the other run against the bare one over the same steps."""
    b, w = bare["step_ms"], other["step_ms"]
    n = min(len(b), len(w))
    if n <= start + 5:
        return {"error": f"too few steps ({n}) past step {start}"}
    bs, ws = b[start:n], w[start:n]
    b_mean, w_mean = mean(bs), mean(ws)
    head_extra_ms = (sum(w[:start]) - start * w_mean) - (sum(b[:start]) - start * b_mean)
    exit_cost_s = (other["wall_s"] - sum(w) / 1000) - (bare["wall_s"] - sum(b) / 1000)
    out: dict[str, Any] = {
        "steady_pct": 100 * (w_mean / b_mean - 1),
        "steady_median_pct": 100 * (statistics.median(ws) / statistics.median(bs) - 1),
        "bare_mean_ms": b_mean,
        "mean_ms": w_mean,
        "window_extra_s": head_extra_ms / 1000,
        "exit_cost_s": exit_cost_s,
    }
    rep = other.get("report")
    if rep:
        out["report_overhead_pct"] = rep.get("overhead_pct")
        if rep.get("step_time_ms"):
            out["report_step_vs_bare_pct"] = 100 * (rep["step_time_ms"] / b_mean - 1)
            # The same process's own clock: the report's accuracy apart from the watch's cost
            # and from the spread between processes.
            out["report_step_vs_own_pct"] = 100 * (rep["step_time_ms"] / w_mean - 1)
        if rep.get("line_clock_step_ms") is not None:
            # The two steps timed by line, beyond two steady steps: what the line clock adds
            # to the run, once.
            out["line_clock_extra_ms"] = 2 * (float(rep["line_clock_step_ms"]) - w_mean)
    return out


def summarize(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [p for p in pairs if "error" not in p]
    if not ok:
        return {"rounds": 0}
    keys = (
        "steady_pct",
        "steady_median_pct",
        "window_extra_s",
        "exit_cost_s",
        "report_overhead_pct",
        "report_step_vs_bare_pct",
        "report_step_vs_own_pct",
        "bare_mean_ms",
        "mean_ms",
        "line_clock_extra_ms",
    )
    out: dict[str, Any] = {"rounds": len(ok)}
    for k in keys:
        vals = [p[k] for p in ok if p.get(k) is not None]
        if vals:
            out[k], out[k + "_range"] = median_range(vals)
    if out.get("report_overhead_pct") is not None and "steady_pct" in out:
        out["report_minus_measured_pp"] = out["report_overhead_pct"] - out["steady_pct"]
    return out


def sized_iters(
    script: Path, cuda: bool, work: Path, target_s: float, timeout: float, cpus: str | None
) -> int:
    probe = run_once("bare", script, 40, cuda, work, "size", timeout, cpus)
    if "step_ms" not in probe:
        raise RuntimeError(f"{script.stem}: the sizing run failed: {probe.get('error', '')}")
    typical = statistics.median(probe["step_ms"][10:]) / 1000
    return int(min(4000, max(80, target_s / max(typical, 1e-5))))


def measure(
    name: str, variants: list[str], rounds: int, cuda: bool, work: Path, args: argparse.Namespace
) -> dict[str, Any]:
    script = SCENARIOS / f"{name}.py"
    iters = sized_iters(script, cuda, work, args.target_s, args.timeout, args.cpus)
    others = [v for v in variants if v != "bare"]
    runs: list[list[dict[str, Any]]] = []
    for r in range(rounds):
        order = round_order(r, "bare", others)
        runs.append(
            [
                run_once(v, script, iters, cuda, work, f"{name}-{r}-{v}", args.timeout, args.cpus)
                for v in order
            ]
        )
    flat = [x for rnd in runs for x in rnd]
    failed = [f"{x['variant']}: {x.get('error', '')[-400:]}" for x in flat if "step_ms" not in x]
    start = steady_from(flat)
    result: dict[str, Any] = {"iters": iters, "steady_from": start, "failed": failed}
    for v in others:
        pairs = []
        for rnd in runs:
            by = {x["variant"]: x for x in rnd}
            if "step_ms" in by["bare"] and "step_ms" in by[v]:
                pairs.append(compare(by["bare"], by[v], start))
        result[v] = summarize(pairs)
        result[v]["pairs"] = pairs
        result[v]["reports"] = [x.get("report") for x in flat if x["variant"] == v]
    result["runs"] = [
        {k: x.get(k) for k in ("variant", "rc", "wall_s")} | {"step_ms": x.get("step_ms")}
        for x in flat
    ]
    return result


def table(results: dict[str, dict[str, Any]], variants: list[str]) -> str:
    head = (
        "scenario",
        "variant",
        "bare ms",
        "steady %",
        "(median %)",
        "range %",
        "win s",
        "exit s",
        "report %",
        "pp off",
        "step vs bare %",
        "vs own %",
        "lines +ms",
    )
    rows = [head]
    for name, res in results.items():
        if "error" in res:
            rows.append((name, "-", res["error"][:60], *[""] * (len(head) - 3)))
            continue
        for v in variants:
            if v == "bare" or v not in res:
                continue
            s = res[v]
            rng = s.get("steady_pct_range")
            rows.append(
                (
                    name,
                    v,
                    f"{s['bare_mean_ms']:.3f}" if s.get("bare_mean_ms") else "-",
                    signed(s.get("steady_pct")),
                    signed(s.get("steady_median_pct")),
                    f"{rng[0]:+.1f}..{rng[1]:+.1f}" if rng else "-",
                    signed(s.get("window_extra_s"), 2),
                    signed(s.get("exit_cost_s"), 2),
                    signed(s.get("report_overhead_pct"), 2),
                    signed(s.get("report_minus_measured_pp"), 1),
                    signed(s.get("report_step_vs_bare_pct")),
                    signed(s.get("report_step_vs_own_pct")),
                    signed(s.get("line_clock_extra_ms"), 1),
                )
            )
    lines = [aligned(rows)]
    notes = [
        "",
        "steady %: mean step watched / bare - 1 over the steps past the warm-up and window",
        "(median over rounds, each round one bare and one watched process); win s: the first",
        "steps' cost beyond their steady pace, watched - bare; exit s: wall time outside the",
        "step loop, watched - bare; report %: the report's own overhead_pct; pp off: report -",
        "measured; step vs bare: the report's step time against the bare mean step; vs own:",
        "against the watched run's own clock over the same steps (no process spread in it);",
        "lines +ms: what the two steps timed by line (after the measured ones) took beyond two",
        "steady watched steps, once a run (a tree before the line clock has none).",
    ]
    return "\n".join(lines + notes)


def main(argv: list[str] | None = None) -> int:
    p = Parser(__doc__).only(help="scenario names (default: a set)")
    p.add_argument("--variants", nargs="*", default=["bare", "watched"], choices=list(VARIANTS))
    p.rounds(3)
    p.add_argument("--target-s", type=float, default=3.0, help="seconds of steps per run")
    p.add_argument("--timeout", type=float, default=240.0, help="per run")
    p.add_argument("--budget", type=float, default=900.0, help="seconds for all of it")
    p.add_argument(
        "--cpus",
        default=None,
        help="run every process on these cores (taskset -c LIST): launch-bound steps vary "
        "less between processes on the same cores",
    )
    p.out()
    args = p.parse_args(argv)
    variants = list(dict.fromkeys(["bare", *args.variants]))
    import torch

    cuda = bool(torch.cuda.is_available())
    names = list(args.only or DEFAULT_ONLY)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="watch-cost-"))
    note(out)
    work = Path(tempfile.mkdtemp(prefix="watch-cost-runs-"))
    results: dict[str, dict[str, Any]] = {}
    t0 = time.monotonic()
    failed = False
    for name in names:
        if time.monotonic() - t0 > args.budget:
            results[name] = {"error": "not reached within --budget"}
            continue
        print(f"watch_cost: {name} ...", file=sys.stderr, flush=True)
        try:
            results[name] = measure(name, variants, args.rounds, cuda, work, args)
        except Exception as exc:
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
        failed = failed or "error" in results[name] or bool(results[name].get("failed"))
        (out / "watch-cost.json").write_text(
            json.dumps({"cuda": cuda, "variants": variants, "results": results}, indent=1)
        )
    text = table(results, variants)
    (out / "watch-cost-table.txt").write_text(text + "\n", "utf-8")
    print(text)
    return 1 if failed else 0
