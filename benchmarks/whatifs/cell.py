"""``%%gpusight --what-if`` on the example notebook's training cell, in a real IPython shell.

    PYTHONPATH=python_pkg python3 benchmarks/gpu_whatif.py --suite cell --out "$OUT/cell"

Runs the notebook's code cells as a user would, up to its what-if cell (``%gpusight``, the
environment check, is left out: it benchmarks the card), then the what-if cell itself with its
``--budget``, in IPython's ``InteractiveShell`` (no kernel needed). Then the fix by hand: the
same loop, unwatched, with the loader of the top DataLoader row (its ``num_workers``) against
the notebook's own loader, each timed over the same steps after a warm-up with the host clock
(a device sync at the end), and the fixed loader also over one whole epoch, its workers' start
included, as the cell runs it: the what-if's gain against the gain the change really gives.
Checks that the user's model parameters are the same after the what-if as before it. Writes
``OUT/cell-whatif.json`` and prints a short table.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from harness.cli import Parser
from harness.paths import ROOT
from harness.record import note

NOTEBOOK = ROOT / "examples" / "why-is-my-gpu-idle.ipynb"
STEPS = 40
WARM = 6


def code_cells() -> list[str]:
    nb = json.loads(NOTEBOOK.read_text("utf-8"))
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def timed_loop(shell: Any, loader_expr: str, whole_epoch: bool = False) -> float:
    """Items per second of the notebook's loop body over ``STEPS`` batches of ``loader_expr``
    after a warm-up; with ``whole_epoch``, over the whole cell as it runs, one epoch from
    ``iter(loader)`` on: the workers' start and first batches included, as the cell pays them
    each time it runs."""
    limit = 10**9 if whole_epoch else STEPS + WARM
    shell.run_cell(
        f"_gs_loader = {loader_expr}\n"
        "import time as _gs_time\n"
        "_gs_ends = [(_gs_time.perf_counter(), 0)]\n"
        "for _gs_i, (x, y) in enumerate(_gs_loader):\n"
        "    x, y = x.to(device), y.to(device)\n"
        "    optimizer.zero_grad()\n"
        "    loss = loss_fn(model(x), y)\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    _gs_ends.append((_gs_time.perf_counter(), len(x)))\n"
        f"    if _gs_i + 1 >= {limit}:\n"
        "        break\n"
        "torch.cuda.synchronize() if torch.cuda.is_available() else None\n"
        "_gs_ends.append((_gs_time.perf_counter(), 0))\n"
    )
    ends = shell.user_ns["_gs_ends"]
    first = 0 if whole_epoch else WARM + 1
    items = sum(n for _, n in ends[first + 1 : -1])
    return float(items / (ends[-1][0] - ends[first][0]))


def main(argv: list[str] | None = None) -> int:
    p = Parser(__doc__).out(".")
    p.add_argument("--budget", type=float, default=None, help="instead of the cell's --budget")
    args = p.parse_args(argv)
    out = Path(args.out)
    note(out)
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    cells = code_cells()
    what_if = next(c for c in cells if c.startswith("%%gpusight --what-if"))
    setup = [c for c in cells[: cells.index(what_if)] if not c.startswith(("%gpusight", "%%"))]
    for cell in setup:
        if "load_report" in cell:  # the before/after comparison needs the watched cells' files
            continue
        res = shell.run_cell(cell)
        if not res.success:
            raise SystemExit(f"setup cell failed: {res.error_in_exec or res.error_before_exec}")
    import torch

    params_before = [t.detach().clone() for t in shell.user_ns["model"].parameters()]
    line, body = what_if.split("\n", 1)
    if args.budget is not None:
        line = re.sub(r"--budget \S+", f"--budget {args.budget:g}", line)
    t0 = time.perf_counter()
    report = shell.run_cell_magic("gpusight", line.removeprefix("%%gpusight").strip(), body)
    wall = time.perf_counter() - t0
    params_same = all(
        torch.equal(a, b)
        for a, b in zip(params_before, shell.user_ns["model"].parameters(), strict=True)
    )
    rows = [
        {"change": w.change, "speedup": w.speedup, "skipped": w.skipped, "params": w.params}
        for w in report.what_if
    ]
    best = max(
        (r for r in rows if r["speedup"] and "set_num_workers" in (r["params"] or {})),
        key=lambda r: r["speedup"],
        default=None,
    )
    result: dict[str, Any] = {
        "wall_s": round(wall, 1),
        "verdict": report.verdict.bottleneck,
        "rows": rows,
        "model_unchanged": params_same,
    }
    if best is not None:
        workers = int(best["params"]["set_num_workers"])
        base = timed_loop(shell, "loader")
        src = re.search(r"loader = (DataLoader\(.*\))", "\n".join(setup))
        assert src is not None
        fixed_expr = re.sub(r"num_workers=\d+", f"num_workers={workers}", src.group(1))
        steady = timed_loop(shell, fixed_expr)
        # The truth is the cell as it runs: one epoch, its workers' start included (the base
        # has no workers to start when it has num_workers=0; its steady rate is its epoch's).
        fixed = timed_loop(shell, fixed_expr, whole_epoch=True)
        result["true"] = {
            "workers": workers,
            "base_items_s": base,
            "fixed_items_s": fixed,
            "fixed_steady_items_s": steady,
            "speedup": fixed / base,
            "steady_speedup": steady / base,
            "what_if_speedup": best["speedup"],
            "error_pct": 100 * (best["speedup"] / (fixed / base) - 1),
        }
    (out / "cell-whatif.json").write_text(json.dumps(result, indent=1, default=str))
    print(
        f"%%gpusight --what-if: {wall:.1f} s, verdict {result['verdict']}, model unchanged: "
        f"{params_same}"
    )
    for r in rows:
        sp = f"{r['speedup']:.2f}x" if r["speedup"] else f"skipped: {r['skipped']}"
        print(f"  {r['change'][:60]:60} {sp}")
    if "true" in result:
        t = result["true"]
        print(
            f"num_workers={t['workers']} by hand, one epoch: {t['speedup']:.2f}x "
            f"(steady steps only: {t['steady_speedup']:.2f}x) "
            f"({t['base_items_s']:.0f} -> {t['fixed_items_s']:.0f} items/s); what-if "
            f"{t['what_if_speedup']:.2f}x, error {t['error_pct']:+.1f} %"
        )
    return 0
