"""The real-library corpus (``corpus/``) on a GPU: the verdict, and each measured what-if against
the truth of the same change, in one lease.

For each script (its ``EXPECTED`` names the verdict and the what-if group that matches its
``--fix``):

1. the truth: the script bare and with ``--fix``, alternating (``--rounds``), items per second
   from its own clock (``CORPUS_RESULT``);
2. ``gpusight run --what-if --budget B`` on the unmodified script (or, with ``--verdict-only``,
   a watched run of ``--steps``): the verdict, the row for the fix, whether the combined row
   ran, and every row's scope and reason;
3. error = what-if gain / true gain - 1 (target within 20 %), the truth taken at the row's own
   size where the row set the script's batch argument (``--batch-size 16`` run bare and with
   it), and a combined row's truth is its winners' own arguments together (the script's
   ``TRUTH_ARGS`` name its switch for a change that is not an argument); a skipped row says why.

    PYTHONPATH=python_pkg python3 benchmarks/run_whatif.py --suite corpus --out "$OUT" \\
        [--only NAME ...] [--budget 180] [--verdict-only]

Writes OUT/<name>.json (the report), OUT/<name>.log, OUT/corpus.json (everything) and
OUT/corpus-table.txt (the table, printed last).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from harness.cli import Parser
from harness.paths import CORPUS
from harness.proc import run
from harness.record import Results
from harness.scripts import top_level
from harness.stats import pct

from whatifs.truth import SETTLE_PCT, TARGET_PCT, pick, truth

# A float32 step's verdict may name the cause (precision) or the state (compute): both right.
SAME_VERDICT = {"compute": {"compute", "precision"}, "precision": {"compute", "precision"}}


def scripts() -> dict[str, dict[str, Any]]:
    """Each corpus script's module-level facts, read without importing it (its library may be
    missing where this runs)."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(CORPUS.glob("*.py")):
        if path.name.startswith("_"):
            continue
        out[path.stem] = top_level(path, ("LIBRARY", "LABEL", "EXPECTED", "FIX", "TRUTH_ARGS"))
    return out


def same_change(row: dict[str, Any], report: dict[str, Any], meta: dict[str, Any]) -> list[str]:
    """The script's own arguments that make the change ``row`` measured (empty: none known).

    A row that set the script's batch argument takes that argument; a row that injected
    settings the script's ``TRUTH_ARGS`` all have switches for takes those (a row run on top
    of another's winner is over that run, not the script: none); a combined row takes each
    winner's: its batch argument, else the script's ``TRUTH_ARGS`` for the winner's group (the
    script's own switch for that change, ``{"autocast": ["--bf16"]}``), else for each setting
    its best row set (``{"set_num_workers": ["-j", "{}"]}``, "{}" the row's value; a later
    winner's setting over an earlier one's, as the combined run takes them). A winner without
    any of these and the truth cannot be the same change: empty, and ``--fix`` stands."""
    params = row.get("params") or {}
    own: dict[str, list[str]] = meta.get("TRUTH_ARGS") or {}
    if params.get("group") != "together":
        if params.get("set_script_arg") or params.get("stacked_on"):
            return str(params.get("set_script_arg") or "").split()
        # An injected setting the script has a switch for (timm_accum's micro-batch, -b).
        sets = {k: v for k, v in params.items() if k.startswith("set_")}
        if not sets or not all(k in own for k in sets):
            return []
        return [a.format(v) for k, v in sets.items() for a in own[k]]
    rows = [r for r in report.get("what_if", []) if r.get("speedup") and not r.get("skipped")]
    variant: list[str] = []
    settings: dict[str, Any] = {}
    for group in str(params.get("winners") or "").split(","):
        mine = [r for r in rows if (r.get("params") or {}).get("group") == group]
        best = (max(mine, key=lambda r: r["speedup"]) if mine else {}).get("params") or {}
        arg = str(best.get("set_script_arg") or "")
        sets = {k: v for k, v in best.items() if k.startswith("set_")}
        if group == "batch" and arg:
            variant += arg.split()
        elif group in own:
            variant += own[group]
        elif sets and all(k in own for k in sets):
            settings.update(sets)
        else:
            return []
    for key, value in settings.items():
        variant += [a.format(value) for a in own[key]]
    return variant


def unlike_fix(row: dict[str, Any] | None, variant: list[str]) -> str | None:
    """Why ``row`` cannot be held to ``--fix`` (None: it can): a combined row whose winners
    the script's arguments cannot make together is another change than ``--fix`` (the H100's
    hf_trainer_defaults: batch 128, bf16 and TF32 read 10.27x against --fix's batch 64, bf16
    and 4 workers, 5.96x)."""
    params = (row or {}).get("params") or {}
    if params.get("group") != "together" or variant:
        return None
    return (
        f"no truth of the same change: the script's arguments cannot make {params.get('winners')}"
    )


def held_instead(
    row: dict[str, Any] | None, report: dict[str, Any], meta: dict[str, Any]
) -> tuple[dict[str, Any], list[str]] | None:
    """For a combined row no truth can make, the largest single row among its winners' that the
    script's own arguments can (hf_trainer_defaults: the batch row through
    ``--per_device_train_batch_size``), with those arguments; None where there is none."""
    params = (row or {}).get("params") or {}
    winners = set(str(params.get("winners") or "").split(","))
    rows = [r for r in report.get("what_if", []) if r.get("speedup") and not r.get("skipped")]
    mine = [r for r in rows if (r.get("params") or {}).get("group") in winners
            and not (r.get("params") or {}).get("stacked_on")]  # fmt: skip
    made = [(r, same_change(r, report, meta)) for r in mine]
    made = [(r, v) for r, v in made if v]
    return max(made, key=lambda rv: rv[0]["speedup"]) if made else None


BUDGET_SKIPS = ("over the budget", "raise --budget")
"""What a row left out for want of budget says (``rerun/driver.py``, ``rerun/stacking.py``)."""


def plan_done(rows: list[dict[str, Any]]) -> bool:
    """The budget reached the end of the plan: no row left out for want of it, the winners'
    combined row included where two or more won (one winner is its own answer: its row)."""
    skipped = [str(r.get("skipped") or "") for r in rows]
    return bool(rows) and not any(k in s for s in skipped for k in BUDGET_SKIPS)


def _row_view(r: dict[str, Any]) -> dict[str, Any]:
    keys = ("change", "speedup", "noise_pct", "skipped", "scope")
    return {k: r.get(k) for k in keys} | {"group": (r.get("params") or {}).get("group")}


def check(name: str, meta: dict[str, Any], args: argparse.Namespace, out: Path) -> dict[str, Any]:
    expected = meta.get("EXPECTED") or {}
    script = str(CORPUS / f"{name}.py")
    res: dict[str, Any] = {"library": meta.get("LIBRARY"), "expected": expected}
    res["truth_fix"] = (
        truth(name, ["--fix"], None, args.rounds, folder=CORPUS) if args.rounds > 0 else {}
    )
    rp = out / f"{name}.json"
    what_if = not args.verdict_only and expected.get("pick") is not None
    mode = ["--what-if", "--budget", str(args.budget)] if what_if else ["--steps", str(args.steps)]
    cmd = [sys.executable, "-m", "gpusight", "run", *mode, "--json", str(rp), script,
           "--iters", "100000"]  # fmt: skip
    ran = run(cmd, (args.budget if what_if else 120) + 120)
    rc, log, wall = ran.rc, ran.out, ran.wall_s
    (out / f"{name}.log").write_text(log)
    rep = json.loads(rp.read_text()) if rp.exists() else {}
    verdict = (rep.get("verdict") or {}).get("bottleneck")
    want = expected.get("bottleneck")
    res.update(
        rc=rc,
        wall_s=round(wall, 1),
        verdict=verdict,
        verdict_ok=verdict in SAME_VERDICT.get(want, {want}),
        summary=(rep.get("verdict") or {}).get("summary"),
        findings=[(f.get("id"), f.get("severity")) for f in rep.get("findings", [])],
        rows=[_row_view(r) for r in rep.get("what_if", [])],
    )
    res["together_ran"] = any(
        r["group"] == "together" and r["speedup"] and not r["skipped"] for r in res["rows"]
    )
    res["plan_done"] = plan_done(res["rows"])
    res["start"] = how_runs_started(rep)
    row = pick(rep, expected["pick"]) if what_if and rep else None
    # A row at another setting than --fix's: the truth of the row's own change, through the
    # script's own arguments (the batch argument the what-if passed, TRUTH_ARGS).
    variant = same_change(row, rep, meta) if row else []
    unlike = unlike_fix(row, variant)
    held = held_instead(row, rep, meta) if unlike else None
    if unlike and held is not None:
        # The combined row cannot be held to a truth: one of its winners' rows, which the
        # script's own arguments can make, is held instead, and the table says so.
        res["not_held"] = {"row": _row_view(row) if row else None, "why": unlike}
        row, variant, unlike = held[0], held[1], None
    res["row"] = _row_view(row) if row else None
    if variant and args.rounds > 0:
        res["truth_sized"] = truth(name, variant, None, args.rounds, folder=CORPUS)
    gain = (res.get("truth_sized") or res["truth_fix"]).get("gain")
    if unlike:
        res["error_note"] = unlike
    elif row and gain:
        res["error_pct"] = pct(row["speedup"] / gain, 1)
    print(log[-2000:], flush=True)
    return res


WARM = "each re-run after the first started from one process"


def how_runs_started(rep: dict[str, Any]) -> str | None:
    """The report's note on how its re-runs started: forked from the warm start, or why each
    started fresh (None: no such note, a verdict-only run)."""
    return next((n for n in rep.get("notes", []) if n.startswith("each re-run")), None)


def table(results: dict[str, dict[str, Any]]) -> str:
    lines = [
        f"{'script':26} {'library':15} {'verdict':16} {'ok':3} {'what-if row':40} "
        f"{'what-if':>8} {'true':>7} {'error':>7} {'wall s':>7}"
    ]
    for name, r in results.items():
        row = r.get("row") or {}
        g = (r.get("truth_sized") or r.get("truth_fix") or {}).get("gain")
        e = r.get("error_pct")
        change = str(row.get("change") or ("(no knob: verdict only)" if not row else ""))
        mark = r.get("error_note") or (
            "" if e is None else ("ok" if abs(e) <= TARGET_PCT else "MISS")
        )
        lines.append(
            f"{name:26} {r.get('library')!s:15} {r.get('verdict')!s:16} "
            f"{'yes' if r.get('verdict_ok') else 'NO':3} {change[:40]:40} "
            f"{(row.get('speedup') or 0):8.2f} {(g or 0):7.2f} "
            f"{(f'{e:+.1f}%' if e is not None else 'n/a'):>7} {r.get('wall_s', 0):7.1f} {mark}"
        )
        other = r.get("not_held") or {}
        if other.get("row"):
            lines.append(f"{'':26}   not held: {other['row']['change'][:60]}: {other['why'][:70]}")
        for skipped in (x for x in r.get("rows", []) if x.get("skipped")):
            lines.append(f"{'':26}   skipped: {skipped['change']}: {skipped['skipped'][:90]}")
        held = r.get("truth_sized") or r.get("truth_fix") or {}
        if (held.get("spread_pct") or 0) > SETTLE_PCT:
            lines.append(f"{'':26}   truth unsettled: rounds {held.get('gains')}, "
                         f"{held['spread_pct']:.0f}% apart")  # fmt: skip
        if r.get("start") and not r["start"].startswith(WARM):
            lines.append(f"{'':26}   started fresh: {r['start'][:110]}")
    checked = [r for r in results.values() if r.get("verdict") is not None]
    right = sum(1 for r in checked if r.get("verdict_ok"))
    measured = [r for r in results.values() if r.get("error_pct") is not None]
    inside = sum(1 for r in measured if abs(r["error_pct"]) <= TARGET_PCT)
    tried = [r for r in results.values() if r.get("rows")]
    together = sum(1 for r in tried if r.get("together_ran"))
    done = sum(1 for r in tried if r.get("plan_done"))
    warm = sum(1 for r in tried if (r.get("start") or "").startswith(WARM))
    lines += [
        "",
        f"verdict right: {right} of {len(checked)}; measured rows within "
        f"±{TARGET_PCT:.0f}% of the truth: {inside} of {len(measured)}; the combined row ran on "
        f"{together} of {len(tried)} what-ifs; the budget reached the end of the plan (the "
        f"combined row where two or more won) on {done} of {len(tried)}; the re-runs forked "
        f"from the warm start on {warm} of {len(tried)}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = Parser(__doc__).out(required=True).only()
    ap.add_argument("--budget", type=float, default=180.0)
    ap.rounds(1, help="truth rounds (bare and --fix each; 0: none)")
    ap.add_argument("--steps", type=int, default=30, help="measured steps with --verdict-only")
    ap.add_argument("--verdict-only", action="store_true", help="a watched run, no what-if")
    args = ap.parse_args(argv)
    out = Path(args.out)
    saved = Results(out, "corpus.json", "corpus-table.txt")
    known = scripts()
    names = args.only or list(known)
    for name in names:
        print(f"\n=== {name}", flush=True)
        saved.add(name, check(name, known[name], args, out))
        saved.write_table(table(saved.items))
    saved.finish(table(saved.items))
    return 0
