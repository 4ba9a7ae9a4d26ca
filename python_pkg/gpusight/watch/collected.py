"""What the watch's hooks gather: host syncs and copies by the user's line, the loaders, the
outermost modules and the optimizers, and where the user's code built them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from .call_sites import CallSite, SiteCounts
from .float64_calls import Float64Calls
from .optimizers_seen import OptimizerSeen
from .placement import ModuleInfo
from .source_lines import Site


@dataclass
class SyncAgg:
    kind: str
    site: Site | None
    count: int = 0
    measured: int = 0
    """Of ``count``, those in clean (measured) steps."""
    host_ns: int = 0
    key: str = "?"
    """``file:line`` of the site (``?`` when none): its key in ``Collected.syncs``."""
    in_model: int = 0
    """Of ``count``, those made while a model's call was in flight (a CUDA graph of the model
    could not hold them: ``knobs/graph_safety.py``)."""


@dataclass
class CopyAgg:
    kind: str
    site: Site | None
    count: int = 0
    bytes: int = 0
    host_ns: int = 0
    measured: int = 0
    measured_bytes: int = 0
    measured_host_ns: int = 0


@dataclass(slots=True)
class CopySiteSeen:
    """One line that copies to the device: where it is, and what its sources were so far."""

    code: Any
    site: Site | None
    key: str
    pinned: bool
    calls: int = 0
    mixed: bool = False
    """Its sources were pinned at one copy and pageable at another."""


@dataclass
class LoaderSeen:
    num_workers: int | None = None
    pin_memory: bool | None = None
    batch_size: int | None = None
    persistent_workers: bool | None = None
    prefetch_factor: int | None = None
    calls: int = 0
    """Batches taken in the recorded steps (what a step's batches are counted over)."""
    late: int = 0
    """Batches taken in the steps after the measured ones (the FLOP count's, the line
    clock's), which no record counts."""
    dataset_id: int = 0
    """``id`` of the loader's dataset: how a batch's loader is matched with where it was built."""
    dataset_set_epoch: bool = False
    """The dataset has a ``set_epoch`` (Hugging Face's ``IterableDataset``, webdataset's): state
    the script changes per epoch in the main process, which kept workers would never see."""
    batches_per_epoch: int | None = None
    """``len()`` of the iterator: batches in one pass (None for an iterable without length)."""
    epoch_start_ns: list[int] = field(default_factory=list)
    """Per epoch seen (up to 8): making the iterator (workers started) and waiting for its first
    batch. An epoch pays it once; a what-if spreads it over the epoch's batches."""
    fetch_ns: int = 0
    fetch_cpu_ns: int = 0
    """Batches fetched in the main process (no workers), an epoch's first aside: their wall
    time and the fetching thread's CPU time meanwhile (loading that computes, or that waits)."""

    def fetch_cpu_pct(self) -> float | None:
        """The fetching thread's CPU time over the wall time of its fetches, in %; None without
        main-process fetches (a loader with workers)."""
        if self.fetch_ns <= 0:
            return None
        return round(100.0 * self.fetch_cpu_ns / self.fetch_ns, 1)


def busiest_loader(seen: Iterable[LoaderSeen]) -> LoaderSeen | None:
    """The loader that fed the most batches, its epochs' iterators counted together: each
    epoch's ``iter(loader)`` is an iterator of its own, and a step that spans two of them (two
    micro-batches of an accumulation) takes its batches from both. The iterators of one loader
    share its dataset and batch size."""
    merged: dict[tuple[int, int | None], LoaderSeen] = {}
    for s in seen:
        # A loader whose dataset is not known stands alone.
        key = (s.dataset_id, s.batch_size) if s.dataset_id else (id(s), None)
        got = merged.get(key)
        merged[key] = s if got is None else replace(got, calls=got.calls + s.calls)
    return max(merged.values(), key=lambda s: s.calls, default=None)


@dataclass
class Collected:
    """Everything the hooks gathered, handed to the report builder."""

    syncs: dict[str, SyncAgg] = field(default_factory=dict)
    copies: dict[tuple[str, str], CopyAgg] = field(default_factory=dict)
    loaders: dict[int, LoaderSeen] = field(default_factory=dict)
    modules: dict[int, ModuleInfo] = field(default_factory=dict)
    loader_sites: dict[int, CallSite] = field(default_factory=dict)
    """Where each DataLoader built during the watch was built, by ``id`` of its dataset."""
    forward_sites: dict[int, SiteCounts] = field(default_factory=dict)
    """The user's lines that called each top-level module, by ``id`` of the module."""
    optimizers: dict[int, OptimizerSeen] = field(default_factory=dict)
    """Each optimizer stepped, by ``id``, read at its first step (``optimizers_seen.py``)."""
    optimizer_sites: dict[int, CallSite] = field(default_factory=dict)
    """Where each optimizer built during the watch was built, by its ``id``."""
    float64: Float64Calls = field(default_factory=Float64Calls)
    """The user's lines that made a model or tensors float64 (``float64_calls.py``)."""
