"""The experiments, in the order :func:`plan` runs them.

Compute experiments (a knob's arm timed by ``procedures.OnCached``, and ``batch_experiments``)
run on a fixed set of cached batches (the loader is not what they measure); loader experiments
(``worker_sweep``, ``loader_experiments``) run a clone of the user's DataLoader (the loader is
what they measure).
pin_memory, persistent_workers and prefetch_factor build on the num_workers sweep's winner, and
``LoaderTogether`` (key ``loader_combined``) measures the DataLoader settings that won together,
in one loader, against the user's. The interface they share is in ``experiment``.
"""

from __future__ import annotations

from ..knobs import REGISTRY
from .batch_experiments import BatchSize
from .context import Context
from .experiment import Experiment, Outcome, cpu_cores, input_bound_gate, outcome_of
from .loader_experiments import (
    LOADER_SETTINGS,
    TOGETHER_KEYS,
    DatasetOnDevice,
    LoaderTogether,
    PersistentWorkers,
    PinMemory,
    PrefetchFactor,
    loader_together,
    together_change,
)
from .procedures import OnCached
from .worker_sweep import (
    NumWorkers,
    loader_workers,
    walk_sweep,
    whole_rounds,
    winner_block_s,
    worker_points,
)

# In the order they run within their group: the usual large, cheap wins first; the DataLoader
# winners together after every loader experiment; the knobs measured on cached batches in the
# registry's order (channels_last before TF32: under autocast TF32 reaches little, and on the
# H200 its run took the budget that channels_last needed); the batch size sweep (several points,
# each larger); what takes a fixed start-up (compiling) last.
ALL: tuple[Experiment, ...] = (
    NumWorkers(),
    PinMemory(),
    DatasetOnDevice(),
    PersistentWorkers(),
    PrefetchFactor(),
    LoaderTogether(),
    *(OnCached(knob) for knob in REGISTRY if knob.local_finding),
    BatchSize(),
)


def plan(ctx: Context, only: list[str] | None = None) -> list[Experiment]:
    """Experiments in the order to run them: the measured bottleneck's first, compile last."""
    exps = [e for e in ALL if only is None or e.key in only]
    loader_first = input_bound_gate(ctx) is None and bool(ctx.loader_base_ms)

    def rank(e: Experiment) -> tuple[int, int]:
        if e.startup_s:
            return (3, 0)
        order = ALL.index(e)
        if e.group == "loader":
            return (0 if loader_first else 1, order)
        return (1 if loader_first else 0, order)

    return sorted(exps, key=rank)


__all__ = [
    "ALL",
    "LOADER_SETTINGS",
    "TOGETHER_KEYS",
    "BatchSize",
    "DatasetOnDevice",
    "Experiment",
    "LoaderTogether",
    "NumWorkers",
    "OnCached",
    "Outcome",
    "PersistentWorkers",
    "PinMemory",
    "PrefetchFactor",
    "cpu_cores",
    "input_bound_gate",
    "loader_together",
    "loader_workers",
    "outcome_of",
    "plan",
    "together_change",
    "walk_sweep",
    "whole_rounds",
    "winner_block_s",
    "worker_points",
]
