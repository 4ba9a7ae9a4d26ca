"""The watch's cost a step against the rarest rate its full steps are sampled at (``MAX_EVERY``).

    PYTHONPATH=python_pkg python3 benchmarks/watch_cost.py --method sampling --workload infer \\
        --every 16 64 --rounds 30 --steps 1000 --out DIR

On a step of tens of microseconds the census puts the module hooks' share far over budget and
the cap decides how often a full step (hooks, framework clocks, the detail, closing the run of
light steps before it) comes round. ``--method hook``'s CPU workloads, blocks of ``--steps``
steps alternating bare and watched at each cap (rotated each round), each with a fresh watch
past its warm-up and census; the figure is the median over rounds of (the block's mean step -
the round's bare one), in microseconds: the mean, as the full steps are the rare slow ones
that a median leaves out. Writes ``OUT/sampling-rate.json`` and ``.txt``; prints the table.
"""

from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from harness.cli import Parser
from harness.order import rotated
from harness.record import note
from harness.stats import paired_diffs, quartiles


def main(argv: list[str] | None = None) -> int:
    p = Parser(__doc__)
    p.add_argument("--workload", choices=("train", "infer"), default="infer")
    p.add_argument("--every", type=int, nargs="+", default=[16, 64])
    p.rounds(30)
    p.add_argument("--steps", type=int, default=1000, help="timed steps a block")
    p.out()
    args = p.parse_args(argv)
    import torch
    from gpusight.watch import detail

    from cost.hook import WARM, TinyInference, TinyStep
    from cost.parts import block

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    work: TinyStep | TinyInference = (
        TinyStep(torch, 4, 6, foreach=True) if args.workload == "train" else TinyInference(torch, 2)
    )
    parts: list[int | None] = [None, *args.every]  # None: bare
    blocks: dict[int | None, list[dict[str, Any]]] = {k: [] for k in parts}
    cap = detail.MAX_EVERY
    try:
        for r in range(args.rounds):
            for every in rotated(parts, r):
                if every is not None:
                    detail.MAX_EVERY = every
                part = "bare" if every is None else "watched"
                blocks[every].append(block(work, part, args.steps, warm=WARM))
    finally:
        detail.MAX_EVERY = cap
        torch.set_num_threads(threads)
    rows: dict[str, Any] = {}
    bare = blocks[None]
    for every in args.every:
        mine = blocks[every]
        row: dict[str, Any] = {}
        for key in ("mean_ms", "cpu_ms", "median_ms"):
            diffs = paired_diffs([m[key] for m in mine], [b[key] for b in bare], 1e3)
            row[key.replace("_ms", "_extra_us")] = round(statistics.median(diffs), 3)
            row[key.replace("_ms", "_iqr_us")] = [round(x, 3) for x in quartiles(diffs)]
            row[key.replace("_ms", "_step_us")] = round(
                statistics.median(m[key] for m in mine) * 1e3, 3
            )
        row["self_us"] = round(statistics.median(m["self_us"] for m in mine), 3)
        row["full_steps"] = sum(int(m["full_steps"]) for m in mine)
        row["measured_steps"] = sum(int(m["measured_steps"]) for m in mine)
        rows[str(every)] = row
    bare_us = round(statistics.median(b["mean_ms"] for b in bare) * 1e3, 3)
    lines = [
        f"sampling rate on cpu, {args.workload} (torch {torch.__version__}), "
        f"{args.rounds} x {args.steps} steps, bare mean step {bare_us:.1f} us",
        f"{'cap':>4} {'mean us':>8} {'extra':>7} {'IQR':>15} {'cpu extra':>9} "
        f"{'median extra':>12} {'self us':>8} {'full':>11}",
    ]
    for every, r in rows.items():
        lo, hi = r["mean_iqr_us"]
        lines.append(
            f"{every:>4} {r['mean_step_us']:8.1f} {r['mean_extra_us']:+7.2f} "
            f"{lo:+7.2f}..{hi:+6.2f} {r['cpu_extra_us']:+9.2f} {r['median_extra_us']:+12.2f} "
            f"{r['self_us']:8.2f} {r['full_steps']:>5}/{r['measured_steps']}"
        )
    lines.append(
        "extra: median over rounds of the block's figure minus the round's bare one (us a step); "
        "self: what the watch's clocks saw a step; full: measured steps that ran the hooks"
    )
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="sampling-rate-"))
    note(out)
    meta = {"torch": torch.__version__, "args": vars(args), "bare_mean_us": bare_us}
    (out / "sampling-rate.json").write_text(json.dumps({"meta": meta, "caps": rows}, indent=1))
    (out / "sampling-rate.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0
