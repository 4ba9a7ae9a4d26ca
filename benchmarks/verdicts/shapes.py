"""GPU check of the loop shapes (#34): each scenario's verdict, its phase, and the lead finding's
estimate against the scenario's own ``--fix``.

For each loop-shape scenario:

1. ``gpusight run --steps N --json`` on the planted script: the verdict, the phase it names
   (kind, period, the line that starts it) and the expected finding's impact (measured or
   estimated, its speedup and range);
2. the truth: the script bare and with ``--fix``, alternating (``whatifs.truth``), items per
   second from its own clock;
3. whether the estimate's range holds the truth (the issue's bar for a fix no knob injects).

    PYTHONPATH=python_pkg python3 benchmarks/accuracy.py --suite shapes --out "$OUT" \\
        [--only NAME ...]

Writes OUT/<scenario>.json (the report), OUT/loop-shapes.json and OUT/loop-shapes-table.txt.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from harness.cli import Parser
from harness.paths import SCENARIOS
from harness.proc import run
from harness.record import Results
from harness.scripts import read_meta
from whatifs.truth import truth

SHAPES = (
    "eval_every_n",
    "checkpoint_every_n",
    "grad_accumulation",
    "dataparallel_slow_loader",
    "graph_batches",
)


def finding_of(report: dict[str, Any], fid: str | None) -> dict[str, Any] | None:
    for f in report.get("findings", []):
        if f.get("id") == fid:
            return dict(f)
    return None


def phase_of(report: dict[str, Any]) -> dict[str, Any] | None:
    phases = (report.get("run") or {}).get("phases") or []
    if not phases:
        return None
    p = max(phases, key=lambda q: q.get("per_step_ms") or 0)
    keep = ("kind", "period_steps", "per_step_ms", "times_ms", "syncs", "source", "caller")
    return {k: p.get(k) for k in keep}


def holds(impact: dict[str, Any], gain: float | None) -> bool | None:
    if gain is None:
        return None
    rng = impact.get("speedup_range")
    if rng:
        return bool(rng[0] <= gain <= rng[1])
    s = impact.get("speedup")
    return None if s is None else abs(s / gain - 1.0) <= 0.2


def one(name: str, out: Path, steps: int, rounds: int) -> dict[str, Any]:
    meta = read_meta(SCENARIOS / f"{name}.py")
    rp = out / f"{name}.json"
    cmd = [sys.executable, "-m", "gpusight", "run", "--quiet", "--steps", str(steps),
           "--json", str(rp), str(SCENARIOS / f"{name}.py"), "--iters", "100000"]  # fmt: skip
    ran = run(cmd, 300)
    rc, log, wall = ran.rc, ran.out, ran.wall_s
    (out / f"{name}.log").write_text(log)
    rep = json.loads(rp.read_text()) if rp.exists() else {}
    expected = meta["EXPECTED"]
    f = finding_of(rep, expected.get("finding")) or {}
    impact = f.get("impact") or {}
    t = truth(name, ["--fix"], 120, rounds)
    return {
        "rc": rc,
        "wall_s": round(wall, 1),
        "expected": expected,
        "verdict": (rep.get("verdict") or {}).get("bottleneck"),
        "summary": (rep.get("verdict") or {}).get("summary"),
        "phase": phase_of(rep),
        "finding": {"id": f.get("id"), "severity": f.get("severity"), "impact": impact},
        "truth_fix": t,
        "holds": holds(impact, t.get("gain")),
    }


def table(results: dict[str, Any]) -> str:
    lines = [
        f"{'scenario':26} {'verdict':16} {'ok':3} {'phase':24} {'estimate':14} {'truth':>6} holds"
    ]
    for name, r in results.items():
        p = r.get("phase") or {}
        ph = (
            f"{p.get('kind')} /{p.get('period_steps')} {p.get('per_step_ms') or 0:.1f}ms"
            if p
            else "-"
        )
        imp = r["finding"]["impact"]
        rng = imp.get("speedup_range")
        est = f"{rng[0]:.2f}-{rng[1]:.2f}x" if rng else f"{imp.get('speedup') or 0:.2f}x"
        est = f"{est} {str(imp.get('basis'))[:1]}"
        g = r["truth_fix"].get("gain")
        ok = "ok" if r["verdict"] == r["expected"].get("bottleneck") else "NO"
        lines.append(
            f"{name:26} {r['verdict']!s:16} {ok:3} {ph[:24]:24} {est:14} "
            f"{(g or 0):6.2f} {r['holds']}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = Parser(__doc__).out(required=True).only()
    ap.add_argument("--steps", type=int, default=30)
    ap.rounds(2)
    args = ap.parse_args(argv)
    out = Path(args.out)
    saved = Results(out, "loop-shapes.json", "loop-shapes-table.txt")
    for name in args.only or SHAPES:
        print(f"=== {name}", flush=True)
        got = saved.add(name, one(name, out, args.steps, args.rounds))
        print(json.dumps(got, indent=1)[:1500], flush=True)
    saved.finish(table(saved.items))
    return 0
