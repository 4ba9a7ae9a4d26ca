"""What a what-if's injection (``gpusight run --inject``) costs a launch-bound forward, on any CPU.

    PYTHONPATH=python_pkg python3 benchmarks/watch_cost.py --method inject
    PYTHONPATH=python_pkg python3 benchmarks/watch_cost.py --method inject --against 0e4fcaf

A what-if that changes the model (``replicate``, ``autocast``, ``channels_last``, ``tf32``) runs
the script with hooks that find the model and apply the change; its baseline runs without them.
What the hooks cost the changed run is read as part of the change: a gain measured short. Here
a 20-module MLP's forward (batch 8, 64 wide, one thread: torch's dispatch is most of it) runs in
blocks, bare and with ``{"tf32": true}`` injected (a flag, no change to the CPU's work), the
order rotated each round; the figure is the median of the loop thread's CPU time a forward.
``--against REV`` adds the same with ``rerun/inject.py`` as it was at git revision REV.
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from harness.cli import Parser
from harness.order import rotated
from harness.paths import PKG, ROOT, on_path
from harness.proc import run

on_path(PKG)


def inject_at(rev: str) -> ModuleType:
    """``gpusight/rerun/inject.py`` as it was at ``rev``, loaded beside today's."""
    shown = run(["git", "show", f"{rev}:python_pkg/gpusight/rerun/inject.py"], 60, cwd=ROOT)
    if shown.rc != 0:
        raise SystemExit(f"git show {rev}: {shown.stderr.strip()}")
    src = shown.stdout
    path = Path(f"/tmp/gpusight-inject-{rev}.py")
    path.write_text(src, "utf-8")
    name = f"gpusight.rerun.inject_{rev}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def main(argv: list[str] | None = None) -> int:
    ap = Parser(__doc__).rounds(30)
    ap.add_argument("--calls", type=int, default=1000, help="forwards a block")
    ap.add_argument("--against", default=None, help="a git revision's inject.py beside today's")
    args = ap.parse_args(argv)
    import torch
    from gpusight.rerun import inject

    threads = torch.get_num_threads()
    # The injection sets TF32 for the rest of its process (a what-if's own); put back here.
    precision = torch.get_float32_matmul_precision()
    tf32 = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.set_num_threads(1)
    layers: list[Any] = []
    for _ in range(9):
        layers += [torch.nn.Linear(64, 64), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(64, 10))
    x = torch.randn(8, 64)
    variants: dict[str, ModuleType | None] = {"bare": None, "injected": inject}
    if args.against:
        variants[f"at {args.against}"] = inject_at(args.against)
    times: dict[str, list[float]] = {k: [] for k in variants}
    names = list(variants)
    try:
        with torch.inference_mode():
            for _ in range(100):
                model(x)
            for r in range(args.rounds):
                for name in rotated(names, r):
                    mod = variants[name]
                    inj = mod.install({"tf32": True}) if mod is not None else None
                    try:
                        model(x)  # the first call finds the model (warm-up, unchanged)
                        t0 = time.thread_time_ns()
                        for _ in range(args.calls):
                            model(x)
                        times[name].append((time.thread_time_ns() - t0) / args.calls / 1e3)
                    finally:
                        if inj is not None:
                            inj.undo()
    finally:
        torch.set_num_threads(threads)
        torch.set_float32_matmul_precision(precision)
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32
    bare = times["bare"]
    print(f"injection cost on a 20-module forward ({torch.__version__}), {args.rounds} rounds")
    for name, ts in times.items():
        extra = statistics.median(t - b for t, b in zip(ts, bare, strict=True))
        print(f"{name:<16} {statistics.median(ts):8.1f} us a forward  {extra:+7.1f} us vs bare")
    return 0
