"""What a few microseconds of Python cost inside a launch-bound GPU step, and what they cost hot.

    PYTHONPATH=python_pkg python3 benchmarks/watch_cost.py --method inline \\
        --workload unbatched_inference --rounds 150 --core 6 --out DIR

On the H200 the watch cost unbatched_inference's 2 ms step about 85 us a step, where the same
code on the host's CPU, hot, costs about 5 us (``--method hook``) and the watch's own clocks saw
21-33 us. This asks what any added Python costs there: one model, one thread (pinned to
``--core``), and blocks of ``--block-steps`` steps that take turns, each round every variant once
in a rotated order, each variant put on the model for its block and taken off after it:

- ``bare``: nothing added;
- ``shim``: a do-nothing wrapper of the model's call (``watch/call_shim.py``);
- ``raw_hooks``: two do-nothing module hooks, as the watch registers them;
- ``burn_a`` / ``burn_b``: the shim running a plain Python loop after each call, sized on this
  host's CPU to cost ``--burn-us`` (two figures) hot;
- ``clocks``: the shim reading the clock twice into a preallocated array (no allocation);
- ``record``: the shim doing a light step's kind of bookkeeping (two clock reads, a
  ``StepRecord``, a list append, two random draws);
- ``to_wrap``: ``Tensor.to`` and ``Tensor.cpu`` behind a do-nothing Python wrapper each.

The figure is the median over rounds of (the variant's block mean step - the round's bare one), in
microseconds, with its 95 % interval (order statistics), beside the same code's cost in a hot loop
on this host's CPU (the wrapped calls' bodies only). Writes ``OUT/inline-cost.json`` and
``OUT/inline-cost-table.txt``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import time
import timeit
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from harness.order import rotated
from harness.paths import scenarios_on_path
from harness.record import note
from harness.stats import median_ci, paired_diffs

scenarios_on_path()

VARIANTS = ("bare", "shim", "raw_hooks", "burn_a", "burn_b", "clocks", "record", "to_wrap")


def burner(target_us: float) -> Callable[[], int]:
    """A plain Python loop that costs about ``target_us`` hot on this CPU."""

    def burn(n: int) -> int:
        x = 0
        for i in range(n):
            x += i
        return x

    per = timeit.timeit(lambda: burn(1000), number=2000) / 2000 / 1000  # s per iteration
    n = max(1, round(target_us * 1e-6 / per))
    return lambda: burn(n)


def clocks() -> Callable[[], None]:
    """The least a step boundary needs: the clock, into storage allocated once."""
    from array import array

    ends = array("q", bytes(8 * 4096))
    state = [0]

    def work() -> None:
        t = time.perf_counter_ns()
        i = state[0] = (state[0] + 1) & 4095
        ends[i] = t + (time.perf_counter_ns() - t)

    return work


def bookkeeping() -> Callable[[], None]:
    """A light step's kind of work: clocks, a record, an append, two random draws."""
    from gpusight.watch.recorder import StepRecord

    records: list[Any] = []
    rng = random.Random(0)
    state = {"i": 0}

    def work() -> None:
        t = time.perf_counter_ns()
        state["i"] += 1
        full = rng.random() * 8 < 1.0
        detail = rng.random() * 4 < 1.0
        rec = StepRecord(state["i"], "measure", time.perf_counter_ns())
        rec.full, rec.detail = full, detail
        rec.overhead_ns += time.perf_counter_ns() - t
        records.append(rec)
        if len(records) > 100_000:
            records.clear()

    return work


@contextlib.contextmanager
def applied(
    name: str, model: Any, torch: Any, bodies: dict[str, Callable[[], Any]]
) -> Iterator[None]:
    from gpusight.watch import call_shim

    if name == "bare":
        yield
        return
    if name == "raw_hooks":
        handles = [
            model.register_forward_pre_hook(lambda m, a: None, prepend=True),
            model.register_forward_hook(lambda m, a, o: None, always_call=True),
        ]
        try:
            yield
        finally:
            for h in handles:
                h.remove()
        return
    if name == "to_wrap":
        to, cpu = torch.Tensor.to, torch.Tensor.cpu

        def to_w(self: Any, *a: Any, **k: Any) -> Any:
            return to(self, *a, **k)

        def cpu_w(self: Any, *a: Any, **k: Any) -> Any:
            return cpu(self, *a, **k)

        torch.Tensor.to, torch.Tensor.cpu = to_w, cpu_w
        try:
            yield
        finally:
            torch.Tensor.to, torch.Tensor.cpu = to, cpu
        return
    body = bodies.get(name)
    after: Callable[[Any], None] = (lambda m: None) if body is None else (lambda m: body())
    shim = call_shim.install(model, after, lambda: False)
    if shim is None:
        raise SystemExit(f"the model's call cannot take a shim ({type(model).__name__})")
    try:
        yield
    finally:
        call_shim.remove(shim)


def hot_us(body: Callable[[], Any] | None) -> float:
    if body is None:
        return 0.0
    runs = [timeit.timeit(body, number=2000) / 2000 for _ in range(5)]
    return min(runs) * 1e6


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from cost.interleaved import timed_block
    from cost.parts import WORKLOADS

    if args.core is not None:
        os.sched_setaffinity(0, {args.core})
    work = WORKLOADS[args.workload](torch)
    bodies: dict[str, Callable[[], Any]] = {
        "burn_a": burner(args.burn_us[0]),
        "burn_b": burner(args.burn_us[1]),
        "clocks": clocks(),
        "record": bookkeeping(),
    }
    hot = {v: hot_us(bodies.get(v)) for v in VARIANTS}
    means: dict[str, list[float]] = {v: [] for v in VARIANTS}
    with work.mode():
        for _ in range(args.warm_steps):
            work.step()
        for r in range(args.rounds):
            for v in rotated(VARIANTS, r):
                with applied(v, work.model, torch, bodies):
                    work.step()  # the variant's first step, untimed (its first call)
                    b = timed_block(work, args.block_steps)
                means[v].append(b["mean_ms"])
    bare = means["bare"]
    rows: dict[str, Any] = {}
    for v in VARIANTS:
        diffs = paired_diffs(means[v], bare, 1e3)
        ci = median_ci(diffs)
        rows[v] = {
            "extra_us": round(statistics.median(diffs), 2),
            "ci_us": [round(c, 2) for c in ci] if ci else None,
            "step_ms": round(statistics.median(means[v]), 4),
            "hot_us": round(hot[v], 3),
        }
    return {
        "device": str(work.dev),
        "torch": torch.__version__,
        "workload": args.workload,
        "rounds": args.rounds,
        "block_steps": args.block_steps,
        "core": args.core,
        "variants": rows,
    }


def table(res: dict[str, Any]) -> str:
    bare_ms = res["variants"]["bare"]["step_ms"]
    lines = [
        f"inline cost on {res['device']} ({res['torch']}): {res['workload']}, {res['rounds']} "
        f"rounds of {res['block_steps']}-step blocks, core {res['core']}, "
        f"bare step {bare_ms:.3f} ms",
        f"{'variant':<10} {'extra us':>9} {'95 % interval':>17} {'% step':>7} {'hot us':>7} "
        f"{'x hot':>6}",
    ]
    for v, row in res["variants"].items():
        if v == "bare":
            continue
        ci = row["ci_us"]
        ci_s = f"{ci[0]:+.1f}..{ci[1]:+.1f}" if ci else "-"
        x = f"{row['extra_us'] / row['hot_us']:.1f}" if row["hot_us"] > 0.05 else "-"
        pct = row["extra_us"] / 1e3 / bare_ms * 100
        lines.append(
            f"{v:<10} {row['extra_us']:>+9.1f} {ci_s:>17} {pct:>+6.2f}% "
            f"{row['hot_us']:>7.2f} {x:>6}"
        )
    lines.append(
        "extra: median over rounds of the variant's block mean step minus the round's bare one; "
        "hot: what the code it adds after each call costs in a hot loop on this CPU"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from cost.parts import parser

    ap = parser(__doc__)
    ap.rounds(150)
    ap.add_argument("--block-steps", type=int, default=25)
    ap.add_argument("--warm-steps", type=int, default=300)
    ap.add_argument("--burn-us", type=float, nargs=2, default=[2.0, 8.0])
    ap.add_argument("--core", type=int, default=None)
    ap.out()
    args = ap.parse_args(argv)
    res = run(args)
    text = table(res)
    print(text)
    if args.out:
        out = Path(args.out)
        note(out)
        (out / "inline-cost.json").write_text(json.dumps(res, indent=1))
        (out / "inline-cost-table.txt").write_text(text + "\n")
    return 0
