"""The experiments, in the order :func:`plan` runs them.

Compute experiments (``compute_experiments``, ``batch_experiments``) run on a fixed set of cached
batches (the loader is not what they measure); loader experiments (``worker_sweep``,
``loader_experiments``) run a clone of the user's DataLoader (the loader is what they measure).
pin_memory, persistent_workers and prefetch_factor build on the num_workers sweep's winner, and
``LoaderTogether`` (key ``loader_combined``) measures the DataLoader settings that won together,
in one loader, against the user's. The interface they share is in ``experiment``.
"""

from __future__ import annotations

from .batch_experiments import BatchSize
from .compute_experiments import (
    COMPILE_MIN_S,
    CONV_TYPES,
    RNN_TYPES,
    TF32,
    Autocast,
    ChannelsLast,
    Compile,
    CudnnBenchmark,
    tf32_state,
)
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
from .worker_sweep import (
    NumWorkers,
    loader_workers,
    walk_sweep,
    whole_rounds,
    winner_block_s,
    worker_points,
)

# In the order they run within their group: the usual large, cheap wins first; the DataLoader
# winners together after every loader experiment; the batch size sweep (several points, each
# larger) and compile (minutes) last.
ALL: tuple[type[Experiment], ...] = (
    NumWorkers,
    PinMemory,
    DatasetOnDevice,
    PersistentWorkers,
    PrefetchFactor,
    LoaderTogether,
    Autocast,
    ChannelsLast,
    TF32,
    CudnnBenchmark,
    BatchSize,
    Compile,
)


def plan(ctx: Context, only: list[str] | None = None) -> list[Experiment]:
    """Experiments in the order to run them: the measured bottleneck's first, compile last."""
    exps = [cls() for cls in ALL if only is None or cls.key in only]
    loader_first = input_bound_gate(ctx) is None and bool(ctx.loader_base_ms)

    def rank(e: Experiment) -> tuple[int, int]:
        if isinstance(e, Compile):
            return (3, 0)
        order = ALL.index(type(e))
        if e.group == "loader":
            return (0 if loader_first else 1, order)
        return (1 if loader_first else 0, order)

    return sorted(exps, key=rank)


__all__ = [
    "ALL",
    "COMPILE_MIN_S",
    "CONV_TYPES",
    "LOADER_SETTINGS",
    "RNN_TYPES",
    "TF32",
    "TOGETHER_KEYS",
    "Autocast",
    "BatchSize",
    "ChannelsLast",
    "Compile",
    "CudnnBenchmark",
    "DatasetOnDevice",
    "Experiment",
    "LoaderTogether",
    "NumWorkers",
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
    "tf32_state",
    "together_change",
    "walk_sweep",
    "whole_rounds",
    "winner_block_s",
    "worker_points",
]
