"""Does gpusight name the planted bottleneck? Runs every scenario bare and under ``gpusight run``.

    PYTHONPATH=python_pkg python3 benchmarks/accuracy.py --out "$OUT"   # --suite scenarios

For each ``benchmarks/scenarios/*.py`` (its ``LABEL`` and ``EXPECTED`` read without importing it):

1. ``python -m gpusight run --steps N --warmup K --json OUT/<name>.json scenario.py ...``;
2. then, while the ``--budget`` lasts (shortest steps first), the bare run
   ``python scenario.py --iters K+1+P+N --warmup K+1+P``: the scenario's own median over the
   same steps that gpusight measured, after the same warm-up.

Prints a table (expected vs reported bottleneck, whether the expected finding is there, GPU
busy %, gpusight's self-measured overhead, and the external one: the report's median step over
its clean steps against the bare run's median step) and writes ``OUT/accuracy.json`` plus each
report. The external figures compare two processes, whose noise exceeds a few %;
``watch_cost.py --method overhead`` measures the overhead in one process, bare and watched
interleaved. Needs only the standard library here; the scenarios need torch. Exit code 0 when
every scenario ran (a wrong verdict is a result, not an error), 1 when one failed to run.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from harness import proc
from harness.cli import Parser
from harness.paths import RESULTS, ROOT, SCENARIOS, child_env
from harness.record import command_line, note
from harness.scripts import read_meta, scenario_result
from harness.stats import pct
from harness.table import aligned, fmt


def run(cmd: list[str], timeout: float, env: dict[str, str]) -> tuple[int, str, str, float]:
    """``cmd`` from the repository root: exit status, stdout, stderr, seconds."""
    r = proc.run(cmd, timeout, env=env, cwd=ROOT)
    return r.rc, r.stdout, r.stderr, r.wall_s


def cuda_available(env: dict[str, str]) -> bool:
    code = "import torch; print(torch.cuda.is_available())"
    rc, out, _, _ = run([sys.executable, "-c", code], 120, env)
    return rc == 0 and out.strip().endswith("True")


def evaluate(meta: dict[str, Any], report: dict[str, Any] | None) -> dict[str, Any]:
    expected = meta["EXPECTED"]
    if report is None:
        return {"reported": None, "ok": False, "finding_ok": False}
    verdict = report["verdict"]
    findings = report["findings"]
    loud = [f["id"] for f in findings if f["severity"] in ("warn", "critical")]
    want = expected.get("finding")
    finding_ok = (want in [f["id"] for f in findings]) if want else not loud
    run_ = report.get("run") or {}
    return {
        "reported": verdict["bottleneck"],
        "ok": verdict["bottleneck"] == expected.get("bottleneck"),
        "finding_ok": finding_ok,
        "summary": verdict["summary"],
        "gpu_busy_pct": verdict.get("gpu_busy_pct"),
        "overhead_pct": run_.get("overhead_pct"),
        "window_cost_ms": (run_.get("kernels") or {}).get("window_cost_ms"),
        "kernels": {
            k: v
            for k, v in (run_.get("kernels") or {}).items()
            if k.startswith("window_")
            or k in ("issued_gpu_ms_per_step", "gpu_behind_ms", "device_paced", "steady_from_step")
        },
        "step_time_ms": run_.get("step_time_ms"),
        "breakdown_ms": run_.get("breakdown_ms"),
        "loud_findings": loud,
        "findings": [
            {
                "id": f["id"],
                "severity": f["severity"],
                "recoverable_pct": f["impact"].get("recoverable_pct"),
            }
            for f in findings
        ],
        "notes": report.get("notes", []),
    }


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "scenario",
        "expected",
        "reported",
        "ok",
        "finding",
        "busy%",
        "ovh%",
        "ext%",
        "own%",
        "win ms",
        "warn/critical findings",
    )
    lines: list[tuple[str, ...]] = [head]
    for r in rows:
        lines.append(
            (
                r["scenario"],
                str(r["expected"].get("bottleneck")),
                str(r.get("reported") or r.get("status")),
                "yes" if r.get("ok") else "NO",
                ("ok" if r.get("finding_ok") else "missing") if r.get("reported") else "-",
                fmt(r.get("gpu_busy_pct"), 1),
                fmt(r.get("overhead_pct"), 2),
                fmt(r.get("overhead_ext_pct"), 1),
                fmt(r.get("overhead_ext_own_pct"), 1),
                fmt(r.get("window_cost_ms"), 1),
                ", ".join(r.get("loud_findings") or []) or "-",
            )
        )
    return aligned(lines, rule=True)


def main(argv: list[str] | None = None) -> int:
    ap = (
        Parser(__doc__)
        .out(os.environ.get("OUT") or str(RESULTS / "accuracy-local"))
        .only(help="scenario names to run (default: all)")
    )
    ap.add_argument("--steps", type=int, default=10, help="measured steps under gpusight")
    ap.add_argument("--warmup", type=int, default=5, help="gpusight warm-up steps")
    ap.add_argument("--profile-steps", type=int, default=3)
    ap.add_argument("--iters", type=int, default=None, help="steps per run (default: enough)")
    ap.add_argument(
        "--no-bare", action="store_true", help="skip the bare runs (no external overhead)"
    )
    ap.add_argument(
        "--fix", action="store_true", help="also run each scenario's fix under gpusight"
    )
    ap.add_argument("--timeout", type=float, default=60.0, help="per run, seconds")
    ap.add_argument(
        "--budget",
        type=float,
        default=190.0,
        help="seconds for everything: watched runs first, then bare runs (shortest steps "
        "first) while it lasts",
    )
    args = ap.parse_args(argv)

    out = Path(args.out)
    note(out)
    env = child_env()
    env.setdefault("PYTHONUNBUFFERED", "1")
    has_cuda = cuda_available(env)
    watched_steps = args.warmup + 1 + args.profile_steps + args.steps
    skip = args.warmup + 1 + args.profile_steps
    # Room for the watch to extend its warm-up (up to max(3, warmup) steps) until steps settle.
    iters = args.iters or watched_steps + max(3, args.warmup) + 2

    paths = sorted(p for p in SCENARIOS.glob("*.py") if not p.name.startswith("_"))
    if args.only:
        paths = [p for p in paths if p.stem in args.only]
    rows: list[dict[str, Any]] = []
    failed = False
    t_all = time.perf_counter()
    print(
        f"{len(paths)} scenarios, CUDA {'available' if has_cuda else 'NOT available'}; out: {out}",
        flush=True,
    )
    # Watched runs first (the verdicts are the point), then bare runs while the budget lasts,
    # shortest steps first: that is where gpusight's own cost shows.
    scripts: dict[str, list[str]] = {}
    for path in paths:
        meta = read_meta(path)
        row: dict[str, Any] = {
            "scenario": path.stem,
            "label": meta["LABEL"],
            "expected": meta["EXPECTED"],
        }
        elapsed = time.perf_counter() - t_all
        if elapsed > args.budget:
            row["status"] = "skipped (time budget)"
            rows.append(row)
            print(f"- {path.stem}: skipped (time budget spent: {elapsed:.0f} s)", flush=True)
            continue
        if meta["REQUIRES_CUDA"] and not has_cuda:
            row["status"] = "skipped (needs CUDA)"
            rows.append(row)
            print(f"- {path.stem}: skipped (needs CUDA)", flush=True)
            continue
        # The scenario's own timer skips the steps before gpusight's measured ones, so its
        # median covers the same steps in the watched run and in the bare one.
        scripts[path.stem] = [str(path), "--warmup", str(skip)]
        report_path = out / f"{path.stem}.json"
        if report_path.exists():
            report_path.unlink()
        cmd = [
            sys.executable, "-m", "gpusight", "run", "--quiet",
            "--steps", str(args.steps), "--warmup", str(args.warmup),
            "--profile-steps", str(args.profile_steps), "--json", str(report_path),
            *scripts[path.stem], "--iters", str(iters),
        ]  # fmt: skip
        rc, so, se, secs = run(cmd, args.timeout, env)
        row["watched"] = {"rc": rc, "seconds": round(secs, 1), "result": scenario_result(so)}
        if rc != 0:
            row["watched"]["stderr"] = se[-2000:]
            failed = True
        report = json.loads(report_path.read_text("utf-8")) if report_path.exists() else None
        row.update(evaluate(meta, report))
        if report is None:
            row["status"] = f"no report (rc {rc})"
        if args.fix:
            fix_path = out / f"{path.stem}.fix.json"
            rc, so, se, secs = run(
                [*cmd[: cmd.index("--json") + 1], str(fix_path), *cmd[cmd.index("--json") + 2 :],
                 "--fix"],
                args.timeout,
                env,
            )  # fmt: skip
            fixed = json.loads(fix_path.read_text("utf-8")) if fix_path.exists() else None
            row["fix"] = {
                "rc": rc,
                "bottleneck": fixed["verdict"]["bottleneck"] if fixed else None,
                "step_time_ms": (fixed.get("run") or {}).get("step_time_ms") if fixed else None,
                "result": scenario_result(so),
            }
        rows.append(row)
        print(
            f"- {path.stem}: expected {meta['EXPECTED'].get('bottleneck')}, reported "
            f"{row.get('reported')} ({'ok' if row.get('ok') else 'MISMATCH'}), "
            f"busy {fmt(row.get('gpu_busy_pct'), 1)}%, {row['watched']['seconds']} s",
            flush=True,
        )

    if not args.no_bare:
        by_step = sorted(
            (r for r in rows if r["scenario"] in scripts and r.get("step_time_ms")),
            key=lambda r: r["step_time_ms"],
        )
        for row in by_step:
            elapsed = time.perf_counter() - t_all
            # A bare run costs about what the watched one did (start-up dominates).
            if elapsed + row["watched"]["seconds"] > args.budget:
                row["bare"] = {"skipped": "time budget"}
                continue
            rc, so, se, secs = run(
                [sys.executable, *scripts[row["scenario"]], "--iters", str(watched_steps)],
                args.timeout,
                env,
            )
            row["bare"] = {"rc": rc, "seconds": round(secs, 1), "result": scenario_result(so)}
            if rc != 0:
                row["bare"]["stderr"] = se[-2000:]
                failed = True
            # External overhead, two ways over the same steps (those gpusight measured):
            # ext: the report's steady-state step against the bare median;
            # ext_own: the scenario's own timer, watched against bare.
            bare_ms = (row["bare"].get("result") or {}).get("median_step_ms")
            own_ms = (row["watched"].get("result") or {}).get("median_step_ms")
            if bare_ms and row.get("step_time_ms"):
                row["overhead_ext_pct"] = pct(row["step_time_ms"] / bare_ms)
            if bare_ms and own_ms:
                row["overhead_ext_own_pct"] = pct(own_ms / bare_ms)
            print(f"- {row['scenario']}: bare {fmt(bare_ms, 3)} ms/step, {secs:.1f} s", flush=True)

    ran = [r for r in rows if r.get("reported")]
    summary = {
        "verdicts_ok": sum(bool(r.get("ok")) for r in ran),
        "findings_ok": sum(bool(r.get("finding_ok")) for r in ran),
        "ran": len(ran),
        "scenarios": len(rows),
        "seconds": round(time.perf_counter() - t_all, 1),
        "cuda": has_cuda,
        "python": sys.version.split()[0],
        "command": command_line(),
        "settings": {
            "steps": args.steps,
            "warmup": args.warmup,
            "profile_steps": args.profile_steps,
            "iters": iters,
        },
    }
    first = next((r for r in ran), None)
    if first is not None:
        rep = json.loads((out / f"{first['scenario']}.json").read_text("utf-8"))
        torch_info = rep["machine"].get("torch") or {}
        summary["torch"] = torch_info.get("version")
        summary["gpus"] = [g.get("name") for g in rep["machine"].get("gpus", [])]
    text = table(rows)
    text += (
        "\n\novh%: gpusight's self-measured time in its hooks over the measured steps; ext%: "
        "the report's steady step vs the bare run's median, own%: the scenario's own timer "
        "watched vs bare (both over the same steps, after the same warm-up); win ms: the "
        "profiler window's cost (start, stop with its device sync, profiled steps' excess, "
        "reading the trace)"
    )
    text += (
        f"\n\nverdicts {summary['verdicts_ok']}/{summary['ran']} as expected, "
        f"expected findings {summary['findings_ok']}/{summary['ran']}; {summary['seconds']} s"
    )
    print("\n" + text, flush=True)
    (out / "accuracy.json").write_text(
        json.dumps({"summary": summary, "rows": rows}, indent=2) + "\n", "utf-8"
    )
    (out / "accuracy-table.txt").write_text(text + "\n", "utf-8")
    return 1 if failed else 0
