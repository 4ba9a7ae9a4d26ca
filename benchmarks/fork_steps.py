"""A training loop's step time in a fresh process and in one forked from a process that had
imported torch and gpusight's run command, as the warm start forks its re-runs
(``rerun/warm_server.py``), with and without ``own_pages`` copying the shared pages first.

    .venv/bin/python benchmarks/fork_steps.py [--rounds 8]

The loop is rerun_exit's 12-layer MLP at batch 8 (a step of about 2 ms on this CPU, the host's
own overhead most of it); 300 warm-up steps, then 1,000 timed. Each round runs the three ways
in turn, each its own process; prints the medians and writes
benchmarks/results/fork-steps.md.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

from harness.cli import Parser
from harness.record import write_markdown
from rerun_exit import MLP

WAYS = ("fresh", "forked", "forked, pages copied first")


def loop_ms() -> float:
    """The MLP's mean step over 1,000 steps after 300."""
    scope: dict[str, object] = {}
    exec(MLP.replace("range(100000)", "range(0)"), scope)  # the model and optimizer only
    model, opt, x = scope["model"], scope["opt"], scope["x"]
    for i in range(1300):
        if i == 300:
            t = time.perf_counter()
        loss = model(x).square().mean()  # type: ignore[operator]
        opt.zero_grad()  # type: ignore[attr-defined]
        loss.backward()
        opt.step()  # type: ignore[attr-defined]
    return (time.perf_counter() - t) / 1000 * 1e3


def one(way: str) -> float:
    """In this process (a fresh one): the loop as ``way`` runs it."""
    import gpusight.commands.run  # noqa: F401 - what the server imports
    import torch  # noqa: F401
    from gpusight.rerun.warm_server import own_pages

    if way == "fresh":
        return loop_ms()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            if way != "forked":
                own_pages()
            os.write(w, str(loop_ms()).encode())
        finally:
            os._exit(0)
    os.close(w)
    got = float(os.read(r, 64))
    os.waitpid(pid, 0)
    return got


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        print(one(WAYS[int(sys.argv[2])]))
        return 0
    ap = Parser(__doc__)
    ap.rounds(8, help="rounds of the three ways, in turn")
    args = ap.parse_args()
    got: dict[str, list[float]] = {w: [] for w in WAYS}
    for k in range(args.rounds):
        order = range(3) if k % 2 == 0 else reversed(range(3))
        for i in order:
            out = subprocess.run([sys.executable, __file__, "--one", str(i)], check=True,
                                 capture_output=True, text=True).stdout  # fmt: skip
            got[WAYS[i]].append(float(out.strip().splitlines()[-1]))
    lines = ["| process | step (ms), median | fastest | slowest |", "|---|---|---|---|"]
    for way, v in got.items():
        lines.append(f"| {way} | {statistics.median(v):.2f} | {min(v):.2f} | {max(v):.2f} |")
    write_markdown(
        "fork-steps.md", "A loop's steps in a fresh process and in a forked one",
        f"this project's 2-core CPU machine: {args.rounds} processes a way, taken in turn, each "
        "timing 1,000 steps of a 12-layer MLP at batch 8 after 300.", lines,
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
