"""Reports for the HTML export tests, built with the report dataclasses (no GPU needed).

``typical_report()`` is a diagnosed training run as `gpusight run` writes it on one H200: a minute
of NVML samples at 10 Hz, 200 step times, the step-time breakdown, three findings with evidence
and fixes, two what-ifs, four benchmarks and the checklist. ``fixed_report()`` is the same run
after pinning the DataLoader's memory. Both are also used by benchmarks/html_size.py.
"""

from __future__ import annotations

import math
from typing import Any

from gpusight.report import (
    Benchmark,
    Check,
    Evidence,
    Finding,
    Fix,
    Impact,
    Report,
    SourceLine,
    Verdict,
    WhatIf,
)

GIB = 1 << 30


def machine() -> dict[str, Any]:
    return {
        "hostname": "gpu-node-07",
        "platform": "Linux-6.8.0-49-generic-x86_64-with-glibc2.36",
        "python": "3.11.2",
        "cpu_count": 16,
        "memory_total_bytes": 128 * GIB,
        "shm_bytes": 64 * GIB,
        "torch": {
            "version": "2.13.0+cu130",
            "cuda": "13.0",
            "cuda_available": True,
            "device_count": 1,
        },
        "driver_version": "580.95.05",
        "driver_cuda_version": "13.0",
        "gpus": [
            {
                "index": 0,
                "name": "NVIDIA H200",
                "capability": "9.0",
                "memory_total_bytes": 141 * GIB,
                "power_limit_w": 700,
            }
        ],
    }


def timeline(seconds: float = 60.0, hz: float = 10.0) -> list[dict[str, Any]]:
    samples = []
    for i in range(int(seconds * hz)):
        t = round(i / hz, 3)
        util = 38 + 30 * math.sin(i / 7) ** 2
        samples.append(
            {
                "t": t,
                "gpu": 0,
                "util_pct": round(util, 1),
                "mem_used_bytes": 20 * GIB + (i % 50) * (1 << 20),
                "power_w": round(180 + util, 1),
                "sm_clock_mhz": 1980,
                "pcie_rx_bps": 5_100_000_000,
                "pcie_tx_bps": 12_000_000,
                "cpu_pct": 97.5,
            }
        )
    return samples


def _run(step_ms: float, breakdown: dict[str, float], busy: float) -> dict[str, Any]:
    steps = 200
    return {
        "label": "train_step",
        "steps": steps,
        "warmup_steps": 5,
        "step_time_ms": step_ms,
        "step_time_spread_ms": [round(step_ms * 0.98, 2), round(step_ms * 1.03, 2)],
        "step_times_ms": [round(step_ms * (1 + 0.02 * math.sin(i)), 3) for i in range(steps)],
        "step_starts_s": [round(i * step_ms / 1000, 4) for i in range(steps)],
        "breakdown_ms": breakdown,
        "gpu_busy_pct": busy,
        "timeline": timeline(),
        "peak_memory_bytes": 22 * GIB,
        "memory_capacity_bytes": 141 * GIB,
    }


def _findings() -> list[Finding]:
    return [
        Finding(
            id="code.pageable_copy",
            severity="critical",
            title="non_blocking copies from pageable memory block the host",
            detail="A non_blocking copy from pageable memory is synchronous.",
            evidence=[
                Evidence(
                    "copy time per step",
                    26.4,
                    "ms",
                    SourceLine("train.py", 42, "x = x.to('cuda', non_blocking=True)", 200),
                ),
                Evidence("pinned", False),
            ],
            impact=Impact("measured", "1.41x faster steps with pin_memory=True.", 1.41, 29.1),
            fix=Fix(
                "Pin the DataLoader's memory.",
                "pin_memory",
                "loader = DataLoader(dataset, batch_size=64, num_workers=8, pin_memory=True)",
                "python",
            ),
            gpu_index=0,
        ),
        Finding(
            id="cfg.tf32_disabled",
            severity="warn",
            title="TF32 is off for float32 matmuls",
            evidence=[Evidence("allow_tf32", False)],
            impact=Impact("estimated", "matmuls up to 2x faster.", None, None),
            fix=Fix(
                "Allow TF32.", "tf32", "torch.backends.cuda.matmul.allow_tf32 = True", "python"
            ),
        ),
        Finding(
            id="load.input_bound",
            severity="info",
            title="The GPU sometimes waits for the next batch",
            evidence=[Evidence("data wait per step", 2.1, "ms")],
            impact=Impact("estimated", "up to 2.5% of step time.", None, 2.5),
            fix=Fix("Use more DataLoader workers.", "num_workers", None, None),
        ),
    ]


def typical_report() -> Report:
    return Report(
        kind="diagnose",
        title="resnet50 training step, batch 64",
        created_at="2026-03-02T10:21:37+00:00",
        machine=machine(),
        checks=[
            Check("torch", "PyTorch", "pass", "2.13.0+cu130"),
            Check("cuda", "CUDA available to PyTorch", "pass", "yes, 1 device"),
            Check("tf32", "TF32 matmuls", "warn", "off", finding_id="cfg.tf32_disabled"),
            Check("shm", "/dev/shm", "pass", "64 GiB"),
        ],
        benchmarks=[
            Benchmark(
                "matmul.bf16",
                "bf16 matmul 8192^3",
                712.4,
                "TFLOP/s",
                989.5,
                "NVIDIA H200 datasheet",
                (705.1, 718.9),
                20,
            ),
            Benchmark(
                "h2d.pinned",
                "Host to device copy, pinned",
                54.8,
                "GB/s",
                63.0,
                "PCIe gen5 x16",
                series=[{"x": 2**k, "y": 54.8 * (1 - 2 ** (-k / 4))} for k in range(10, 28)],
            ),
            Benchmark("h2d.pageable", "Host to device copy, pageable", 5.1, "GB/s", 63.0),
            Benchmark("launch", "Kernel launch", 4.1, "us"),
        ],
        verdict=Verdict(
            "memory_transfer",
            37.8,
            "The GPU waits on host-to-device copies from pageable memory: 26 ms of every 84 ms.",
        ),
        findings=_findings(),
        what_if=[
            WhatIf("DataLoader(pin_memory=True)", 84.2, 59.7, 1.41, "code.pageable_copy"),
            WhatIf(
                "batch size sweep",
                84.2,
                None,
                None,
                "load.small_batch",
                skipped="out of memory at batch 512",
                series=[{"x": 64, "y": 84.2}, {"x": 128, "y": 151.0}],
            ),
        ],
        run=_run(
            84.2,
            {
                "compute": 31.8,
                "data_wait": 2.1,
                "copy": 26.4,
                "sync_stall": 19.6,
                "launch_overhead": 1.9,
                "other_cpu": 2.4,
            },
            37.8,
        ),
        notes=["nvcc not found: toolkit version not checked"],
    )


def fixed_report() -> Report:
    """The same run after pin_memory=True: copies overlap, TF32 still off, a new finding."""
    report = typical_report()
    report.created_at = "2026-03-02T11:05:12+00:00"
    report.title = "resnet50 training step, batch 64, pinned"
    report.run = _run(
        42.1,
        {
            "compute": 31.8,
            "data_wait": 2.1,
            "copy": 0.4,
            "sync_stall": 1.0,
            "launch_overhead": 1.9,
            "other_cpu": 2.4,
        },
        81.5,
    )
    report.verdict = Verdict("compute", 81.5, "The GPU is busy: compute takes 76% of each step.")
    report.findings = [f for f in report.findings if f.id != "code.pageable_copy"]
    report.findings.append(
        Finding(
            id="load.amp_unused",
            severity="warn",
            title="Mixed precision is not used",
            impact=Impact("estimated", "bf16 autocast: up to 2x faster matmuls.", None, None),
            fix=Fix("Use torch.autocast.", None, None, None),
        )
    )
    report.what_if = []
    return report
