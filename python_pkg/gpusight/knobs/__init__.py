"""The changes a what-if measures, one module per knob, and the registry that holds them.

Each knob (``base.Knob``) holds its facts, arms and sweep points, how it takes effect in a re-run
of the unmodified script or cell, how the re-run shows it took effect, its finding and its fix.
``rerun/`` plans, injects and reports through this registry; ``gain_rule`` is the one rule for
what counts as a gain.
"""

from __future__ import annotations

from typing import Any

from .accumulation import Accumulation
from .autocast import Autocast
from .base import Arm, Group, Knob, Situation
from .batch import Batch
from .channels_last import ChannelsLast
from .compile import Compile
from .cudnn_benchmark import CudnnBenchmark
from .dataset_on_device import DatasetOnDevice
from .fused_optimizer import FusedOptimizer
from .grad_mode import GradMode
from .loader import LOADER_KEYS, LoaderSettings, Workers
from .nan_check import NanCheck
from .progress_bar import ProgressBar
from .statement import Statement
from .tf32 import Tf32
from .to_device import ToDevice

REGISTRY: tuple[Knob, ...] = (
    ToDevice(),
    Workers(),
    LoaderSettings(),
    DatasetOnDevice(),
    Batch(),
    Accumulation(),
    GradMode(),
    Autocast(),
    ChannelsLast(),
    Tf32(),
    CudnnBenchmark(),
    FusedOptimizer(),
    ProgressBar(),
    NanCheck(),
    Compile(),
    Statement(),
)
KNOWN_KEYS = frozenset(k for knob in REGISTRY for k in knob.keys)


def by_name(name: str) -> Knob | None:
    return next((k for k in REGISTRY if k.name == name), None)


def by_row(key: str) -> Knob | None:
    """The knob whose in-process rows (``Knob.local_rows``) include ``key``."""
    return next((k for k in REGISTRY if any(r.key == key for r in k.local_rows())), None)


def owners(changes: dict[str, Any]) -> list[Knob]:
    """The knobs whose keys ``changes`` sets, in registry order."""
    return [k for k in REGISTRY if any(key in changes for key in k.keys)]


def script_args(args: list[str], changes: dict[str, Any]) -> list[str]:
    """The script's command line for a re-run with ``changes``."""
    for knob in owners(changes):
        args = knob.script_args(args, changes)
    return args


def source_edits(changes: dict[str, Any]) -> dict[str, str] | str:
    """The files a re-run with ``changes`` runs changed (``Knob.source_edits``), or why not."""
    out: dict[str, str] = {}
    for knob in owners(changes):
        got = knob.source_edits(changes)
        if isinstance(got, str):
            return got
        out.update(got)
    return out


def run_items(changes: dict[str, Any], counted: int | None, base: int | None) -> int | None:
    """Items per step of a re-run with ``changes`` (``Knob.items``)."""
    for knob in owners(changes):
        counted = knob.items(changes, counted, base)
    return counted


def took_effect(facts: dict[str, Any] | None, changes: dict[str, Any]) -> str | None:
    """Why a re-run with ``changes`` shows one of them not taking effect (None: all did)."""
    why = [w for k in owners(changes) if (w := k.took_effect(facts, changes))]
    return "; ".join(dict.fromkeys(why)) or None


def extra_warmup(changes: dict[str, Any]) -> int:
    """The warm-up steps a re-run with ``changes`` needs beyond the control's."""
    return max((k.extra_warmup for k in owners(changes)), default=0)


def plan_groups(facts: dict[str, Any]) -> list[Group]:
    """Every knob's groups for this run. A knob that ``stacks_on`` another and plans nothing on
    the baseline (pinning without a GPU, prefetching without workers) still gets an empty group
    after that knob's, where that one runs: the driver plans it again on its winner."""
    s = Situation.of(facts)
    out: list[Group] = []
    for knob in REGISTRY:
        got = knob.groups(s)
        base = next((g for g in out if g.name == knob.stacks_on), None)
        if not got and base is not None and any(not a.skipped for a in base.arms):
            got = [Group(knob.name, base.priority * 0.5)]
        out += got
    return out


def recorded(model: Any, loader: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """What a watched run records for the knobs to plan by: of its main model (each knob's
    ``model_facts``) and of its DataLoader (the settings the loader and batch knobs change),
    read from the watch's records of them (``None``: not seen)."""
    of_model = {} if model is None else {
        k: getattr(model, a) for knob in REGISTRY for k, a in knob.model_facts
    }  # fmt: skip
    of_loader = {} if loader is None else {k: getattr(loader, k) for k in LOADER_KEYS}
    return of_model, of_loader


def not_planned(facts: dict[str, Any], names: frozenset[str]) -> dict[str, str]:
    """For each knob of ``names`` that plans nothing for this run: why (``--try`` answers)."""
    s = Situation.of(facts)
    return {k.name: k.not_planned(s) for k in REGISTRY if k.name in names and not k.groups(s)}


__all__ = [
    "KNOWN_KEYS",
    "LOADER_KEYS",
    "REGISTRY",
    "Arm",
    "Group",
    "Knob",
    "Situation",
    "by_name",
    "extra_warmup",
    "not_planned",
    "owners",
    "plan_groups",
    "recorded",
    "run_items",
    "script_args",
    "source_edits",
    "took_effect",
]
