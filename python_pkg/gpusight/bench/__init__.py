"""Hardware ceilings: what this machine can do, measured, against what it should do.

- :func:`run_all` runs every hardware benchmark within a time budget (CPU matmul; GPU matmul per
  precision, host<->device copies, device copies, launch and sync cost) and returns
  :class:`~gpusight.report.Benchmark` rows; :func:`build_report` wraps them in a
  ``Report(kind="bench")`` with machine facts and ``hw.*`` findings.
- :func:`loader` benchmarks a DataLoader or Dataset across worker settings.

Progress callbacks have the signature ``progress(stage: str, fraction: float)``. Importing this
package does not import torch; each benchmark does, when it runs.
"""

from __future__ import annotations

from .dataloader import loader
from .findings import bench_findings
from .progress import Progress
from .suite import build_report, run_all

__all__ = ["Progress", "bench_findings", "build_report", "loader", "run_all"]
