"""What every workload rule reads from the step's evidence, worked out once (``StepView``)."""

from __future__ import annotations

from dataclasses import dataclass

from .stalls import Stall
from .workload_evidence import (
    GpuWindow,
    LoaderInfo,
    Placement,
    WorkloadEvidence,
    ran_on_gpu,
    stall_of,
    step_time,
)
from .workload_impacts import pct


@dataclass
class StepView:
    """The evidence with what every rule reads from it, worked out once."""

    ev: WorkloadEvidence
    split: dict[str, float]
    total: float
    """The mean steady step (ms)."""
    share: dict[str, float]
    """Each category's share of ``total`` (%)."""
    gpu_run: bool
    busy: float | None
    """The compute share where the steps ran on a GPU."""
    p: Placement
    w: GpuWindow | None
    stall: Stall | None
    batch: int | None
    """The batch in the script's items (``step_batch``)."""
    n_steps: int

    @classmethod
    def of(cls, ev: WorkloadEvidence, split: dict[str, float]) -> StepView:
        total = step_time(ev)
        share = {k: pct(v, total) for k, v in split.items()}
        gpu_run = ran_on_gpu(ev)
        p = ev.placement or Placement()
        return cls(
            ev=ev,
            split=split,
            total=total,
            share=share,
            gpu_run=gpu_run,
            busy=share["compute"] if gpu_run else None,
            p=p,
            w=ev.window,
            stall=stall_of(ev),
            batch=step_batch(p, ev.loader),
            n_steps=max(1, len(ev.step_times_ms)),
        )


def step_batch(p: Placement, loader: LoaderInfo | None) -> int | None:
    """The batch in the script's items: the model's leading input size where its inputs are
    batch-first, else the loader's batch (graphs, not their nodes)."""
    ld = loader.batch_size if loader is not None else None
    if ld and (p.batch_size is None or p.batch_first is False):
        return ld
    return p.batch_size or ld
