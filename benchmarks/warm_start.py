"""One what-if re-run's wall, started fresh and forked from the warm start
(``rerun/warm_start.py``), on the driver's own runner, in turn.

    .venv/bin/python benchmarks/warm_start.py [--rounds 4]

Each round makes one runner a way (``ScriptRunner(..., warm=False|True)`` over a scratch copy,
as ``run --what-if`` makes it), runs the baseline, then three controls; the controls' walls and
measured steps are kept. Scripts: a 12-layer MLP (torch only), and two corpus scripts run on the
CPU, ``lightning_small_batch.py`` (Lightning's ``Trainer.fit``) and ``hf_trainer_defaults.py``
(transformers' ``Trainer``; it sets ``HF_HUB_OFFLINE`` before its imports, which the server sets
in its place). Prints the medians and writes benchmarks/results/warm-start.md.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from gpusight.commands.run import _rerun_env
from gpusight.rerun import overlay, sandbox
from gpusight.rerun.driver import ScriptRunner
from harness.cli import Parser
from harness.record import write_markdown
from rerun_exit import MLP

CORPUS = Path(__file__).resolve().parent / "corpus"
CONTROLS = 3


def round_of(folder: Path, script: str, args: list[str], warm: bool) -> list[tuple[float, float]]:
    """(wall s, step ms) of each control run of one runner."""
    here = os.getcwd()
    os.chdir(folder)
    box = sandbox.make(str(folder), prefix="gpusight-bench-")
    runner = ScriptRunner(script, args, steps=20, warmup=3, env=_rerun_env(), lean=True,
                          sandbox=box, warm=warm)  # fmt: skip
    try:
        base = runner("baseline", {}, False, 300.0)
        if not base.ok:
            raise SystemExit(f"{script}: the baseline failed: {base.error}")
        got = []
        for k in range(CONTROLS):
            res = runner(f"control {k}", {}, False, 300.0)
            if not res.ok:
                raise SystemExit(f"{script}: a control failed: {res.error}")
            got.append((res.wall_s, res.step_ms))
        if warm and (runner.warm is None or runner.warm.why is not None):
            raise SystemExit(f"{script}: no warm start: {runner.warm and runner.warm.why}")
        return got
    finally:
        runner.close()
        box.remove()
        overlay.remove(str(runner.tmp))
        shutil.rmtree(runner.tmp, ignore_errors=True)
        os.chdir(here)


def main() -> int:
    ap = Parser(__doc__)
    ap.rounds(4, help="runners of each script each way, taking turns")
    args = ap.parse_args()
    lines = [
        "| script | fresh run (s) | forked run (s) | saved | step fresh (ms) | step forked (ms) |",
        "|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "mlp.py").write_text(MLP)
        cases = [
            ("mlp (torch)", Path(tmp), "mlp.py"),
            ("lightning_small_batch", CORPUS, "lightning_small_batch.py"),
            ("hf_trainer_defaults", CORPUS, "hf_trainer_defaults.py"),
        ]
        for name, folder, script in cases:
            got: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
            for k in range(args.rounds):
                for warm in (False, True) if k % 2 == 0 else (True, False):
                    got[warm] += round_of(folder, script, [], warm)
            wall = {w: statistics.median(x[0] for x in v) for w, v in got.items()}
            step = {w: statistics.median(x[1] for x in v) for w, v in got.items()}
            lines.append(
                f"| {name} | {wall[False]:.2f} | {wall[True]:.2f} | "
                f"{wall[False] - wall[True]:.2f} s | {step[False]:.2f} | {step[True]:.2f} |"
            )
            print(name, {w: [(round(a, 2), round(b, 2)) for a, b in v] for w, v in got.items()},
                  flush=True)  # fmt: skip
    write_markdown(
        "warm-start.md", "One what-if re-run's wall, started fresh and forked from the warm start",
        f"this project's 2-core CPU machine (torch CPU build): medians over {args.rounds} runners "
        f"a way, taken in turn, of {CONTROLS} control runs each (a runner's first run, the "
        "baseline, starts fresh either way).", lines,
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
