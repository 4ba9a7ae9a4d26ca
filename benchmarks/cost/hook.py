"""The watch's own cost per step, in microseconds, on a step that costs almost nothing.

    PYTHONPATH=python_pkg python3 benchmarks/watch_cost.py --method hook --rounds 40 --out DIR
    PYTHONPATH=python_pkg python3 benchmarks/watch_cost.py --method hook --workload infer \\
        --parts bare minimal watched

On a launch-bound GPU step (2 ms, ~90 launches) the watch's hooks are a few percent, and the
GPU host's noise (10-15 % between seconds) hides a change of a few microseconds. The hooks'
Python is the same on any device, so this times it on the CPU, on tiny_batch's shape of step
(seven ``Linear`` and six ``ReLU`` in a ``Sequential``, cross-entropy, AdamW) with 4-wide layers:
the step is torch's dispatch and little else, and a microsecond of the watch is visible.
``--workload infer``: one call of a 2-wide ``Linear`` under ``inference_mode``, each call a step
(the post-hook runs on every step, as the call ends the step; ``all_hooks``: the pre-hook too).

Blocks of steps alternate bare and watched (``--method parts``'s parts, rotated each round);
the figure is the median over rounds of (watched block's median step - the round's bare one),
in microseconds, and the same of the loop thread's CPU time a step (what a shared machine's
other work takes from the wall clock is not in it). Writes ``OUT/hook-cost.json``; prints a table.
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

WARM = 24  # past the watch's warm-up (3) and census (16 steps, gpusight/watch/detail.py)


class TinyStep:
    def __init__(self, torch: Any, width: int, depth: int, foreach: bool) -> None:
        nn = torch.nn
        torch.manual_seed(0)
        layers: list[Any] = []
        for _ in range(depth):
            layers += [nn.Linear(width, width), nn.ReLU()]
        self.torch = torch
        self.model = nn.Sequential(*layers, nn.Linear(width, 10))
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, foreach=foreach)
        self.x = torch.randn(8, width)
        self.y = torch.randint(0, 10, (8,))

    def sync(self) -> None:
        """Nothing to wait for: the step runs on the CPU."""

    def step(self) -> None:
        f = self.torch.nn.functional
        loss = f.cross_entropy(self.model(self.x), self.y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()


class TinyInference:
    def __init__(self, torch: Any, width: int) -> None:
        torch.manual_seed(0)
        self.torch = torch
        self.model = torch.nn.Linear(width, width).eval()
        self.x = torch.randn(1, width)

    def sync(self) -> None:
        """Nothing to wait for: the step runs on the CPU."""

    def step(self) -> None:
        with self.torch.inference_mode():
            self.model(self.x)


def block(work: TinyStep | TinyInference, part: str, n: int) -> dict[str, float]:
    """``WARM`` steps, then ``n`` timed ones, under ``part`` (``--method parts``'s block), in
    microseconds."""
    from cost.parts import block as timed_block

    out = timed_block(work, part, n, warm=WARM)
    # The thread's CPU time too: on a shared machine the wall clock also counts time the
    # thread waited to run.
    got = {"median_us": out["median_ms"] * 1e3, "cpu_us": out["cpu_ms"] * 1e3}
    for key in ("self_us", "measured_steps", "full_steps"):
        if key in out:
            got[key] = out[key]
    return got


def main(argv: list[str] | None = None) -> int:
    p = Parser(__doc__)
    p.add_argument("--parts", nargs="*", default=["bare", "all_hooks", "watched"])
    p.rounds(40)
    p.add_argument("--steps", type=int, default=300, help="timed steps a block")
    p.add_argument("--workload", choices=("train", "infer"), default="train")
    p.add_argument("--width", type=int, default=None, help="default 4 (train), 2 (infer)")
    p.add_argument("--depth", type=int, default=6)
    p.out()
    args = p.parse_args(argv)
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # torch's intra-op pool would only add noise to a 4-wide step
    parts = list(dict.fromkeys(["bare", *args.parts]))
    work: TinyStep | TinyInference = (
        TinyStep(torch, args.width or 4, args.depth, foreach=True)
        if args.workload == "train"
        else TinyInference(torch, args.width or 2)
    )
    blocks: dict[str, list[dict[str, float]]] = {p: [] for p in parts}
    try:
        for r in range(args.rounds):
            for part in rotated(parts, r):
                blocks[part].append(block(work, part, args.steps))
    finally:
        torch.set_num_threads(threads)
    rows = {}
    for part in parts:
        row: dict[str, Any] = {}
        for key, name in (("median_us", "wall"), ("cpu_us", "cpu")):
            bare = [b[key] for b in blocks["bare"]]
            mine = [b[key] for b in blocks[part]]
            diffs = paired_diffs(mine, bare)
            row[f"{name}_step_us"] = statistics.median(mine)
            row[f"{name}_extra_us"] = statistics.median(diffs)
            row[f"{name}_extra_iqr_us"] = quartiles(diffs)
        selfs = [b["self_us"] for b in blocks[part] if "self_us" in b]
        row["self_us"] = statistics.median(selfs) if selfs else None
        if selfs:
            row["full_steps"] = sum(int(b["full_steps"]) for b in blocks[part])
            row["measured_steps"] = sum(int(b["measured_steps"]) for b in blocks[part])
        rows[part] = row
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="hook-cost-"))
    note(out)
    meta = {"torch": torch.__version__, "args": vars(args)}
    (out / "hook-cost.json").write_text(json.dumps({"meta": meta, "parts": rows}, indent=1))
    print(
        f"hook cost on cpu, {args.workload} (torch {torch.__version__}), "
        f"{args.rounds} x {args.steps} steps"
    )
    print(
        f"{'part':10} {'step us':>8} {'extra us':>9} {'IQR':>15} "
        f"{'cpu us':>8} {'extra':>7} {'IQR':>15} {'self us':>8} {'hooked':>9}"
    )
    for part, r in rows.items():
        w, c, s = r["wall_extra_iqr_us"], r["cpu_extra_iqr_us"], r["self_us"]
        hooked = f"{r['full_steps']}/{r['measured_steps']}" if "full_steps" in r else "-"
        print(
            f"{part:10} {r['wall_step_us']:8.1f} {r['wall_extra_us']:+9.1f} "
            f"{w[0]:+7.1f}..{w[1]:+6.1f} {r['cpu_step_us']:8.1f} {r['cpu_extra_us']:+7.1f} "
            f"{c[0]:+7.1f}..{c[1]:+6.1f} {'-' if s is None else f'{s:8.1f}'} {hooked:>9}"
        )
    print("step us: the block's median step (wall); cpu us: the loop thread's CPU time a step;")
    print("extra: median over rounds of the part's figure minus the round's bare one, IQR its")
    print("quartiles; self us: what the watch's own clocks saw a measured step; hooked: the")
    print("measured steps that ran the module hooks, of all (the rest light steps)")
    return 0
