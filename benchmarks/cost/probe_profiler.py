"""Does a launch-bound step stay slower after a short ``torch.profiler`` window has ended?

    python3 benchmarks/watch_cost.py --method probe-profiler   # each setting, a process each

No gpusight here: one model (``scenarios/mlp_adam.py``'s, on the GPU), blocks of steps timed
with the host clock (a sync at each block's end), before and after a profiler window of a few
steps with the settings the watch uses (CPU + CUDA activities, ``record_shapes``). Torch's
profiler leaves CUPTI's callbacks on after it stops unless CUPTI is torn down
(``TEARDOWN_CUPTI``; pytorch/pytorch#144455): every later kernel launch then pays for them. Each
setting runs in a process of its own (CUPTI's state is per process): default environment, and
``TEARDOWN_CUPTI=1``, and ``TEARDOWN_CUPTI=1`` set only around the window (as
``gpusight/watch/profiler_window.py`` does). Prints the median step of each block and
after / before - 1.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from itertools import pairwise

from harness.cli import Parser
from harness.paths import BENCHMARKS, SCENARIOS, on_path
from harness.proc import run

BLOCKS = 3
BLOCK_STEPS = 300


def child() -> dict[str, object]:
    on_path(SCENARIOS)
    import torch
    import torch.nn.functional as F
    from mlp_adam import Net
    from torch.profiler import ProfilerActivity, profile

    dev = torch.device("cuda")
    model = Net(512).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    xs = torch.randn(8, 32, 512, device=dev)
    ys = torch.randint(0, 10, (8, 32), device=dev)

    def steps(n: int) -> list[float]:
        ts = [time.perf_counter()]
        for i in range(n):
            loss = F.cross_entropy(model(xs[i % 8]), ys[i % 8])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            ts.append(time.perf_counter())
        torch.cuda.synchronize()
        return [(b - a) * 1000 for a, b in pairwise(ts)]

    steps(100)
    before = [statistics.median(steps(BLOCK_STEPS)) for _ in range(BLOCKS)]
    prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True)
    around = os.environ.get("PROBE_AROUND") == "1"
    if around:  # as the watch does: asked for just before the start, given back after the stop
        os.environ["TEARDOWN_CUPTI"] = "1"
    prof.start()
    window = steps(3)
    prof.stop()
    if around:
        del os.environ["TEARDOWN_CUPTI"]
    after = [statistics.median(steps(BLOCK_STEPS)) for _ in range(BLOCKS)]
    return {
        "TEARDOWN_CUPTI": "1 around the window" if around else os.environ.get("TEARDOWN_CUPTI"),
        "before_ms": before,
        "window_ms": window,
        "after_ms": after,
        "after_vs_before_pct": 100 * (statistics.median(after) / statistics.median(before) - 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = Parser(__doc__)
    ap.add_argument("--child", action="store_true", help="(one setting's process)")
    if ap.parse_args(argv).child:
        print("PROBE " + json.dumps(child()), flush=True)
        return 0
    rows = []
    for setting in (None, "1", "around"):
        env = dict(os.environ)
        env.pop("TEARDOWN_CUPTI", None)
        if setting == "around":
            env["PROBE_AROUND"] = "1"
        elif setting is not None:
            env["TEARDOWN_CUPTI"] = setting
        entry = str(BENCHMARKS / "watch_cost.py")
        p = run([sys.executable, entry, "--method", "probe-profiler", "--child"], None, env=env)
        line = [x for x in p.stdout.splitlines() if x.startswith("PROBE ")]
        if p.rc or not line:
            print(p.stderr[-2000:], file=sys.stderr)
            return 1
        rows.append(json.loads(line[0][6:]))
    for r in rows:
        print(
            f"TEARDOWN_CUPTI={r['TEARDOWN_CUPTI'] or '(unset)':20} before "
            f"{[round(x, 3) for x in r['before_ms']]} ms, after "
            f"{[round(x, 3) for x in r['after_ms']]} ms: {r['after_vs_before_pct']:+.1f} %"
        )
    return 0
