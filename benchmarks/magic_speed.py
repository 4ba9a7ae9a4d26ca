"""How long ``%gpusight`` takes, as a notebook user waits for it (issue #36, point 8).

    PYTHONPATH=python_pkg python3 benchmarks/magic_speed.py --out OUT [--repeats 5]
    PYTHONPATH=python_pkg python3 benchmarks/magic_speed.py --src OTHER/python_pkg --label before

Each run is a fresh process (``benchmarks/magictime/child.py``) with an IPython ``InteractiveShell``
that runs ``%load_ext gpusight`` then ``%gpusight``, timed from the first to the end of the
second (its report displayed), in one of two states:

- ``warm``, the common notebook state: ``import torch`` and ``torch.cuda.init()`` (where CUDA
  is available) done before the timer starts. That setup, timed in the same process, is the
  reference: ``import torch; torch.cuda.init()`` alone.
- ``cold``: nothing imported but IPython; ``%gpusight`` imports torch and starts CUDA itself.

The states take turns, ``--repeats`` runs (5) of each; the figures are medians over runs. Each
run also records where its seconds went: the parts the magic's progress bar names (the
environment check, then each quick benchmark) and timers around the check's probes; and what
its report said (checks, findings, every row's figure), so that a faster version can be held to
the same answers. Bytecode is cached as an installed package has it (gpusight compiled into its
``__pycache__`` before the first run, whatever PYTHONDONTWRITEBYTECODE says). IPython is required
(``--without-ipython`` calls the magic's function without it, labelled so). Writes
OUT/magic-speed[-LABEL].json and .txt, the command in OUT/COMMAND.txt; prints the table last.
"""

from __future__ import annotations

import compileall
import os
import platform
import sys
from pathlib import Path
from typing import Any

from harness.cli import Parser
from harness.order import rotated
from harness.paths import BENCHMARKS, PKG, RESULTS
from harness.proc import run
from harness.record import meta, write_results
from magictime.summary import parse, slim, summarise, table

CHILD = BENCHMARKS / "magictime" / "child.py"
STATES = ("warm", "cold")
TARGET_S = 3.0


def has_ipython(python: str, env: dict[str, str]) -> str | None:
    """None when ``python`` imports IPython; else why not."""
    done = run([python, "-c", "import IPython"], 120, env=env)
    if done.rc == 0:
        return None
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return f"{python} cannot import IPython ({tail})"


def one_run(python: str, env: dict[str, str], state: str, args: Any) -> dict[str, Any]:
    cmd = [python, str(CHILD), state, *(["--without-ipython"] if args.without_ipython else [])]
    done = run(cmd, args.timeout, env=env)
    info = parse(done.stdout)
    if info is None:
        tail = (done.stdout + done.stderr)[-1500:]
        return {"state": state, "error": f"rc {done.rc}: {tail}", "wall_s": done.wall_s}
    info["wall_s"] = done.wall_s
    return info


def run_states(args: Any, env: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    """``args.repeats`` runs of each state, taking turns (the first state rotates)."""
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in args.states}
    for r in range(args.repeats):
        for state in rotated(list(args.states), r):
            info = one_run(args.python, env, state, args)
            runs[state].append(info)
            shown = info.get("total_s")
            print(
                f"run {r + 1}/{args.repeats} {state}: "
                + (f"{shown:.3f} s" if shown is not None else f"failed: {info['error'][-300:]}"),
                file=sys.stderr,
                flush=True,
            )
    return runs


def main(argv: list[str] | None = None) -> int:
    ap = Parser(__doc__)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--src", type=Path, default=PKG, help="gpusight's sources (python_pkg)")
    ap.add_argument("--label", default="")
    ap.add_argument("--repeats", type=int, default=5, help="fresh processes per state")
    ap.add_argument("--states", nargs="+", choices=STATES, default=list(STATES))
    ap.add_argument("--timeout", type=float, default=90.0, help="per process, seconds")
    ap.add_argument("--target", type=float, default=TARGET_S, help="seconds, warm state")
    ap.add_argument(
        "--without-ipython",
        action="store_true",
        help="call the magic's function (line_magic.run_line) where IPython is missing",
    )
    ap.out(RESULTS / "magic-speed", type=Path)
    args = ap.parse_args(argv)

    # --src first; what PYTHONPATH held stays after it (IPython installed with --target, say).
    path = [str(args.src.resolve()), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
    if not args.without_ipython:
        why = has_ipython(args.python, env)
        if why is not None:
            print(
                f"magic_speed: IPython is missing: {why}.\n"
                "Install it (pip install ipython), or pass --without-ipython to time the "
                "magic's function without IPython (the results say so).",
                file=sys.stderr,
            )
            return 2
    # Bytecode cached as an installed package has it (this machine may forbid writing it):
    # gpusight compiled into its __pycache__ (ignored by git) before the first run.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    compileall.compile_dir(str(args.src.resolve() / "gpusight"), quiet=1, force=False)
    runs = run_states(args, env)
    by_state = {s: summarise(rs) for s, rs in runs.items()}
    text = table(by_state, args.target)
    warm = by_state.get("warm", {}).get("total_s")
    record = {
        **meta(),
        "label": args.label or "this tree",
        "src": str(args.src),
        "ipython": not args.without_ipython,
        "bytecode": "cached: gpusight compiled into __pycache__ before the first run",
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average": os.getloadavg(),
        },
        "repeats": args.repeats,
        "target_s": args.target,
        "meets_target": None if warm is None else warm <= args.target,
        "states": by_state,
        "runs": {state: [slim(r) for r in rs] for state, rs in runs.items()},
    }
    suffix = f"-{args.label}" if args.label else ""
    name = f"magic-speed{suffix}"
    write_results(args.out, name, record, text=text, table=f"{name}.txt")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
