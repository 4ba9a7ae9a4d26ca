"""GPU check of the compile what-if: ``torch.compile`` measured from outside an unmodified
script, against the same script compiling its own model, in the same lease.

For each launch-bound scenario:

1. ``gpusight run --what-if --try compile`` on the planted script: the rows for
   ``torch.compile(model)`` and ``mode="reduce-overhead"``, each with its compile time;
2. the truth: the script bare, with ``--compile default`` and with ``--compile
   reduce-overhead`` (``torch.compile(model, mode=...)`` in the script), taking turns for
   ``--rounds`` rounds, items per second from its own clock past ``--warmup`` steps; the
   compile time from its step log (the warm-up steps beyond as many steady ones);
3. error = what-if gain / true gain - 1; target within 20 %.

    PYTHONPATH=python_pkg python3 benchmarks/run_whatif.py --suite compile --out "$OUT" \\
        [--only NAME ...]

Writes OUT/<scenario>.whatif.json, OUT/compile-check.json and OUT/compile-check-table.txt
(printed last).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from harness.cli import Parser
from harness.paths import SCENARIOS
from harness.proc import run
from harness.record import Results
from harness.scripts import items_per_s, step_log
from harness.table import cell

from whatifs.truth import TARGET_PCT

CASES = {"mlp_adam": 300, "tiny_batch": 300, "small_batch_rnn": 240}
"""Scenario -> steps of each truth run."""
MODES = ("default", "reduce-overhead")
WARMUP = 20


def _truth_run(name: str, mode: str | None, iters: int, log: Path) -> dict[str, Any]:
    cmd = [sys.executable, str(SCENARIOS / f"{name}.py"), "--iters", str(iters),
           "--warmup", str(WARMUP), "--step-log", str(log)]  # fmt: skip
    if mode:
        cmd += ["--compile", mode]
    ran = run(cmd, 400)
    got: dict[str, Any] = {"mode": mode, "rc": ran.rc, "wall_s": round(ran.wall_s, 1)}
    got["items_per_s"] = items_per_s(ran.out)
    try:
        steps = step_log(log)
    except (OSError, ValueError, KeyError):
        got["error"] = ran.out[-800:]
        return got
    steady = statistics.median(steps[WARMUP:]) if len(steps) > WARMUP else None
    if steady is not None:
        got["compile_s"] = round((sum(steps[:WARMUP]) - WARMUP * steady) / 1000.0, 1)
    return got


def truth(name: str, iters: int, rounds: int, out: Path) -> dict[str, Any]:
    """The script bare and compiled each way, taking turns: gains and compile times."""
    runs: dict[str, list[dict[str, Any]]] = {"bare": [], **{m: [] for m in MODES}}
    for k in range(rounds):
        for key in runs:
            mode = None if key == "bare" else key
            runs[key].append(_truth_run(name, mode, iters, out / f"{name}.{key}{k}.steps.json"))
    bare = [r["items_per_s"] for r in runs["bare"] if r.get("items_per_s")]
    res: dict[str, Any] = {"runs": runs}
    for m in MODES:
        got = [r["items_per_s"] for r in runs[m] if r.get("items_per_s")]
        comp = [r["compile_s"] for r in runs[m] if r.get("compile_s") is not None]
        res[m] = {
            "gain": statistics.median(got) / statistics.median(bare) if got and bare else None,
            "compile_s": statistics.median(comp) if comp else None,
        }
    return res


def what_if(name: str, out: Path, budget: float) -> dict[str, Any]:
    report = out / f"{name}.whatif.json"
    cmd = [sys.executable, "-m", "gpusight", "run", "--what-if", "--try", "compile",
           "--budget", str(budget), "--json", str(report), str(SCENARIOS / f"{name}.py"),
           "--iters", "100000"]  # fmt: skip
    ran = run(cmd, budget + 120)
    (out / f"{name}.whatif.log").write_text(ran.out)
    got: dict[str, Any] = {"rc": ran.rc, "wall_s": round(ran.wall_s, 1)}
    try:
        rep = json.loads(report.read_text())
    except (OSError, ValueError):
        got["error"] = ran.out[-1500:]
        return got
    got["verdict"] = (rep.get("verdict") or {}).get("bottleneck")
    for row in rep.get("what_if") or []:
        p = row.get("params") or {}
        if p.get("group") == "compile":
            got[str(p.get("set_compile"))] = {
                "speedup": row.get("speedup"),
                "noise_pct": row.get("noise_pct"),
                "skipped": row.get("skipped"),
                "compile_s": p.get("compile_s"),
                "break_even_steps": p.get("break_even_steps"),
            }
    return got


def table(results: dict[str, Any]) -> str:
    head = "scenario          mode             what-if  truth    error   compile s (what-if/truth)"
    lines = [head, "-" * len(head)]
    for name, r in results.items():
        for m in MODES:
            w = (r["what_if"].get(m) or {}) if "what_if" in r else {}
            t = r["truth"].get(m) or {}
            wg, tg = w.get("speedup"), t.get("gain")
            err = 100.0 * (wg / tg - 1.0) if wg and tg else None
            mark = "" if err is None else (" ok" if abs(err) <= TARGET_PCT else " MISS")
            lines.append(
                f"{name:<17} {m:<16} {cell(wg, '.2f'):>7}x {cell(tg, '.2f'):>6}x "
                f"{cell(err, '+.1f'):>6}%{mark:<5} {cell(w.get('compile_s'), '.1f'):>6} / "
                f"{cell(t.get('compile_s'), '.1f')}"
                + (f"   skipped: {w['skipped']}" if w.get("skipped") else "")
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = Parser(__doc__).out(required=True).only()
    ap.add_argument("--budget", type=float, default=240.0)
    ap.rounds(1)
    args = ap.parse_args(argv)
    out = Path(args.out)
    saved = Results(out, "compile-check.json", "compile-check-table.txt", indent=1)
    for name, iters in CASES.items():
        if args.only and name not in args.only:
            continue
        t0 = time.monotonic()
        r = {"what_if": what_if(name, out, args.budget)}
        r["truth"] = truth(name, iters, args.rounds, out)
        r["wall_s"] = round(time.monotonic() - t0, 1)
        print(name, json.dumps(r["what_if"]), flush=True)
        saved.add(name, r)
    saved.finish(table(saved.items))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
