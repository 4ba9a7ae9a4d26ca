#!/usr/bin/env python3
"""Soak of the live monitor, time-compressed: an hour of samples at 10 Hz (36,000 ticks) through
both rings, the kernel's (gpusight.jupyter.monitor.Sampler) and the browser's (src/sidebar's
MonitorStore, via its vitest soak spec). Memory must stop growing once the rings are full.

    .venv/bin/python benchmarks/monitor_soak.py        (from the repository root; needs npm ci)

Writes benchmarks/results/monitor-soak.json (or --out).
"""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from harness.cli import Parser
from harness.paths import PKG, RESULTS, ROOT, on_path
from harness.proc import run
from harness.record import git_commit

on_path(PKG)

from gpusight.jupyter.monitor import Sampler  # noqa: E402

HOUR_AT_10HZ = 36_000
CAPACITY = 3000
GPUS = 8  # an 8-GPU node: the largest tick a kernel sends


def group(i: int) -> list[dict[str, float | int | None]]:
    return [
        {
            "t": round(i / 10, 4),
            "gpu": g,
            "util_pct": float(i % 100),
            "mem_used_bytes": 40e9,
            "power_w": 400.0,
            "sm_clock_mhz": 1980.0,
            "pcie_rx_bps": 1e9 if i % 5 == 0 else None,
            "pcie_tx_bps": 1e8 if i % 5 == 0 else None,
            "cpu_pct": 100.0,
        }
        for g in range(GPUS)
    ]


def python_soak() -> dict[str, Any]:
    s = Sampler(hz=10, capacity=CAPACITY)
    checkpoints: list[dict[str, int]] = []
    tracemalloc.start()
    began = time.perf_counter()
    try:
        for i in range(HOUR_AT_10HZ):
            s.record(group(i))
            if (i + 1) % 6000 == 0 or i + 1 == CAPACITY:
                current, _ = tracemalloc.get_traced_memory()
                checkpoints.append({"ticks": i + 1, "traced_bytes": current, "ring": len(s)})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    elapsed = time.perf_counter() - began
    full = next(c for c in checkpoints if c["ticks"] == CAPACITY)["traced_bytes"]
    last = checkpoints[-1]["traced_bytes"]
    return {
        "ticks": HOUR_AT_10HZ,
        "gpus_per_tick": GPUS,
        "capacity": CAPACITY,
        "ring_len_after": len(s),
        "traced_bytes_when_full": full,
        "traced_bytes_after_hour": last,
        "growth_after_full_bytes": last - full,
        "growth_after_full_pct": round(100 * (last - full) / full, 3),
        "traced_peak_bytes": peak,
        "checkpoints": checkpoints,
        "ingest_s_with_tracemalloc": round(elapsed, 2),
        "python": platform.python_version(),
    }


def ts_soak() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "ts-soak.json"
        env = {**os.environ, "GPUSIGHT_SOAK_OUT": str(out)}
        cmd = ["npx", "vitest", "run", "src/sidebar/ring.soak.spec.ts"]
        done = run(cmd, 600, cwd=ROOT, env=env)
        if done.rc != 0:
            sys.stderr.write(done.stderr)
            raise SystemExit(f"{' '.join(cmd)} exited {done.rc}")
        data: dict[str, Any] = json.loads(out.read_text("utf-8"))
        return data


def main(argv: list[str] | None = None) -> int:
    parser = Parser(__doc__).out(str(RESULTS / "monitor-soak.json"), help="the JSON file")
    args = parser.parse_args(argv)
    py = python_soak()
    ts = ts_soak()
    result = {
        "command": ".venv/bin/python benchmarks/monitor_soak.py",
        "commit": git_commit(),
        "what": "an hour of monitor samples at 10 Hz (36,000 ticks), time-compressed, "
        "through the kernel's ring and the browser's",
        "python_sampler": py,
        "browser_store": ts,
        "bounded": py["ring_len_after"] == CAPACITY
        and py["growth_after_full_pct"] < 2
        and ts["ring_size_after"] == ts["capacity"]
        and ts["arrays_reallocated"] is False,
    }
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", "utf-8")
    print(
        f"python: ring {py['ring_len_after']}/{CAPACITY}, {py['traced_bytes_when_full']} B when "
        f"full, +{py['growth_after_full_bytes']} B ({py['growth_after_full_pct']} %) after "
        f"{HOUR_AT_10HZ} ticks\n"
        f"browser: ring {ts['ring_size_after']}/{ts['capacity']}, {ts['ring_bytes']} B of "
        f"arrays, reallocated: {ts['arrays_reallocated']}, ingest {ts['ingest_ms']} ms\n"
        f"bounded: {result['bounded']}"
    )
    return 0 if result["bounded"] else 1


if __name__ == "__main__":
    sys.exit(main())
