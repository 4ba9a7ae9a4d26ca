"""GPU check of ``gpusight run --what-if``: the measured gain of each scenario's fix, from the
unmodified script, against the fix applied in the script.

For each scenario whose ``--fix`` is a change the what-if injects from outside:

1. ``gpusight run --what-if --budget B`` on the planted script (wall time recorded: target
   <= 180 s for a script that starts in <= 20 s);
2. the row for the fix: the change that matches it (``PICK`` below). For a fix whose size the
   what-if chooses (workers, batch), the row the what-if found best, and the script is then run
   at that size (``--workers N`` / ``--batch N``) as well as with its own ``--fix``;
3. the true gain: the script bare and fixed, alternating (2 rounds), items per second from
   its own clock (``SCENARIO_RESULT``: samples per step over the mean step, every stall counted);
4. error = what-if gain / true gain - 1; target within 20 %.
5. with ``--verify``: the what-if also writes its patch (``--patch``), and where it wrote one,
   ``gpusight run --verify`` applies it to a copy and measures it; its gain against the gain
   the what-if predicted for that fix (target within 20 %, #16);
6. with ``--truth-watched``: the fix's gain again with both runs under ``gpusight run --lean``,
   the what-if's own timer, so that a miss splits into the watch's share (this truth against the
   bare one) and the injection's (the what-if against this one).

Also recorded: the verdict, and for bursty_loader the stall period (target: input_pipeline,
period 4).

    PYTHONPATH=python_pkg python3 benchmarks/run_whatif.py --out "$OUT" [--only NAME ...]
    (``--suite scenarios``, the default)

Writes OUT/<scenario>.json (the what-if report), OUT/run-whatif.json (everything) and
OUT/run-whatif-table.txt (the table, printed last).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from harness.cli import Parser
from harness.paths import SCENARIOS
from harness.proc import run
from harness.record import Results
from harness.stats import pct

from whatifs.truth import TARGET_PCT, pick, truth

# scenario -> (how to pick the what-if row, extra script args, iterations for the truth runs)
CASES: dict[str, dict[str, Any]] = {
    "bursty_loader": {"pick": "workers", "iters": 160},
    "slow_loader": {"pick": "loader_together", "iters": 120},
    "conv_nchw_amp": {"pick": "channels_last", "iters": 80},
    "tiny_batch": {"pick": "batch", "iters": 200},
    "fp32_transformer": {"pick": "precision_together", "iters": 60},
    "cpu_model": {"pick": "to_device", "iters": 80},
    "unbatched_inference": {"pick": "batch", "iters": 200},
    "small_batch_rnn": {"pick": "batch", "iters": 120},
    "graph_batches": {"pick": "batch", "iters": 200},
    # No what-if measures these fixes from outside (a sync in the user's logging line, a copy's
    # source pinned): the watch's patch is verified against the script's own --fix instead.
    "item_per_step": {"pick": None, "iters": 60, "what_if": False},
    "pageable_copy": {"pick": None, "iters": 80, "what_if": False},
}


def sized_variant(row: dict[str, Any], how: str) -> list[str] | None:
    """Script arguments that apply the what-if row's own size (None: --fix is the match)."""
    p = row.get("params") or {}
    if how in ("workers", "loader_together") and p.get("group") == "workers":
        return ["--workers", str(p["set_num_workers"])]
    if how == "batch":
        items = p.get("items_per_step") or p.get("set_batch_size")
        return ["--batch", str(items)] if items else None
    return None


def verify_patch(name: str, out: Path, report: Path) -> dict[str, Any]:
    """``gpusight run --verify`` of the what-if's patch: its measured gain and the prediction."""
    diff = out / f"{name}.diff"
    cmd = [
        sys.executable, "-m", "gpusight", "run", "--verify", str(diff), "--report", str(report),
        str(SCENARIOS / f"{name}.py"), "--iters", "100000",
    ]  # fmt: skip
    ran = run(cmd, 300)
    rc, log, wall = ran.rc, ran.out, ran.wall_s
    (out / f"{name}.verify.log").write_text(log)
    print(log[-1500:], flush=True)
    got: dict[str, Any] = {"rc": rc, "wall_s": round(wall, 1)}
    for line in log.splitlines():
        m = re.match(r"\s*measured: ([0-9.]+)x", line)
        if m:
            got["measured"] = float(m.group(1))
        m = re.match(r"\s*predicted: ([0-9.]+)x \(([^,]+),", line)
        if m:
            got["predicted"], got["finding"] = float(m.group(1)), m.group(2)
    if got.get("measured") and got.get("predicted"):
        got["error_pct"] = pct(got["measured"] / got["predicted"], 1)
    return got


def main(argv: list[str] | None = None) -> int:
    ap = Parser(__doc__).out(required=True).only()
    ap.add_argument("--budget", type=float, default=120.0)
    ap.rounds(2)
    ap.add_argument("--verify", action="store_true", help="also --patch, then --verify it")
    ap.add_argument(
        "--truth-watched",
        action="store_true",
        help="also the fix's gain with both runs under gpusight run --lean (the what-if's timer)",
    )
    args = ap.parse_args(argv)
    out = Path(args.out)
    saved = Results(out, "run-whatif.json", "run-whatif-table.txt")
    results = saved.items
    names = args.only or list(CASES)
    for name in names:
        case = CASES[name]
        print(f"\n=== {name}", flush=True)
        rp = out / f"{name}.json"
        cmd = [
            sys.executable, "-m", "gpusight", "run",
            *(
                ["--what-if", "--budget", str(args.budget)]
                if case.get("what_if", True)
                else ["--steps", "100"]
            ),
            "--json", str(rp),
            *(["--patch", str(out / f"{name}.diff")] if args.verify else []),
            str(SCENARIOS / f"{name}.py"), "--iters", "100000",
        ]  # fmt: skip
        ran = run(cmd, args.budget + 120)
        rc, log, wall = ran.rc, ran.out, ran.wall_s
        (out / f"{name}.log").write_text(log)
        print(log[-3000:], flush=True)
        rep = json.loads(rp.read_text()) if rp.exists() else {}
        row = pick(rep, case["pick"]) if rep and case["pick"] else None
        res: dict[str, Any] = {
            "rc": rc,
            "wall_s": round(wall, 1),
            "verdict": (rep.get("verdict") or {}).get("bottleneck"),
            "summary": (rep.get("verdict") or {}).get("summary"),
            "stall": (rep.get("run") or {}).get("stall"),
            "row": row,
            "rows": [
                {k: r.get(k) for k in ("change", "speedup", "noise_pct", "skipped")}
                for r in rep.get("what_if", [])
            ],
        }
        res["truth_fix"] = truth(name, ["--fix"], case["iters"], args.rounds)
        variant = sized_variant(row, case["pick"]) if row else None
        if variant is not None:
            res["truth_sized"] = truth(name, variant, case["iters"], args.rounds)
        ref = res.get("truth_sized") or res["truth_fix"]
        if row and ref.get("gain"):
            res["error_pct"] = pct(row["speedup"] / ref["gain"], 1)
        if args.truth_watched:
            w = truth(name, ref["variant"], case["iters"], args.rounds, watched=out)
            res["truth_watched"] = w
            if row and w.get("gain"):
                res["error_watched_pct"] = pct(row["speedup"] / w["gain"], 1)
        if args.verify and (out / f"{name}.diff").exists():
            v = res["verify"] = verify_patch(name, out, rp)
            fix_gain = res["truth_fix"].get("gain")
            if v.get("measured") and fix_gain:
                v["fix_gain"] = round(fix_gain, 3)
                v["error_vs_fix_pct"] = pct(v["measured"] / fix_gain, 1)
        saved.add(name, res)
    lines = [
        f"{'scenario':20} {'verdict':16} {'what-if row':44} {'what-if':>8} {'true':>7} "
        f"{'error':>7} {'wall s':>7}"
    ]
    for name, r in results.items():
        row = r.get("row") or {}
        ref = r.get("truth_sized") or r.get("truth_fix") or {}
        g = ref.get("gain")
        e = r.get("error_pct")
        ok = e is not None and abs(e) <= TARGET_PCT
        lines.append(
            f"{name:20} {r.get('verdict')!s:16} {str(row.get('change'))[:44]:44} "
            f"{(row.get('speedup') or 0):8.2f} {(g or 0):7.2f} "
            f"{(f'{e:+.1f}%' if e is not None else 'n/a'):>7} {r['wall_s']:7.1f} "
            f"{'ok' if ok else 'MISS'}"
        )
        if r.get("truth_watched"):
            w = r["truth_watched"].get("gain")
            ew = r.get("error_watched_pct")
            lines.append(
                f"{'':20} both under gpusight run --lean: {(w or 0):.2f}x, what-if "
                f"{(f'{ew:+.1f}%' if ew is not None else 'n/a')} from it"
            )
        if r.get("stall"):
            lines.append(f"{'':20} stall: every {r['stall'].get('period_steps')} steps")
    checked = {n: r["verify"] for n, r in results.items() if r.get("verify")}
    if args.verify:
        lines += ["", f"{'patch verified':20} {'finding':24} {'measured':>9} {'predicted':>9} "
                  f"{'error':>7}      {'--fix':>6} {'vs --fix':>8}"]  # fmt: skip
        for name in results:
            v = checked.get(name)
            if v is None:
                lines.append(f"{name:20} (no patch of the script's own lines)")
                continue
            e = v.get("error_pct")
            ef = v.get("error_vs_fix_pct")
            lines.append(
                f"{name:20} {str(v.get('finding'))[:24]:24} {(v.get('measured') or 0):9.2f} "
                f"{(v.get('predicted') or 0):9.2f} {(f'{e:+.1f}%' if e is not None else 'n/a'):>7}"
                f" {'ok' if e is not None and abs(e) <= TARGET_PCT else 'MISS':4}"
                f" {(v.get('fix_gain') or 0):6.2f} "
                f"{(f'{ef:+.1f}%' if ef is not None else 'n/a'):>8}"
            )
    saved.finish("\n".join(lines))
    return 0
