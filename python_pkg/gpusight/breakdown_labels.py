"""The parts of a step in words, as the terminal and the comparison name them (the widget's
are in src/charts/breakdown.ts)."""

from __future__ import annotations

BREAKDOWN_LABELS = {
    "compute": "GPU compute",
    "data_wait": "Waiting for data",
    "copy": "Host-device copies",
    "sync_stall": "Sync stalls",
    "launch_overhead": "Kernel launch overhead",
    "other_cpu": "Other CPU work",
    "communication": "Communication",
    "between_steps": "Between steps (evaluation, checkpoints, epoch starts)",
}
