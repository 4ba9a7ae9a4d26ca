"""The kernel's rows, from the knobs' registry, in the order :func:`plan` runs them.

Every knob's in-process rows (``Knob.local_rows``), each timed by the procedure it names
(``procedures``): compute knobs on a fixed set of cached batches (the loader is not what they
measure), the DataLoader's settings on a clone of the user's DataLoader (the loader is what they
measure). pin_memory, persistent_workers and prefetch_factor build on the num_workers sweep's
winner, and ``LoaderTogether`` (key ``loader_combined``) measures the DataLoader settings that
won together, in one loader, against the user's; then the batch size sweep (``batch_sweep``).
"""

from __future__ import annotations

from ..knobs import REGISTRY
from ..knobs.base import Knob, LocalRow
from .batch_sweep import BatchSweep
from .context import Context
from .procedures import (
    EpochStart,
    Experiment,
    KnobRow,
    LoaderSweep,
    LoaderTogether,
    OnCached,
    OnLoader,
    input_bound_gate,
)


def local_experiment(knob: Knob, row: LocalRow) -> Experiment:
    """The procedure that measures ``row`` of ``knob`` in the kernel."""
    kinds: dict[str, type[KnobRow]] = {
        "cached": OnCached,
        "loader": OnLoader,
        "epoch_start": EpochStart,
        "sweep": LoaderSweep,
        "batch_sweep": BatchSweep,
    }
    return kinds[row.procedure](knob, row)


# In the registry's order within their group: the DataLoader's workers first (the usual large,
# cheap win), its other settings on the winner, the winners together after every loader row;
# the knobs measured on cached batches (channels_last before TF32: under autocast TF32 reaches
# little, and on the H200 its run took the budget that channels_last needed); the batch size
# sweep (several points, each larger); what takes a fixed start-up (compiling) last.
_ROWS = [local_experiment(knob, row) for knob in REGISTRY for row in knob.local_rows()]
ALL: tuple[Experiment, ...] = (
    *(e for e in _ROWS if e.group == "loader"),
    LoaderTogether(),
    *(e for e in _ROWS if e.group != "loader" and not isinstance(e, BatchSweep)),
    *(e for e in _ROWS if isinstance(e, BatchSweep)),
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
