"""Why two processes of one launch-bound script differ, and whether a control loop cancels it.

    python3 benchmarks/watch_cost.py --method spread --procs 6 --cpus 2-5 --out "$OUT/spread"

``--method process`` compares a bare and a watched process of the same scenario. On the H200's host
two *bare* processes of a launch-bound script differed by 10-48 % (run 10, run 12), far more
than the watch's cost, and more rounds did not narrow it. This probe asks where that spread
lives, with no gpusight in any process:

* is each process's pace set once (its steps agree with each other, first half against second
  half) or does it drift within the run (the host's load)?
* does a fixed control loop, run in the same process before and after the script's steps,
  move with it? If so, dividing each process's steps by its own control loop's pace removes
  the spread, and a bare/watched comparison can use that ratio (the control runs before the
  watch starts, so the watch does not touch it).
* do ``PYTHONHASHSEED=0`` (same dict layouts in every process) or ``setarch -R`` (no address
  randomisation, where the container allows it) narrow it?

Each process: the control loop (a small MLP, forward, backward and SGD, ``--control-s``
seconds), the scenario script through ``runpy`` (its own ``--step-log`` clock), the control
loop again. Writes ``OUT/process-spread.json`` and prints a table last.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness.cli import Parser
from harness.paths import SCENARIOS
from harness.proc import run
from harness.record import note
from harness.stats import corr, spread

# The child: control loop, the script through runpy, control loop. It imports nothing of gpusight.
CHILD = r"""
import json, runpy, sys, time
import torch
from torch import nn

def control(seconds):
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    m = nn.Sequential(*[nn.Linear(256, 256) for _ in range(8)]).to(dev)
    opt = torch.optim.SGD(m.parameters(), lr=1e-3)
    x = torch.randn(8, 256, device=dev)
    def step():
        loss = m(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    for _ in range(30):
        step()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    times = []
    end = time.perf_counter() + seconds
    t = time.perf_counter()
    while t < end:
        step()
        now = time.perf_counter()
        times.append((now - t) * 1000)
        t = now
    if dev.type == "cuda":
        torch.cuda.synchronize()
    return {"mean_ms": sum(times) / len(times), "median_ms": sorted(times)[len(times) // 2],
            "n": len(times)}

out, seconds, script, *argv = sys.argv[1:]
seconds = float(seconds)
res = {"before": control(seconds)}
sys.argv = [script, *argv]
runpy.run_path(script, run_name="__main__")
res["after"] = control(seconds)
with open(out, "w") as f:
    json.dump(res, f)
"""

ENVS: dict[str, tuple[list[str], dict[str, str]]] = {
    "plain": ([], {}),
    "hashseed": ([], {"PYTHONHASHSEED": "0"}),
    "no_aslr": (["setarch", "-R"], {"PYTHONHASHSEED": "0"}),
}
STEADY_FROM = 12


def one(
    script: Path, env_name: str, iters: int, work: Path, tag: str, args: argparse.Namespace
) -> dict[str, Any]:
    prefix, extra = ENVS[env_name]
    log, ctrl = work / f"{tag}.steps.json", work / f"{tag}.ctrl.json"
    cmd = [*prefix, sys.executable, "-c", CHILD, str(ctrl), str(args.control_s), str(script)]
    cmd += ["--iters", str(iters), "--warmup", "0", "--step-log", str(log)]
    if args.cpus:
        cmd = ["taskset", "-c", args.cpus, *cmd]
    env = dict(os.environ) | extra
    p = run(cmd, args.timeout, env=env, cwd=SCENARIOS)
    if p.rc != 0 or not log.exists() or not ctrl.exists():
        return {"env": env_name, "error": (p.stderr or p.stdout)[-600:]}
    steps = json.loads(log.read_text())["step_ms"][STEADY_FROM:]
    half = len(steps) // 2
    c = json.loads(ctrl.read_text())
    return {
        "env": env_name,
        "mean_ms": statistics.fmean(steps),
        "first_half_ms": statistics.fmean(steps[:half]),
        "second_half_ms": statistics.fmean(steps[half:]),
        "ctrl_before_ms": c["before"]["mean_ms"],
        "ctrl_after_ms": c["after"]["mean_ms"],
    }


def analyse(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in runs if "mean_ms" in r]
    if len(ok) < 2:
        return {"n": len(ok)}
    main = [r["mean_ms"] for r in ok]
    ctrl = [(r["ctrl_before_ms"] + r["ctrl_after_ms"]) / 2 for r in ok]
    before = [r["ctrl_before_ms"] for r in ok]
    drift = [100 * abs(r["second_half_ms"] / r["first_half_ms"] - 1) for r in ok]
    return {
        "n": len(ok),
        "main_ms": statistics.median(main),
        "main": spread(main),
        "main_over_ctrl": spread([m / c for m, c in zip(main, ctrl, strict=True)]),
        "main_over_ctrl_before": spread([m / c for m, c in zip(main, before, strict=True)]),
        "ctrl": spread(ctrl),
        "corr_main_ctrl": corr(main, ctrl),
        "halves_median_abs_pct": statistics.median(drift),
        "ctrl_before_after_median_abs_pct": statistics.median(
            [100 * abs(r["ctrl_after_ms"] / r["ctrl_before_ms"] - 1) for r in ok]
        ),
    }


def table(scenarios: dict[str, Any]) -> str:
    rows = []
    for name, res in scenarios.items():
        runs = res["runs"]
        for e, a in res["by_env"].items():
            if "main" not in a:
                err = next((r["error"] for r in runs if r["env"] == e and "error" in r), "")
                rows.append(f"{name:20} {e:9} failed: {err[-120:]!r}")
                continue
            c = a["corr_main_ctrl"]
            rows.append(
                f"{name:20} {e:9} {a['n']:2d} {a['main_ms']:7.3f} "
                f"{a['main']['cv_pct']:6.1f} {a['main']['range_pct']:7.1f} "
                f"{a['main_over_ctrl']['cv_pct']:7.1f} {a['main_over_ctrl']['range_pct']:7.1f} "
                f"{'-' if c is None else f'{c:+.2f}':>6} {a['halves_median_abs_pct']:6.1f} "
                f"{a['ctrl_before_after_median_abs_pct']:6.1f}"
            )
    head = (
        f"{'scenario':20} {'env':9} {'n':>2} {'step ms':>7} {'cv %':>6} {'range%':>7} "
        f"{'/ctl cv':>7} {'/ctl rg':>7} {'corr':>6} {'halves':>6} {'ctl ba':>6}"
    )
    notes = (
        "cv %, range %: the processes' mean steady step (coefficient of variation, max/min - 1);"
        "\n/ctl: the same for each process's step over its own control loop's (before and after);"
        "\ncorr: the two's correlation across processes; halves: median |second half / first"
        " half - 1| within a process; ctl ba: the same for the control loop before and after."
    )
    return "\n".join([head, *rows, "", notes])


def main(argv: list[str] | None = None) -> int:
    p = Parser(__doc__).only(["tiny_batch", "unbatched_inference"])
    p.add_argument("--envs", nargs="*", default=list(ENVS), choices=list(ENVS))
    p.add_argument("--procs", type=int, default=8, help="processes per scenario and env")
    p.add_argument("--iters", type=int, default=1500)
    p.add_argument("--control-s", type=float, default=0.8)
    p.add_argument("--cpus", default=None, help="taskset -c LIST for every process")
    p.add_argument("--timeout", type=float, default=120.0)
    p.out()
    p.add_argument(
        "--table-from",
        default=None,
        help="print the table of a saved process-spread.json (a run cut short writes no table)",
    )
    args = p.parse_args(argv)
    if args.table_from:
        print(table(json.loads(Path(args.table_from).read_text())["scenarios"]))
        return 0
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="spread-"))
    note(out)
    work = Path(tempfile.mkdtemp(prefix="spread-runs-"))
    result: dict[str, Any] = {"args": vars(args), "scenarios": {}}
    for name in args.only:
        script = SCENARIOS / f"{name}.py"
        runs: list[dict[str, Any]] = []
        # Environments interleaved, so a drift of the host weighs on each alike.
        for i in range(args.procs):
            for env_name in args.envs:
                runs.append(one(script, env_name, args.iters, work, f"{name}-{i}-{env_name}", args))
        by_env = {e: analyse([r for r in runs if r["env"] == e]) for e in args.envs}
        result["scenarios"][name] = {"runs": runs, "by_env": by_env}
        (out / "process-spread.json").write_text(json.dumps(result, indent=1))
    text = table(result["scenarios"])
    (out / "process-spread.txt").write_text(text + "\n")
    print(text)
    return 0
