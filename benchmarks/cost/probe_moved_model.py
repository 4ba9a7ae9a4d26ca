"""Where a moved model's what-if loses against the real fix (cpu_model, #15): the scenario's
own clock (items/s over its steps) for the script bare, with ``--fix``, and under
``gpusight run`` (unprofiled, as every what-if run is) with ``--fix`` and with the move
injected from outside (outputs followed by the script's host tensors, or copied back).
Alternating rounds; the median of each.

    PYTHONPATH=python_pkg python3 benchmarks/watch_cost.py --method probe-moved-model \\
        [--rounds 2] [--iters 600]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from harness.cli import Parser
from harness.paths import SCENARIOS
from harness.proc import run
from harness.record import note
from harness.scripts import items_per_s

WATCH = [sys.executable, "-m", "gpusight", "run", "--quiet", "--profile-steps", "0"]


def main(argv: list[str] | None = None) -> int:
    ap = Parser(__doc__).rounds(2)
    ap.add_argument("--iters", type=int, default=600)
    ap.add_argument("--scenario", default="cpu_model")
    ap.out()
    args = ap.parse_args(argv)
    script = str(SCENARIOS / f"{args.scenario}.py")
    tail = [script, "--iters", str(args.iters), "--warmup", "10"]
    moved = json.dumps({"to_device": "cuda"})
    back = json.dumps({"to_device": "cuda", "outputs_back": True})
    variants = {
        "bare": [sys.executable, *tail],
        "bare --fix": [sys.executable, *tail, "--fix"],
        "watched": [*WATCH, *tail],
        "watched --fix": [*WATCH, *tail, "--fix"],
        "watched, moved (follow)": [*WATCH, "--inject", moved, *tail],
        "watched, moved (outputs back)": [*WATCH, "--inject", back, *tail],
    }
    got: dict[str, list[float]] = {k: [] for k in variants}
    for r in range(args.rounds):
        for name, cmd in variants.items():
            ran = run(cmd, 300)
            rc, out, wall = ran.rc, ran.out, ran.wall_s
            ips = items_per_s(out)
            print(f"round {r + 1} {name:32} rc {rc} {ips or 0:12,.0f} items/s ({wall:.1f} s)",
                  flush=True)  # fmt: skip
            if rc != 0:
                print(out[-1500:], flush=True)
            if ips:
                got[name].append(ips)
    base = statistics.median(got["bare"]) if got["bare"] else None
    lines = [f"{'variant':32} {'items/s':>12} {'vs bare':>8}"]
    for name, xs in got.items():
        m = statistics.median(xs) if xs else None
        rel = f"{m / base:8.2f}x" if m and base else f"{'n/a':>8}"
        lines.append(f"{name:32} {m or 0:12,.0f} {rel}")
    table = "\n".join(lines)
    print("\n" + table)
    if args.out:
        note(args.out)
        (Path(args.out) / "probe-moved-table.txt").write_text(table + "\n")
        (Path(args.out) / "probe-moved.json").write_text(json.dumps(got, indent=1))
    return 0
