"""Shared by the scenarios: arguments, device choice, and the scenario's own step timing.

Each scenario is a standalone training or inference script with one planted bottleneck; its
module-level ``LABEL`` says what, ``EXPECTED`` what gpusight should report, and ``--fix`` applies
the fix. Synthetic data only, nothing downloaded. On a machine without CUDA they run on the
CPU at toy sizes (the GPU-specific bottlenecks then do not exist; ``REQUIRES_CUDA`` says so).

The scenario times itself (host time between step ends, after ``--warmup`` steps) and prints
one line ``SCENARIO_RESULT {json}`` when it ends, also when ``gpusight run --steps`` ends it
early: ``median_step_ms`` (the typical gap between steps: ``benchmarks/accuracy.py`` compares it
with and without gpusight) and ``mean_step_ms`` (the timed steps' total time over their count:
the throughput, what ``benchmarks/gpu_whatif.py`` compares; a loader with workers delivers
batches in bursts, so the median gap is not its throughput). ``--step-log FILE`` writes every
step's time as well (``benchmarks/watch_cost.py`` reads it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from types import TracebackType

import torch


def parse_args(doc: str | None, iters: int = 30) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0])
    p.add_argument("--fix", action="store_true", help="apply the fix for the planted bottleneck")
    p.add_argument("--iters", type=int, default=iters, help="steps to run")
    p.add_argument("--warmup", type=int, default=5, help="steps the scenario's own timing skips")
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    p.add_argument(
        "--batch",
        type=int,
        default=None,
        help="the batch (or requests per forward) to use instead of the scenario's own: the "
        "fix at another size, as a what-if measured it",
    )
    p.add_argument(
        "--workers", type=int, default=None, help="DataLoader workers instead of the scenario's"
    )
    p.add_argument(
        "--compile",
        choices=("default", "reduce-overhead"),
        default=None,
        help="torch.compile the model in this mode (the compile what-if's truth; raise "
        "--warmup past the compiling steps)",
    )
    p.add_argument(
        "--step-log",
        default=None,
        help="write every step's time (ms, warm-up included) to this JSON file: the outside "
        "clock that benchmarks/watch_cost.py compares a watched run with",
    )
    return p.parse_args()


def compiled(model: torch.nn.Module, args: argparse.Namespace) -> torch.nn.Module:
    """The model as ``--compile`` asks: ``torch.compile(model, mode=...)``, as a user would."""
    if not getattr(args, "compile", None):
        return model
    return torch.compile(model, mode=args.compile)  # type: ignore[return-value]


def pick_device(name: str | None) -> torch.device:
    if name:
        return torch.device(name)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Steps:
    """``with Steps(name, args, samples) as s: ... s.mark()`` after each step."""

    def __init__(
        self, name: str, args: argparse.Namespace, device: torch.device, samples: int
    ) -> None:
        self.name = name
        self.args = args
        self.device = device
        self.samples = samples
        self.ends: list[float] = []

    def __enter__(self) -> Steps:
        self.ends = [time.perf_counter()]
        return self

    def mark(self) -> None:
        self.ends.append(time.perf_counter())

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # No device sync here: under `gpusight run --steps` this runs while the watch unwinds.
        times = [(b - a) * 1000 for a, b in zip(self.ends, self.ends[1:], strict=False)]
        timed = times[self.args.warmup :] or times
        median = statistics.median(timed) if timed else None
        mean = sum(timed) / len(timed) if timed else None
        result = {
            "scenario": self.name,
            "fix": bool(self.args.fix),
            "device": str(self.device),
            "steps": len(times),
            "median_step_ms": round(median, 4) if median else None,
            "mean_step_ms": round(mean, 4) if mean else None,
            "samples_per_step": self.samples,
            "samples_per_s": round(self.samples / median * 1000, 1) if median else None,
        }
        print("SCENARIO_RESULT " + json.dumps(result), flush=True)
        log = getattr(self.args, "step_log", None)
        if log:
            with open(log, "w", encoding="utf-8") as f:
                json.dump({"scenario": self.name, "step_ms": [round(t, 5) for t in times]}, f)
