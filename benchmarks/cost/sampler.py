"""What the watch's sampler process costs a launch-bound step: the same process, paused or not.

    PYTHONPATH=python_pkg python3 benchmarks/watch_cost.py --method sampler \\
        --workload unbatched_inference --rounds 40 --out "$OUT/sampler-cost"

The watch samples NVML in a child process (``gpusight/watch/sampler_process.py``) ten times a
second, and PCIe throughput (NVML holds that call 20 ms a direction) on every fifth sample. It
runs through every block of ``--method interleaved`` and ``--method scenario``, W's and
B's alike, so their figures leave it out; ``--method parts``'s ``sampler_process`` part starts
a fresh child for each block, a second apart, where the host's pace has moved by more.

Here two children run for the whole benchmark: the watch's own (PCIe every fifth sample) and
one without PCIe reads. A bare workload (``--method parts``'s) runs blocks of ``--block-s`` in
the main thread, each in one of three states, the order rotated each round: ``off`` (both
children stopped with SIGSTOP), ``nvml`` (the one without PCIe running, SIGCONT), ``sampler``
(the watch's running). A state's figure is the median over rounds of its block's mean step over
the same round's ``off`` block, with a 95 % interval. No watch runs: the step hooks' cost is
``--method hook``'s, the whole watch's ``--method interleaved``'s.

Writes ``OUT/sampler-cost.json`` and ``OUT/sampler-cost.txt`` (printed last).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import time
from typing import Any

from harness.order import rotated
from harness.paths import scenarios_on_path
from harness.record import write_results
from harness.stats import ci_pct, median_ci, pct

scenarios_on_path()

STATES = ("off", "nvml", "sampler")
START_S = 2.0  # a child's Python start-up and NVML's init, before it is first stopped


class Children:
    """The two sampler processes; exactly one runs in a state other than ``off``."""

    def __init__(self, interval_s: float) -> None:
        from gpusight.watch.machine import visible_gpus
        from gpusight.watch.sampler_process import ProcessSampler

        ids = visible_gpus()
        # The watch's own (gpu_sampler's defaults) and the same without PCIe throughput reads.
        self.by_state = {
            "sampler": ProcessSampler(ids, interval_s=interval_s, labels=range(len(ids))),
            "nvml": ProcessSampler(
                ids, interval_s=interval_s, labels=range(len(ids)), pcie_every=10**9
            ),
        }

    def start(self) -> None:
        for s in self.by_state.values():
            s.start()
        time.sleep(START_S)
        self.set("off")

    def set(self, state: str) -> None:
        for name, s in self.by_state.items():
            pid = s.pid
            if pid is not None:
                os.kill(pid, signal.SIGCONT if name == state else signal.SIGSTOP)

    def stop(self) -> dict[str, Any]:
        out = {}
        for name, s in self.by_state.items():
            pid = s.pid
            if pid is not None:
                os.kill(pid, signal.SIGCONT)  # so that it can answer "stop"
            samples = s.stop()
            out[name] = {
                "pid": pid,
                "samples": len(samples),
                "pcie_samples": sum(1 for x in samples if "pcie_rx_bps" in x),
                "busy_s": round(s.busy_s, 3),
                "available": s.available,
                "reason": s.reason,
            }
        return out


def rotate(r: int) -> tuple[str, ...]:
    return rotated(STATES, r)


def run(args: argparse.Namespace) -> int:
    import torch

    from cost.parts import WORKLOADS, timed_steps

    work = WORKLOADS[args.workload](torch)
    kids = Children(args.interval_s)
    blocks: list[dict[str, Any]] = []
    with work.mode():
        for _ in range(args.warm_steps):
            work.step()
        work.sync()
        t0 = time.perf_counter()
        n0 = 50
        timed_steps(work, n0)
        work.sync()
        per_step = (time.perf_counter() - t0) / n0
        n = max(10, round(args.block_s / per_step))
        kids.start()
        try:
            for r in range(args.rounds):
                for state in rotate(r):
                    kids.set(state)
                    work.sync()
                    b = timed_steps(work, n)
                    work.sync()
                    blocks.append(
                        {"round": r, "state": state, **{k: round(v, 5) for k, v in b.items()}}
                    )
        finally:
            seen = kids.stop()
    lines = [
        f"sampler cost on {work.dev} ({torch.__version__}): {args.workload}, {args.rounds} rounds "
        f"of {n}-step blocks (~{args.block_s:g} s), order rotated",
        f"{'state':<8} {'vs off':>8} {'95 % interval':>16} {'mean ms':>9} {'cpu ms':>8}",
    ]
    result: dict[str, Any] = {
        "device": str(work.dev),
        "workload": args.workload,
        "rounds": args.rounds,
        "block_steps": n,
        "interval_s": args.interval_s,
        "children": seen,
        "blocks": blocks,
    }
    off = {b["round"]: b for b in blocks if b["state"] == "off"}
    for state in STATES:
        mine = [b for b in blocks if b["state"] == state]
        ratios = [b["mean_ms"] / off[b["round"]]["mean_ms"] for b in mine]
        mid = statistics.median(ratios)
        ci = median_ci(ratios)
        result[f"{state}_pct"] = pct(mid)
        result[f"{state}_ci_pct"] = ci_pct(ci)
        ci_s = "{:+.1f}..{:+.1f}%".format(*result[f"{state}_ci_pct"]) if ci else "-"
        lines.append(
            f"{state:<8} {100 * (mid - 1):>+7.1f}% {ci_s:>16} "
            f"{statistics.median(b['mean_ms'] for b in mine):>9.4f} "
            f"{statistics.median(b['cpu_ms'] for b in mine):>8.4f}"
        )
    for name, s in seen.items():
        lines.append(
            f"{name}: {s['samples']} samples ({s['pcie_samples']} with PCIe), "
            f"NVML {'read' if s['available'] else 'not read: ' + str(s['reason'])}"
        )
    text = "\n".join(lines)
    print("\n" + text, flush=True)
    write_results(args.out, "sampler-cost", result, text)
    return 0


def main(argv: list[str] | None = None) -> int:
    from cost.parts import parser

    ap = parser(__doc__)
    ap.rounds(40)
    ap.add_argument("--block-s", type=float, default=1.0)
    ap.add_argument("--warm-steps", type=int, default=200)
    ap.add_argument("--interval-s", type=float, default=0.1, help="the watch's (0.1)")
    ap.out()
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.block_s <= 0:
        ap.error("--rounds must be at least 1 and --block-s positive")
    return run(args)
