#!/usr/bin/env python3
"""GPU check of the sidebar's live monitor: the Sampler at 10 Hz during a real training run with
idle phases (idle 2 s, train 4 s, idle 2 s, train 4 s). Utilisation must rise in each training
phase and fall in each idle one, and the samples must keep coming while Python is busy training.

Writes OUT/monitor-samples.json (every tick, the phases, the GPUs) and OUT/monitor-table.txt (the
summary table, also printed). Exit status 1 if the phases do not show in the samples.

    PYTHONPATH=python_pkg python3 benchmarks/gpu_monitor.py --out "$OUT"

Needs torch with CUDA, nvidia-ml-py and psutil; not IPython, ipykernel or comm (the monitor
module imports none of them).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
from gpusight.jupyter.monitor import Sampler, Tick
from harness.cli import Parser
from harness.record import git_commit, note
from harness.table import cell

HZ = 10.0
PHASES = (("idle", 2.0), ("train", 4.0), ("idle", 2.0), ("train", 4.0))
SETTLE_S = 0.5
"""NVML's utilisation averages over its own window: the first 0.5 s of a phase is skipped."""
RISE_PCT = 40.0
"""A training phase must average this many points above the idle phases (settled samples)."""


def build_model(device: torch.device) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    width = 4096
    model = torch.nn.Sequential(
        *[m for _ in range(8) for m in (torch.nn.Linear(width, width), torch.nn.GELU())],
        torch.nn.Linear(width, 1000),
    ).to(device)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4)


def train_for(
    seconds: float, model: torch.nn.Module, opt: torch.optim.Optimizer, device: torch.device
) -> int:
    """Training steps until `seconds` have passed (synchronised, so the GPU work is inside)."""
    x = torch.randn(4096, 4096, device=device)
    y = torch.randint(0, 1000, (4096,), device=device)
    loss_fn = torch.nn.CrossEntropyLoss()
    end = time.perf_counter() + seconds
    steps = 0
    while True:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        steps += 1
        if steps % 4 == 0:
            torch.cuda.synchronize(device)
            if time.perf_counter() >= end:
                return steps


def idle_for(seconds: float) -> None:
    time.sleep(seconds)


def nvml_index(gpus: list[dict[str, Any]], device: torch.device) -> int:
    """NVML's index of the GPU torch trains on (NVML ignores CUDA_VISIBLE_DEVICES): by UUID."""
    uuid = str(getattr(torch.cuda.get_device_properties(device), "uuid", "") or "").lower()
    for g in gpus:
        if uuid and str(g.get("uuid") or "").lower().removeprefix("gpu-") == uuid:
            return int(g["index"])
    return int(gpus[0]["index"])


def phase_stats(ticks: list[Tick], start: float, end: float, gpu: int) -> dict[str, Any]:
    def values(key: str, lo: float) -> list[float]:
        out = []
        for t in ticks:
            if lo <= t["t"] < end:
                for g in t["gpus"]:
                    if g["gpu"] == gpu and isinstance(g.get(key), (int, float)):
                        out.append(float(g[key]))
        return out

    util_all = values("util_pct", start)
    util = values("util_pct", start + SETTLE_S)
    power = values("power_w", start + SETTLE_S)
    mem = values("mem_used_bytes", start + SETTLE_S)
    n_ticks = sum(1 for t in ticks if start <= t["t"] < end)
    return {
        "ticks": n_ticks,
        "util_mean": statistics.fmean(util_all) if util_all else None,
        "util_settled_mean": statistics.fmean(util) if util else None,
        "util_max": max(util_all) if util_all else None,
        "power_w_mean": statistics.fmean(power) if power else None,
        "mem_gib_mean": statistics.fmean(mem) / 2**30 if mem else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = Parser(__doc__).out(os.environ.get("OUT", "benchmarks/results/gpu-local"))
    args = parser.parse_args(argv)
    out = Path(args.out)
    note(out)

    if not torch.cuda.is_available():
        print("gpu_monitor: no CUDA device: this check needs a GPU", file=sys.stderr)
        return 2
    device = torch.device("cuda", torch.cuda.current_device())
    sampler = Sampler(hz=HZ, capacity=36_000)
    gpus, reason = sampler.inventory()
    if not gpus:
        print(f"gpu_monitor: the monitor sees no GPU: {reason}", file=sys.stderr)
        return 2
    gpu = nvml_index(gpus, device)

    model, opt = build_model(device)
    train_for(1.0, model, opt, device)  # warm-up: kernels chosen, memory allocated
    torch.cuda.synchronize(device)

    phases: list[dict[str, Any]] = []
    sampler.start()
    child = sampler.child_pid  # the sampler process's (None: a thread of this process samples)
    wall0 = time.perf_counter()
    try:
        for name, seconds in PHASES:
            start = sampler.now()
            steps = train_for(seconds, model, opt, device) if name == "train" else 0
            if name == "idle":
                idle_for(seconds)
            phases.append({"phase": name, "start": start, "end": sampler.now(), "steps": steps})
    finally:
        sampler.stop()
    wall = time.perf_counter() - wall0

    ticks = sampler.ticks()
    for p in phases:
        p.update(phase_stats(ticks, p["start"], p["end"], gpu))

    idle_mean = statistics.fmean(
        p["util_settled_mean"]
        for p in phases
        if p["phase"] == "idle" and p["util_settled_mean"] is not None
    )
    checks = {
        "ticks_per_s": len(ticks) / wall,
        # As in a kernel: NVML read in a child process, not a thread of the training process.
        "sampled_in_a_process": child is not None and sampler.fallback is None,
        "every_phase_sampled": all(
            p["ticks"] >= 0.8 * HZ * (p["end"] - p["start"]) for p in phases
        ),
        "train_rises": all(
            p["util_settled_mean"] is not None and p["util_settled_mean"] >= idle_mean + RISE_PCT
            for p in phases
            if p["phase"] == "train"
        ),
        "idle_falls": all(
            p["util_settled_mean"] is not None and p["util_settled_mean"] <= 10.0
            for p in phases
            if p["phase"] == "idle"
        ),
    }

    lines = [
        f"gpusight monitor on {gpus[0]['name']} (NVML GPU {gpu}), {HZ:g} Hz, "
        f"{len(ticks)} ticks in {wall:.1f} s ({checks['ticks_per_s']:.1f}/s), "
        f"sampler errors {sampler.errors}",
        f"sampled in: {'a process (pid ' + str(child) + ')' if child else 'a thread'}"
        f"{'; fallback: ' + sampler.fallback if sampler.fallback else ''}",
        "",
        f"{'phase':<7} {'from s':>7} {'to s':>7} {'ticks':>5} {'steps':>5} "
        f"{'util mean':>9} {'settled':>8} {'max':>5} {'power W':>8} {'mem GiB':>8}",
    ]
    for p in phases:
        lines.append(
            f"{p['phase']:<7} {p['start']:>7.2f} {p['end']:>7.2f} {p['ticks']:>5} {p['steps']:>5} "
            f"{cell(p['util_mean'], '>8.1f')}% {cell(p['util_settled_mean'], '>7.1f')}% "
            f"{cell(p['util_max'], '>4.0f')}% {cell(p['power_w_mean'], '>8.0f')} "
            f"{cell(p['mem_gib_mean'], '>8.2f')}"
        )
    lines.append("")
    for key, ok in checks.items():
        if key != "ticks_per_s":
            lines.append(f"{key:<20} {'ok' if ok else 'FAILED'}")
    table = "\n".join(lines) + "\n"
    print(table, end="")
    (out / "monitor-table.txt").write_text(table, "utf-8")
    (out / "monitor-samples.json").write_text(
        json.dumps(
            {
                "command": "PYTHONPATH=python_pkg python3 benchmarks/gpu_monitor.py --out $OUT",
                "commit": git_commit(),
                "hz": HZ,
                "gpus": gpus,
                "torch": torch.__version__,
                "cuda": torch.version.cuda,
                "device": torch.cuda.get_device_name(device),
                "phases": phases,
                "checks": checks,
                "ticks": ticks,
            },
            indent=1,
        ),
        "utf-8",
    )
    ok = all(v for k, v in checks.items() if k != "ticks_per_s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
